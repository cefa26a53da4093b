-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The ROI benchmark's tables, part 2 of 2: what runs record. Recall snapshots, verdicts and the
-- judge's notes on them, closures, rotations, the text-free recall outcomes, the checks of the judge
-- and its calibrations, and the owners' schedules with the runs they started. Every result table is
-- append-only (the list of them and their triggers are here too), and every policy and grant on each
-- table sits beside it, owners' and the worker's together. Cut from 30_roi_probes_runs_and_work.sql
-- because these tables only refer to it: a run's results, once the run and its queue exist.

-- ============================================================================================
-- Tables
-- ============================================================================================
-- What surfaced for each probe of a run, in rank order, and the text a model judge will see. A
-- deterministic run's judge reads the ids alone, so its snapshots keep no text (`surfaced` null):
-- no copy of memory text nobody reads, and ~120 kB less written a call (docs/decisions/0045).
create table roi.recalls (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  surfaced_ids uuid[] not null,
  surfaced jsonb,
  recalled_at timestamptz not null default now(),
  primary key (run_id, probe_id)
);
-- Stored uncompressed: pglz on ~5.5 kB of jsonb would cost every run ~1.7 ms.
alter table roi.recalls alter column surfaced set storage external;

create index recalls_probe_idx on roi.recalls (probe_id);
create index recalls_owner_idx on roi.recalls (owner_id);

-- One verdict per probe of a run. Booleans and ids only: no memory text, so owners may read it.
-- Skipped: the run timed out, the judge kept failing, the probe retired, the database switched to
-- deterministic mode while the run waited for a judge ('mode_changed'), or a spending cap stopped the
-- run ('budget').
create table roi.verdicts (
  id bigint generated always as identity primary key,
  run_id uuid not null,
  probe_id uuid not null,
  owner_id uuid not null references auth.users (id) on delete cascade,
  memory_id uuid not null,
  with_memory boolean,
  without_memory boolean,
  skipped boolean not null default false,
  skip_reason text check (skip_reason in ('timeout', 'judge_failed', 'probe_retired', 'mode_changed', 'budget')),
  confidence real check (confidence between 0 and 1),
  judged_by text not null check (judged_by in ('deterministic', 'llm', 'timeout', 'budget')),
  recorded_at timestamptz not null default now(),
  unique (run_id, probe_id),
  -- A verdict judges one recall snapshot, which holds the run and the probe: one key checked a row
  -- instead of two, and a verdict for a recall never taken is refused (docs/decisions/0045).
  foreign key (run_id, probe_id) references roi.recalls (run_id, probe_id) on delete cascade,
  check (skipped = (with_memory is null)),
  check (skipped = (without_memory is null)),
  check (skipped = (skip_reason is not null))
);

create index verdicts_owner_run_idx on roi.verdicts (owner_id, run_id);

-- The judge's free-text reason (or, for a skipped verdict, the last error) is derived from memory
-- text, so it stays out of roi.verdicts, which owners read. Only the worker role reads it.
create table roi.verdict_notes (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  note text not null,
  recorded_at timestamptz not null default now(),
  primary key (run_id, probe_id)
);

create index verdict_notes_probe_idx on roi.verdict_notes (probe_id);
create index verdict_notes_owner_idx on roi.verdict_notes (owner_id);

-- A run is closed once it has a closure: every probe judged or skipped ('complete'), the timeout
-- passed ('timeout'), or a spending cap stopped it ('aborted_budget': its own status, never scored,
-- never compared).
create table roi.run_closures (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  reason text not null check (reason in ('complete', 'timeout', 'aborted_budget')),
  closed_at timestamptz not null default now()
);

create index run_closures_owner_idx on roi.run_closures (owner_id);

-- After a completed run a few long-serving probes rotate out; one row per run makes it happen once.
create table roi.rotations (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  retired_count integer not null,
  rotated_at timestamptz not null default now()
);

create index rotations_owner_idx on roi.rotations (owner_id);

-- Text-free facts of each recall: where the source ranked (null: it did not surface), and the
-- probe's kind and scope, for the retrieval figures and the breakdown. Copied from the snapshot by
-- roi.note_recall_outcomes(), which it refers to as verdicts do.
create table roi.recall_outcomes (
  run_id uuid not null,
  probe_id uuid not null,
  owner_id uuid not null references auth.users (id) on delete cascade,
  source_kind text not null,
  source_scope text not null,
  source_rank integer check (source_rank >= 1),
  -- The probe's question_origin when the run recalled it (text-free: the runs view counts it).
  question_origin text,
  primary key (run_id, probe_id),
  foreign key (run_id, probe_id) references roi.recalls (run_id, probe_id) on delete cascade
);

create index recall_outcomes_owner_idx on roi.recall_outcomes (owner_id);

-- Whether the bare model (question only, no memory) answered as the ground truth does. Append-only.
create table roi.closed_book_results (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  bare_correct boolean not null,
  recorded_at timestamptz not null default now(),
  primary key (run_id, probe_id)
);

create index closed_book_results_owner_idx on roi.closed_book_results (owner_id);
create index closed_book_results_probe_idx on roi.closed_book_results (probe_id);

-- The judges of a run: model and judge-prompt hash (prompts.fingerprint), one row per distinct
-- fingerprint, written with each LLM verdict (roi.record_verdict). No memory text, so the owner reads
-- it, as they read verdicts. Append-only.
create table roi.run_judges (
  run_id uuid not null references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  judge_fingerprint text not null check (length(judge_fingerprint) between 1 and 300),
  recorded_at timestamptz not null default now(),
  primary key (run_id, judge_fingerprint)
);

create index run_judges_owner_idx on roi.run_judges (owner_id);

-- What the judge said when checked: source withheld, or results in reverse order. Booleans and ids
-- only, so the owner reads it, as they read verdicts. Append-only.
create table roi.judge_check_results (
  run_id uuid not null references roi.runs (id) on delete cascade,
  probe_id uuid not null references roi.probes (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  kind text not null check (kind in ('judge_withheld', 'judge_reversed')),
  with_memory boolean not null,
  without_memory boolean not null,
  recorded_at timestamptz not null default now(),
  primary key (run_id, probe_id, kind)
);

create index judge_check_results_owner_idx on roi.judge_check_results (owner_id);
create index judge_check_results_probe_idx on roi.judge_check_results (probe_id);

-- A judge's measured error: one row per `zm-roi judge-check --record`, the judge (fingerprint as
-- runs record it, model) and per label the four counts of its verdicts against the calibration set's
-- gold labels (tp: gold true, judged true; fp: gold false, judged true; tn; fn). Counts only: no
-- case text reaches the database. Written by the operator (the database owner); an owner reads the
-- rows whose fingerprint judged one of their runs, and the runs view corrects a run's exclusive rate
-- with the newest row of its judge (a newer check supersedes an older one). Append-only.
create table roi.judge_calibrations (
  id bigint generated always as identity primary key,
  -- The check's usage events carry it as their run_id (purpose judge_check).
  check_id uuid not null unique,
  judge_fingerprint text not null check (length(judge_fingerprint) between 1 and 300),
  model text not null check (length(model) between 1 and 200),
  -- Cases put to the judge; the four counts of a label add up to those it judged (a case whose every
  -- reply failed to parse is left out of the counts, never guessed).
  case_count integer not null check (case_count > 0),
  recorded_at timestamptz not null default now(),
  with_memory_tp integer not null check (with_memory_tp >= 0),
  with_memory_fp integer not null check (with_memory_fp >= 0),
  with_memory_tn integer not null check (with_memory_tn >= 0),
  with_memory_fn integer not null check (with_memory_fn >= 0),
  without_memory_tp integer not null check (without_memory_tp >= 0),
  without_memory_fp integer not null check (without_memory_fp >= 0),
  without_memory_tn integer not null check (without_memory_tn >= 0),
  without_memory_fn integer not null check (without_memory_fn >= 0),
  exclusive_tp integer not null check (exclusive_tp >= 0),
  exclusive_fp integer not null check (exclusive_fp >= 0),
  exclusive_tn integer not null check (exclusive_tn >= 0),
  exclusive_fn integer not null check (exclusive_fn >= 0),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn
         = without_memory_tp + without_memory_fp + without_memory_tn + without_memory_fn),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn
         = exclusive_tp + exclusive_fp + exclusive_tn + exclusive_fn),
  check (with_memory_tp + with_memory_fp + with_memory_tn + with_memory_fn between 1 and case_count)
);

create index judge_calibrations_fingerprint_idx on roi.judge_calibrations (judge_fingerprint, id desc);

-- An owner's wish for a routine run (`zm-roi schedule --daily|--weekly`; `--off` removes it). The
-- owner reads and writes their own row through public.benchmark_schedule(); upkeep (80_roi_upkeep.sql) honours it.
create table roi.benchmark_schedules (
  owner_id uuid primary key references auth.users (id) on delete cascade,
  frequency text not null check (frequency in ('daily', 'weekly')),
  updated_at timestamptz not null default now()
);

-- The runs a schedule started, one per owner and period at most (the key says so). Append-only, read
-- by the owner, so the run list can say which runs were scheduled.
create table roi.scheduled_runs (
  run_id uuid primary key references roi.runs (id) on delete cascade,
  owner_id uuid not null references auth.users (id) on delete cascade,
  period_start timestamptz not null,
  unique (owner_id, period_start)
);

-- ============================================================================================
-- Result tables
-- ============================================================================================
-- The one list of result tables: rows recorded once and never rewritten. Declared here, not found
-- by their triggers, so that a test can hold each to the rule (supabase/tests/database/
-- 33-result-tables.sql): every table listed carries both append-only triggers below and no role but
-- its owner may update, delete or truncate it; every table carrying either trigger is listed; and
-- every table of schema roi, read from the catalog, is listed unless the test names it a state table
-- (rows that change by design), so a result table cannot leave the list with its triggers unnoticed. A
-- new result table joins this list (in its own migration: create or replace view) and gets both triggers.
create view roi.result_tables with (security_invoker = true) as
select t.table_name
from (values ('roi.runs'), ('roi.recalls'), ('roi.verdicts'), ('roi.run_closures'), ('roi.rotations'),
             ('roi.recall_outcomes'), ('roi.closed_book_results'), ('roi.run_judges'),
             ('roi.judge_check_results'), ('roi.verdict_notes'), ('roi.judge_calibrations'),
             ('roi.scheduled_runs')) t (table_name);

create trigger recalls_are_append_only before update or delete on roi.recalls
  for each row execute function roi.forbid_result_change();
create trigger verdicts_are_append_only before update or delete on roi.verdicts
  for each row execute function roi.forbid_result_change();
create trigger verdict_notes_are_append_only before update or delete on roi.verdict_notes
  for each row execute function roi.forbid_result_change();
create trigger run_closures_are_append_only before update or delete on roi.run_closures
  for each row execute function roi.forbid_result_change();
create trigger rotations_are_append_only before update or delete on roi.rotations
  for each row execute function roi.forbid_result_change();
create trigger recall_outcomes_are_append_only before update or delete on roi.recall_outcomes
  for each row execute function roi.forbid_result_change();
create trigger closed_book_results_are_append_only before update or delete on roi.closed_book_results
  for each row execute function roi.forbid_result_change();
create trigger run_judges_are_append_only before update or delete on roi.run_judges
  for each row execute function roi.forbid_result_change();
create trigger judge_check_results_are_append_only before update or delete on roi.judge_check_results
  for each row execute function roi.forbid_result_change();
create trigger judge_calibrations_are_append_only before update or delete on roi.judge_calibrations
  for each row execute function roi.forbid_result_change();
create trigger scheduled_runs_are_append_only before update or delete on roi.scheduled_runs
  for each row execute function roi.forbid_result_change();

create trigger recalls_refuse_truncate before truncate on roi.recalls
  for each statement execute function roi.forbid_result_truncate();
create trigger verdicts_refuse_truncate before truncate on roi.verdicts
  for each statement execute function roi.forbid_result_truncate();
create trigger verdict_notes_refuse_truncate before truncate on roi.verdict_notes
  for each statement execute function roi.forbid_result_truncate();
create trigger run_closures_refuse_truncate before truncate on roi.run_closures
  for each statement execute function roi.forbid_result_truncate();
create trigger rotations_refuse_truncate before truncate on roi.rotations
  for each statement execute function roi.forbid_result_truncate();
create trigger recall_outcomes_refuse_truncate before truncate on roi.recall_outcomes
  for each statement execute function roi.forbid_result_truncate();
create trigger closed_book_results_refuse_truncate before truncate on roi.closed_book_results
  for each statement execute function roi.forbid_result_truncate();
create trigger run_judges_refuse_truncate before truncate on roi.run_judges
  for each statement execute function roi.forbid_result_truncate();
create trigger judge_check_results_refuse_truncate before truncate on roi.judge_check_results
  for each statement execute function roi.forbid_result_truncate();
create trigger judge_calibrations_refuse_truncate before truncate on roi.judge_calibrations
  for each statement execute function roi.forbid_result_truncate();
create trigger scheduled_runs_refuse_truncate before truncate on roi.scheduled_runs
  for each statement execute function roi.forbid_result_truncate();

-- ============================================================================================
-- Who reads and writes each table
-- ============================================================================================
-- Recall snapshots carry memory text: the owner handles them only inside the benchmark, the worker
-- reads only those its queued work shows it.
alter table roi.recalls enable row level security;
create policy "Owners handle recall snapshots only inside the benchmark" on roi.recalls
  for all to authenticated
  using (owner_id = (select auth.uid()) and (select roi.inside_benchmark()))
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));
create policy "The worker reads the recall snapshots it judges" on roi.recalls
  for select to roi_worker
  using (exists (select from roi.work w
                 where w.kind = any (array(select k.kind from roi.work_kinds k where k.shows_snapshot))
                   and w.run_id = recalls.run_id and w.probe_id = recalls.probe_id));
grant select, insert on roi.recalls to authenticated;
grant select on roi.recalls to roi_worker;

alter table roi.verdicts enable row level security;
create policy "Owners read their verdicts" on roi.verdicts
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners record verdicts only inside the benchmark" on roi.verdicts
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));
create policy "The worker reads the verdicts of open runs" on roi.verdicts
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = verdicts.run_id));
create policy "The worker records verdicts for queued judgments only" on roi.verdicts
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'judge' and w.run_id = verdicts.run_id and w.probe_id = verdicts.probe_id));
grant select, insert on roi.verdicts to authenticated;
grant select, insert on roi.verdicts to roi_worker;

-- The judge's notes are derived from memory text: only the worker reads them, owners never.
alter table roi.verdict_notes enable row level security;
create policy "The worker reads verdict notes" on roi.verdict_notes
  for select to roi_worker using (true);
create policy "The worker writes notes for queued judgments only" on roi.verdict_notes
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'judge' and w.run_id = verdict_notes.run_id
                        and w.probe_id = verdict_notes.probe_id));
grant select, insert on roi.verdict_notes to roi_worker;

alter table roi.run_closures enable row level security;
create policy "Owners read their run closures" on roi.run_closures
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners close runs only inside the benchmark" on roi.run_closures
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));
create policy "The worker reads run closures" on roi.run_closures
  for select to roi_worker using (true);
create policy "The worker closes runs that completed or that a spending cap stopped" on roi.run_closures
  for insert to roi_worker with check (reason in ('complete', 'aborted_budget'));
grant select, insert on roi.run_closures to authenticated;
grant select, insert on roi.run_closures to roi_worker;

alter table roi.rotations enable row level security;
create policy "Owners read their rotations" on roi.rotations
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners rotate only inside the benchmark" on roi.rotations
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));
grant select, insert on roi.rotations to authenticated;

alter table roi.recall_outcomes enable row level security;
create policy "Owners read their recall outcomes" on roi.recall_outcomes
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "Owners record recall outcomes only inside the benchmark" on roi.recall_outcomes
  for insert to authenticated
  with check (owner_id = (select auth.uid()) and (select roi.inside_benchmark()));
grant select, insert on roi.recall_outcomes to authenticated;

alter table roi.closed_book_results enable row level security;
create policy "Owners read their spot-check results" on roi.closed_book_results
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "The worker reads spot-check results" on roi.closed_book_results
  for select to roi_worker using (true);
create policy "The worker records results for queued spot-checks only" on roi.closed_book_results
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = 'closed_book' and w.run_id = closed_book_results.run_id
                        and w.probe_id = closed_book_results.probe_id));
grant select on roi.closed_book_results to authenticated;
grant select, insert on roi.closed_book_results to roi_worker;

alter table roi.run_judges enable row level security;
create policy "Owners read the judges of their runs" on roi.run_judges
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "The worker reads the judges of open runs" on roi.run_judges
  for select to roi_worker
  using (exists (select from roi.pending_runs pr where pr.run_id = run_judges.run_id));
create policy "The worker records the judge of queued judgments only" on roi.run_judges
  for insert to roi_worker
  with check (exists (select from roi.work w where w.kind = 'judge' and w.run_id = run_judges.run_id));
grant select on roi.run_judges to authenticated;
grant select, insert on roi.run_judges to roi_worker;

alter table roi.judge_check_results enable row level security;
create policy "Owners read their judge check results" on roi.judge_check_results
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "The worker reads judge check results" on roi.judge_check_results
  for select to roi_worker using (true);
create policy "The worker records results for queued judge checks only" on roi.judge_check_results
  for insert to roi_worker
  with check (exists (select from roi.work w
                      where w.kind = judge_check_results.kind and w.run_id = judge_check_results.run_id
                        and w.probe_id = judge_check_results.probe_id));
grant select on roi.judge_check_results to authenticated;
grant select, insert on roi.judge_check_results to roi_worker;

alter table roi.judge_calibrations enable row level security;
-- A calibration is the operator's, not an owner's: an owner reads those of the judges that judged
-- their runs (counts only), so the runs view can correct their rates; no other. Nobody but the
-- database owner (the operator's `zm-roi judge-check --record`) writes one.
create policy "Owners read the calibrations of the judges of their runs" on roi.judge_calibrations
  for select to authenticated
  using (judge_fingerprint in (select j.judge_fingerprint from roi.run_judges j
                               where j.owner_id = (select auth.uid())));
grant select on roi.judge_calibrations to authenticated;

alter table roi.benchmark_schedules enable row level security;
alter table roi.scheduled_runs enable row level security;
create policy "Owners keep their own benchmark schedule" on roi.benchmark_schedules
  for all to authenticated
  using (owner_id = (select auth.uid()))
  with check (owner_id = (select auth.uid()));
create policy "Owners read which of their runs a schedule started" on roi.scheduled_runs
  for select to authenticated using (owner_id = (select auth.uid()));
-- The schedule: the owner's own wish, written through public.benchmark_schedule() as the owner.
revoke all on roi.benchmark_schedules, roi.scheduled_runs from public, anon, authenticated;
grant select, insert, update, delete on roi.benchmark_schedules to authenticated;
grant select on roi.scheduled_runs to authenticated;
