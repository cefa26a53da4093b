-- One home per rule (issue 31, step 2). Each rule the SQL wrote in several places now has one:
--   * the kinds of work are rows of roi.work_kinds, which roi.work's foreign key refers to (the
--     generated urgency column, its check and the run rule's list of kinds go); roi.work keeps a copy
--     of its kind's urgency and run rule, held equal by the foreign key, so the claim stays on its index;
--   * roi.enqueue() is the one way into the queue, and wakes the worker;
--   * roi.start_run notes the recall outcomes and queues the checks of the judge itself (the AFTER
--     INSERT trigger on roi.recalls goes);
--   * roi.lexical_weights() holds ts_rank's weights, for recall and the postings alike;
--   * roi.write_verdicts() is the one writer of roi.verdicts.
-- Behaviour, public signatures and views are unchanged (docs/decisions/0018-one-home-per-rule.md).

-- ============================================================================================
-- The kinds of work
-- ============================================================================================

-- The kinds of work, one row each: the one list of them (roi.work's foreign key refers to it; the
-- worker checks its handlers against it when it starts). `urgency` orders the claim (a waiting run's
-- judgments first); `needs_run`: a row of the kind belongs to a run; `shows_snapshot`: the worker is
-- shown the run's recall snapshot of the probe (roi.claim_work, and the worker's read policy on
-- roi.recalls); `gives_up`: what roi.release_work does after the last failed attempt (skip_verdict:
-- the probe's verdict is recorded as skipped, so a partial run still completes; retire_probe: the
-- probe retires as generation_failed; drop: the row leaves, a sample that cannot be made is left out).
create table roi.work_kinds (
  kind text primary key,
  urgency smallint not null,
  needs_run boolean not null,
  shows_snapshot boolean not null,
  gives_up text not null check (gives_up in ('skip_verdict', 'retire_probe', 'drop')),
  unique (kind, urgency, needs_run)
);

insert into roi.work_kinds (kind, urgency, needs_run, shows_snapshot, gives_up) values
  ('judge', 0, true, true, 'skip_verdict'),
  ('closed_book', 1, true, false, 'drop'),
  ('judge_withheld', 1, true, true, 'drop'),
  ('judge_reversed', 1, true, true, 'drop'),
  ('write_question', 2, false, false, 'retire_probe'),
  ('embed_question', 3, false, false, 'drop');

alter table roi.work_kinds enable row level security;
-- No secret in it: everyone who queues or claims work reads what each kind is.
create policy "Those who queue or claim work read the kinds of work" on roi.work_kinds
  for select to authenticated, roi_worker using (true);
create policy "The embedder reads the kinds of work it queues" on roi.work_kinds
  for select to roi_embedder using (true);
grant select on roi.work_kinds to authenticated, roi_worker, roi_embedder;

-- roi.work: the kind's urgency and run rule copied from its row, under the foreign key, in place of
-- the generated column and the check that listed the kinds. Queued rows take their kind's values.
drop index roi.work_due_idx;
alter table roi.work drop constraint work_kind_is_known;
alter table roi.work drop constraint work_run_belongs_to_its_kind;
alter table roi.work drop column urgency;
alter table roi.work add column urgency smallint, add column needs_run boolean;
update roi.work w set urgency = k.urgency, needs_run = k.needs_run from roi.work_kinds k where k.kind = w.kind;
alter table roi.work
  add constraint work_kind_is_known foreign key (kind, urgency, needs_run)
    references roi.work_kinds (kind, urgency, needs_run) match full on update cascade,
  add constraint work_run_belongs_to_its_kind check ((run_id is not null) = needs_run);
create index work_due_idx on roi.work (urgency, run_after, id);

-- ============================================================================================
-- Functions
-- ============================================================================================

-- ts_rank's weights for D, C, B (the body) and A (the title): the title weighted like the body
-- (docs/decisions/0006). Their one home: recall ranks by them and the postings' impacts are ts_rank
-- by them (36_recall_postings_triggers.sql), which is what makes summed impacts rank as recall does.
-- IMMUTABLE with no argument, so the planner folds each call into a constant: a query reads
-- ts_rank('{…}'::real[], …), as if the array were written in place.
create function roi.lexical_weights() returns real[]
  language sql immutable security invoker set search_path = ''
as $$
  select '{0.1, 0.2, 0.4, 0.4}'::real[]
$$;

-- The lexical leg of both recalls, written once: the `depth` best live memories for the question in
-- the caller's layers under the pin (roi.recall_layers) and their personal layer, best first by
-- ts_rank (title weighted like the body), newest first among equals. Candidates come from the
-- postings of the question's lexemes in those layers (index-only scans, at most per_term per lexeme
-- and layer, so the cost does not grow with the layer). The question is an OR of lexemes, whose
-- ts_rank is the sum of the matched lexemes' impacts over their number: where no posting list was
-- cut, the summed impacts are ts_rank's order and only the memories within rounding of the depth-th
-- (ties included) are read by primary key and ranked again; where one was, the best `pool` by summed
-- impact are. Either way under the memories' own policy and the pin. No text: the recalls read the
-- text of the rows they return.
create or replace function roi.recall_lexical_leg(query text, pin_project uuid, pin_team uuid, personal_only boolean,
  depth integer)
  returns table (memory_id uuid, created_at timestamptz, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  -- Candidates: the per_term postings of highest impact of each question lexeme in each layer read,
  -- and where a list was cut the `pool` memories of highest summed impact, re-ranked exactly by
  -- ts_rank (docs/decisions/0007-impact-ordered-postings.md: the frontier of cost against the exact
  -- ranking; docs/decisions/0012-large-layers-get-hnsw-indexes.md: 1,500 rather than 2,000 reaches
  -- 10 ms at 100,000 rows for 0.7 of the exact top 10).
  per_term constant integer := 1500;
  pool constant integer := 500;
  -- Summed impacts within this factor of the depth-th are ranked again: float rounding, and ties.
  within_rounding constant real := 0.9999;
  tsq tsquery := public.recall_query(coalesce(query, ''));
  terms text[] := tsvector_to_array(to_tsvector('english'::regconfig, coalesce(query, '')));
  caller uuid := auth.uid();
  projects uuid[];
  teams uuid[];
begin
  select l.projects, l.teams into projects, teams from roi.recall_layers(pin_project, pin_team, personal_only) l;
  return query
    with layers as (
      select 'personal'::text as scope, caller as id where caller is not null
      union all
      select 'project', p from unnest(projects) p
      union all
      select 'team', t from unnest(teams) t
    ), postings as (
      select l.id as layer_id, t as lexeme, h.memory_id, h.impact
      from layers l
      cross join unnest(terms) t
      cross join lateral (
        select p.memory_id, p.impact from public.memory_postings p
        where p.layer_id = l.id and p.lexeme = t and p.scope = l.scope
        order by p.impact desc
        limit per_term
      ) h
    ), summed as (
      select p.memory_id, sum(p.impact) as impact from postings p group by p.memory_id
    ), cut as (
      -- A list was cut if it holds a per_term-th posting: probed on the index, so that the postings
      -- feed one aggregate and are never materialised (grouping them by list cost ~3.5 of 13 ms at
      -- 100,000 rows).
      select exists (
        select from layers l cross join unnest(terms) t
        where exists (select from public.memory_postings p
                      where p.layer_id = l.id and p.lexeme = t and p.scope = l.scope
                      order by p.impact desc
                      offset per_term - 1)) as list
    ), hits as (
      select s.memory_id from summed s
      where not (select c.list from cut c)
        and s.impact >= within_rounding * coalesce(
          (select x.impact from summed x order by x.impact desc offset greatest(depth - 1, 0) limit 1), 0)
      union all
      (select s.memory_id from summed s
       where (select c.list from cut c)
       order by s.impact desc
       limit pool)
    )
    select c.id, c.created_at, c.score
    from (
      select m.id, m.created_at, ts_rank(roi.lexical_weights(), m.search, tsq, 1)::real as score
      from public.memories m
      where m.id = any (array(select hits.memory_id from hits)) and m.invalidated_at is null
        and ((m.scope = 'personal' and m.author_id = caller)
             or (m.scope = 'project' and m.project_id = any (projects))
             or (m.scope = 'team' and m.team_id = any (teams)))
        and m.search @@ tsq
    ) c
    order by c.score desc, c.created_at desc, c.id
    limit depth;
end
$$;

-- The lexical recall: public.recall without a query embedding, and a recall of its own a deployment
-- can configure (the demo compares against it). Runs as the caller: row-level security decides what
-- exists, the pin decides which of it a session working in that scope would read (project or team
-- plus the caller's personal layer; `personal_only` the personal layer alone; no pin every project
-- and team the caller is a member of). Best match first, live memories only: the lexical leg
-- (roi.recall_lexical_leg), and the text of its best `match_count` read by primary key. A caller with
-- no identity and no pin (maintenance) reads everything their role may see, in its own statement.
create or replace function public.recall_lexical(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
  tsq tsquery;
begin
  if recall_lexical.project_id is null and recall_lexical.team_id is null and not coalesce(personal_only, false)
     and auth.uid() is null then
    tsq := public.recall_query(coalesce(query, ''));
    return query
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank(roi.lexical_weights(), m.search, tsq, 1)::real as score
      from public.memories m
      where m.invalidated_at is null and m.search @@ tsq
      order by score desc, m.created_at desc, m.id
      limit wanted;
    return;
  end if;
  return query
    with best as (
      select b.memory_id, b.created_at, b.score
      from roi.recall_lexical_leg(query, recall_lexical.project_id, recall_lexical.team_id, personal_only, wanted) b
    )
    -- `= any (array(…))`: the text of the chosen rows by primary key, never a join planned over the table.
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.memory_id = m.id
    where m.id = any (array(select best.memory_id from best))
    order by b.score desc, b.created_at desc, b.memory_id;
end
$$;

-- The bundled recall: the contract's five arguments plus two optional query embeddings (the documented
-- extension of the contract): the first model's (`embedding`) and MiniLM's (`embedding_minilm`).
-- Without an embedding, or for a caller with no identity and no pin (maintenance: exact distances over
-- a whole corpus are not a read path), it is the lexical recall. With one or both, the lexical leg
-- (roi.recall_lexical_leg, its best 2 × match_count) plus a semantic leg per embedding given (a leg
-- whose embedding is null is left out, so a deployment with one hosted model fuses two legs), over
-- the layers the lexical leg reads (roi.recall_layers): the semantic legs rank the embedded memories
-- by exact cosine distance from their covering indexes alone (index-only scans: id, created_at and the
-- distance; `minilm` on the second column), or, in a layer with HNSW indexes of its own
-- (42_recall_layer_indexes.sql), by those (ef_search 200; the e5 leg alone at 100,000 real-text
-- rows: the source in the top 10 for 70 of 81 questions against 73 exact, 2.3 against 275 ms), each
-- keeping its best 2 × match_count. Reciprocal rank fusion adds weight / (k + rank) per leg (k and
-- the three weights chosen on paraphrased questions: docs/decisions/0010), and only the best
-- match_count rows are read from the table for their text. Planned per call, unlike recall_lexical:
-- a generic plan estimates the pinned layers at a share of the table, and where one project holds
-- most of the memories that share made the semantic leg scan the whole table for every pin
-- (docs/decisions/0008).
create or replace function public.recall(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false,
  query_embedding extensions.vector default null,
  query_embedding_minilm extensions.vector default null
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_custom_plan
  set jit = off set hnsw.ef_search = 200
as $$
declare
  -- Chosen on the paraphrased questions with all three legs (docs/decisions/0010-three-recall-legs.md): a small k
  -- lets a leg's first ranks count, and the two embedding legs weigh alike, a quarter above the lexical.
  rrf_k constant integer := 5;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.25;
  minilm_weight constant real := 1.25;
  caller uuid := auth.uid();
  projects uuid[];
  teams uuid[];
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
  -- Each layer's nearest by distance alone, so a layer's own HNSW index can serve it (its order has
  -- no tie-breaks); twice what the leg keeps, so ties at the cut are still ranked by age.
  nearest integer := wanted * 4;
begin
  if (query_embedding is null and query_embedding_minilm is null)
     or (recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false) and caller is null) then
    return query select * from public.recall_lexical(query, recall.project_id, recall.team_id, match_count,
                                                      personal_only);
    return;
  end if;
  select l.projects, l.teams into projects, teams from roi.recall_layers(recall.project_id, recall.team_id, personal_only) l;
  return query
    with lexical as (
      select x.memory_id as id, x.created_at,
             row_number() over (order by x.score desc, x.created_at desc, x.memory_id) as rank
      from roi.recall_lexical_leg(query, recall.project_id, recall.team_id, personal_only, wanted * 2) x
    ), semantic as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        (select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding as distance
         from public.memories m
         where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
           and m.embedding is not null
         order by 3 limit nearest)
        union all
        (select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
         from public.memories m
         where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
           and m.embedding is not null
         order by 3 limit nearest)
        union all
        (select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
         from public.memories m
         where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
           and m.embedding is not null
         order by 3 limit nearest)
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
    ), minilm as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        (select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm as distance
         from public.memories m
         where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
           and m.embedding_minilm is not null
         order by 3 limit nearest)
        union all
        (select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
         from public.memories m
         where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
           and m.embedding_minilm is not null
         order by 3 limit nearest)
        union all
        (select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
         from public.memories m
         where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
           and m.embedding_minilm is not null
         order by 3 limit nearest)
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
    ), fused as (
      -- A leg whose query embedding is null is left out (planned per call, so it is not even read).
      select l.id, max(l.created_at) as created_at, sum(l.weight / (rrf_k + l.rank))::real as score
      from (
        select x.id, x.created_at, x.rank, lexical_weight as weight from lexical x
        union all
        select s.id, s.created_at, s.rank, semantic_weight from semantic s where query_embedding is not null
        union all
        select n.id, n.created_at, n.rank, minilm_weight from minilm n where query_embedding_minilm is not null
      ) l
      group by l.id
    ), best as (
      select f.id, f.created_at, f.score from fused f
      order by f.score desc, f.created_at desc, f.id
      limit wanted
    )
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.id = m.id
    where m.id = any (array(select best.id from best))
    order by b.score desc, b.created_at desc, b.id;
end
$$;

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The postings of memories just written: one per lexeme of each live one's search vector, its impact
-- the lexeme's ts_rank (recall's weights, roi.lexical_weights(), normalisation 1; the lexeme quoted as tsquery syntax wants,
-- so no text is parsed as an operator). One statement per insert statement: an import's COPY of
-- thousands of rows indexes them in one pass. Runs as the writer, under the postings' write policy.
create or replace function roi.post_new_memories() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  insert into public.memory_postings (memory_id, lexeme, impact, scope, layer_id, author_id)
  select n.id, l.lexeme,
         ts_rank(roi.lexical_weights(), n.search,
                 ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
         n.scope, coalesce(n.project_id, n.team_id, n.author_id), n.author_id
  from new_memories n
  cross join lateral unnest(n.search) l
  where n.invalidated_at is null;
  return null;
end
$$;

-- A memory whose words, layer or liveness changed gets its postings again (an invalidated one none).
-- A delete needs nothing here: the postings' foreign key cascades.
create or replace function roi.repost_memory() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
begin
  delete from public.memory_postings p where p.memory_id = old.id;
  if new.invalidated_at is null then
    insert into public.memory_postings (memory_id, lexeme, impact, scope, layer_id, author_id)
    select new.id, l.lexeme,
           ts_rank(roi.lexical_weights(), new.search,
                   ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
           new.scope, coalesce(new.project_id, new.team_id, new.author_id), new.author_id
    from unnest(new.search) l;
  end if;
  return null;
end
$$;

-- The one writer of roi.verdicts: the verdicts of run `target_run` for `target_probe` (null: every
-- probe of the run that has none yet), judged by `judged_by`. With a `skip_reason` they are recorded
-- as skipped; else 'deterministic' is the strict retrieval check (with_memory: the source is among
-- the surfaced results; without_memory: false) and any other judge's answers are recorded as given.
-- A verdict already recorded stays (never a second). Returns how many it recorded. PL/pgSQL for the
-- reason given at roi.close_run_if_done: it runs once per verdict the worker records.
create function roi.write_verdicts(target_run uuid, target_probe uuid, judged_by text,
  judged_with_memory boolean default null, judged_without_memory boolean default null,
  judged_confidence real default null, skip_reason text default null) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  recorded integer;
begin
  -- Two statements, one per shape of call, each with a plan of its own: a verdict the worker records
  -- reads one recall by its key (one statement with `target_probe is null or …` read the run's every
  -- recall, each through the worker's read policy: ~1 ms a verdict more).
  if target_probe is null then
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, confidence,
                              skipped, skip_reason, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id,
           case when skip_reason is not null then null
                when judged_by = 'deterministic' then p.memory_id = any (rc.surfaced_ids)
                else judged_with_memory end,
           case when skip_reason is not null then null
                when judged_by = 'deterministic' then false
                else judged_without_memory end,
           case when skip_reason is null then judged_confidence end,
           skip_reason is not null, skip_reason, judged_by
    from roi.recalls rc
    join roi.probes p on p.id = rc.probe_id
    where rc.run_id = target_run
    on conflict (run_id, probe_id) do nothing;
  else
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, confidence,
                              skipped, skip_reason, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id,
           case when skip_reason is not null then null
                when judged_by = 'deterministic' then p.memory_id = any (rc.surfaced_ids)
                else judged_with_memory end,
           case when skip_reason is not null then null
                when judged_by = 'deterministic' then false
                else judged_without_memory end,
           case when skip_reason is null then judged_confidence end,
           skip_reason is not null, skip_reason, judged_by
    from roi.recalls rc
    join roi.probes p on p.id = rc.probe_id
    where rc.run_id = target_run and rc.probe_id = target_probe
    on conflict (run_id, probe_id) do nothing;
  end if;
  get diagnostics recorded = row_count;
  return recorded;
end
$$;

-- The steps every way of closing a run shares, under the run's lock (so two workers recording the
-- last two verdicts cannot both miss the moment): nothing for a run gone or closed already; the
-- probes still unjudged recorded as skipped for `skip_reason` by `skipped_by`, when one is given;
-- then the closure, its pending run marked closed for rotation, and its judgments still queued
-- dropped. A run closes as 'complete' only once every probe has its verdict.
create or replace function roi.record_run_closure(target_run uuid, reason text, skip_reason text, skipped_by text)
  returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  run roi.runs;
begin
  perform pg_advisory_xact_lock(roi.run_lock_key(target_run));
  select * into run from roi.runs r where r.id = target_run;
  if run.id is null or exists (select from roi.run_closures c where c.run_id = target_run) then
    return false;
  end if;
  if skip_reason is not null then
    perform roi.write_verdicts(target_run, null, skipped_by, skip_reason => skip_reason);
  end if;
  if reason = 'complete' and (select count(*) from roi.verdicts v where v.run_id = target_run) < run.probe_count then
    return false;
  end if;
  insert into roi.run_closures (run_id, owner_id, reason) values (target_run, run.owner_id, reason)
  on conflict (run_id) do nothing;
  update roi.pending_runs pr set closed = true where pr.run_id = target_run;
  delete from roi.work w where w.run_id = target_run and w.kind = 'judge';
  return true;
end
$$;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced with its text-free outcome, and either record strict verdicts at once
-- (deterministic) or queue one judgment per probe and the run's checks of the judge (LLM). The run records which recall produced it and its questions' embedding model. A
-- deterministic run is judged and closed before this returns, so it is never pending (no
-- pending_runs row is written only to be deleted); benchmark_memory() rotates after it at once.
-- A question vector is compared only with vectors of its own model (issue 33): a semantic leg is left
-- out of the run (its question vectors passed as null, its model recorded as null, a hint in the
-- answer says to run `zm-roi embed`) when a live memory the caller can see holds a vector of that leg
-- from another model, or of no recorded model; a probe whose question another model embedded passes
-- null for that leg. One EXISTS per leg and run, read from the partial index of that leg's vectors by
-- layer and model (10_memory_core.sql): it reads only the caller's layers' rows of another model,
-- none in the usual case, whatever other users' memories hold.
create or replace function roi.start_run(mode text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  new_run uuid;
  run_started timestamptz;
  probe_total integer;
  question_model text;
  question_minilm_model text;
  legs smallint := (select s.recall_embeddings from roi.settings s);
  first_leg boolean;
  minilm_leg boolean;
  layers uuid[];
  left_out text;
  judged integer;
begin
  select count(*), mode() within group (order by p.question_embedding_model),
         mode() within group (order by p.question_embedding_minilm_model)
  into probe_total, question_model, question_minilm_model
  from roi.probes p where p.owner_id = (select auth.uid()) and p.state = 'active';
  -- The layers the caller reads (the memories' read policy's), each read as a range of the index
  -- by layer and model: `<`, `>` and null, not `is distinct from`, which no index serves.
  layers := array[(select auth.uid())] || array(select public.caller_project_ids())
            || array(select public.caller_team_ids());
  first_leg := legs > 0 and question_model is not null and not exists (
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model < question_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model > question_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model is null);
  minilm_leg := legs > 1 and question_minilm_model is not null and not exists (
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model < question_minilm_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model > question_minilm_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model is null);
  left_out := concat_ws(' and ',
    case when legs > 0 and question_model is not null and not first_leg then question_model end,
    case when legs > 1 and question_minilm_model is not null and not minilm_leg then question_minilm_model end);
  -- clock_timestamp(), not now(): runs started in one transaction still order by when they began.
  insert into roi.runs (owner_id, mode, probe_count, started_at, recall_function, embedding_model,
                        embedding_minilm_model)
  values ((select auth.uid()), mode, probe_total, clock_timestamp(),
          (select s.recall_function from roi.settings s),
          case when first_leg then question_model end,
          case when minilm_leg then question_minilm_model end)
  returning id, started_at into new_run, run_started;
  if mode <> 'deterministic' then
    insert into roi.pending_runs (run_id, owner_id, started_at) values (new_run, (select auth.uid()), run_started);
  end if;

  insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
  select new_run, p.id, p.owner_id,
         coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}'),
         coalesce(jsonb_agg(jsonb_build_object(
           'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
           'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
           filter (where r.memory_id is not null), '[]')
  from roi.probes p
  left join lateral roi.configured_recall(p.question, p.pin_project_id, p.pin_team_id, 10,
                                          p.source_scope = 'personal',
                                          case when first_leg and p.question_embedding_model = question_model
                                               then p.question_embedding end,
                                          case when minilm_leg and p.question_embedding_minilm_model = question_minilm_model
                                               then p.question_embedding_minilm end) r on true
  where p.owner_id = (select auth.uid()) and p.state = 'active'
  group by p.id, p.owner_id;

  update roi.probes p set runs_served = p.runs_served + 1
  where p.owner_id = (select auth.uid()) and p.state = 'active';
  perform roi.note_recall_outcomes(new_run);

  if mode = 'deterministic' then
    judged := roi.write_verdicts(new_run, null, 'deterministic');
    -- Every probe of the run has its verdict: the run is complete (roi.close_run_if_done's test,
    -- without its lock, its recount or a judging queue to clear, none of which a run nobody else
    -- can see yet needs).
    if judged >= probe_total then
      insert into roi.run_closures (run_id, owner_id, reason) values (new_run, (select auth.uid()), 'complete');
    else
      perform roi.close_run_if_done(new_run);
    end if;
  else
    -- One judgment per recall, then the run's checks of the judge.
    perform roi.enqueue('judge', (select auth.uid()),
                        array(select rc.probe_id from roi.recalls rc where rc.run_id = new_run), new_run);
    perform roi.queue_judge_checks(new_run);
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total)
    || case when left_out <> '' then jsonb_build_object('hint', format(
         'Semantic recall by %s was left out of this run: some of your memories hold vectors of another '
         'embedding model than the questions'', and vectors of two models cannot be compared. Run `zm-roi '
         'embed` to re-embed them.', left_out)) else '{}' end;
end
$$;

-- The text-free outcome of each recall of a run (source rank, kind, scope, question origin), which
-- owners read as they read verdicts (the retrieval figures of the views). Runs as whoever recorded the
-- recalls (the owner, inside the benchmark).
create function roi.note_recall_outcomes(target_run uuid) returns void
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  insert into roi.recall_outcomes (run_id, probe_id, owner_id, source_kind, source_scope, source_rank,
                                   question_origin)
  select n.run_id, n.probe_id, n.owner_id, p.source_kind, p.source_scope,
         array_position(n.surfaced_ids, p.memory_id), p.question_origin
  from roi.recalls n join roi.probes p on p.id = n.probe_id
  where n.run_id = target_run
  on conflict (run_id, probe_id) do nothing;
end
$$;

-- An LLM run's checks of the judge, each on probes of the run picked at random: up to
-- roi.settings.closed_book_checks closed-book spot-checks, withheld_source_checks leniency checks (among
-- probes whose source surfaced) and order_checks order checks (among probes with 2 or more results),
-- fewer when some are queued or recorded already. Nothing for a deterministic run. Runs as the owner,
-- inside the benchmark. Returns how many it queued.
create function roi.queue_judge_checks(target_run uuid) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  run roi.runs;
  picked record;
  queued integer := 0;
begin
  select * into config from roi.settings;
  select * into run from roi.runs r where r.id = target_run;
  if run.mode is distinct from 'llm' then
    return 0;
  end if;
  for picked in
    select c.kind, array_agg(x.probe_id) as probes
    from (values ('closed_book', config.closed_book_checks),
                 ('judge_withheld', config.withheld_source_checks),
                 ('judge_reversed', config.order_checks)) c (kind, wanted)
    cross join lateral (
      select n.probe_id
      from roi.recalls n
      join roi.probes p on p.id = n.probe_id
      where n.run_id = target_run
        and case c.kind when 'judge_withheld' then p.memory_id = any (n.surfaced_ids)
                        when 'judge_reversed' then cardinality(n.surfaced_ids) >= 2
                        else true end
      order by random()
      limit greatest(c.wanted
                     - (select count(*) from roi.work q where q.run_id = target_run and q.kind = c.kind)
                     - (select count(*) from roi.closed_book_results b
                        where c.kind = 'closed_book' and b.run_id = target_run)
                     - (select count(*) from roi.judge_check_results j
                        where j.run_id = target_run and j.kind = c.kind), 0)
    ) x
    where c.wanted > 0
    group by c.kind
  loop
    queued := queued + roi.enqueue(picked.kind, run.owner_id, picked.probes, target_run);
  end loop;
  return queued;
end
$$;

-- The one way into the queue: `work_kind` work on each of `probes` (of `owner`, and of `target_run`
-- for a kind that belongs to a run), carrying the kind's urgency and run rule from roi.work_kinds for
-- the claim's index and the foreign key (an unknown kind has none and is refused there). Work already
-- queued is left as it is. Wakes the worker (NOTIFY roi_work, the kind as payload; polling finds
-- what a lost notification did not announce). Runs as the caller, under roi.work's policies. Returns
-- how many rows it queued.
create function roi.enqueue(work_kind text, owner uuid, probes uuid[], target_run uuid default null)
  returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  queued integer;
begin
  insert into roi.work (kind, owner_id, probe_id, run_id, urgency, needs_run)
  select work_kind, owner, p, target_run, k.urgency, k.needs_run
  from unnest(probes) p
  left join roi.work_kinds k on k.kind = work_kind
  on conflict do nothing;
  get diagnostics queued = row_count;
  if queued > 0 then
    perform pg_notify('roi_work', work_kind);
  end if;
  return queued;
end
$$;

-- A probe's work follows its state, in one place: a pending probe waits for its question
-- (write_question), an active one with no embedding for its embedding (embed_question), and work
-- that no longer applies leaves with the state change (a question written or taken over, a probe
-- rotated out; checks of a probe whose source the owner lost). Runs as whoever changed the probe
-- (the owner inside the benchmark, upkeep as the owner, or the worker) and wakes the worker.
create or replace function roi.queue_probe_work() returns trigger
  language plpgsql security invoker set search_path = ''
as $$
declare
  wanted text;
begin
  if tg_op = 'UPDATE' then
    delete from roi.work w
    where w.probe_id = new.id
      and ((w.kind = 'write_question' and old.state = 'pending')
           or (w.kind = 'embed_question' and old.state = 'active')
           -- a run's samples (the kinds that belong to a run and are dropped when they fail)
           or (w.kind = any (array(select k.kind from roi.work_kinds k where k.needs_run and k.gives_up = 'drop'))
               and new.retired_reason in ('source_invalidated', 'source_unreachable')));
  end if;
  wanted := case when new.state = 'pending' then 'write_question'
                 when new.state = 'active' and new.question_embedding is null then 'embed_question' end;
  if wanted is not null then
    perform roi.enqueue(wanted, new.owner_id, array[new.id]);
  end if;
  return null;
end
$$;

-- How a judgment leaves the queue (its row locked by the caller), judged or skipped: its one verdict
-- (a second is a no-op), the note kept out of owners' sight, the row gone, the run closed if complete.
create or replace function roi.settle_judgment(job_id bigint, judged_with_memory boolean, judged_without_memory boolean,
  judged_confidence real, settled_note text) returns boolean
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job record;
  recorded integer;
begin
  select w.run_id, w.probe_id, w.owner_id into job
  from roi.work w
  where w.id = job_id and w.kind = 'judge';
  if not found then
    return false;
  end if;
  recorded := roi.write_verdicts(job.run_id, job.probe_id, 'llm', judged_with_memory, judged_without_memory,
                                 judged_confidence, case when judged_with_memory is null then 'judge_failed' end);
  if recorded > 0 and nullif(btrim(coalesce(settled_note, '')), '') is not null then
    insert into roi.verdict_notes (run_id, probe_id, owner_id, note)
    values (job.run_id, job.probe_id, job.owner_id, left(settled_note, 2000));
  end if;
  delete from roi.work w where w.id = job_id;
  perform roi.close_run_if_done(job.run_id);
  return recorded > 0;
end
$$;

-- A failed attempt goes back to the queue after a backoff that grows with each attempt
-- (graphile-worker's formula, the one for every kind); after max_attempts the row gives up the way
-- its kind does (roi.work_kinds.gives_up): a judgment is recorded as skipped ('judge_failed', the last error in the gated
-- notes, so a partial run still completes and counts what was judged), a question that cannot be
-- written retires its probe ('generation_failed'), a spot-check, a check of the judge or an embedding
-- is dropped (a sample that cannot be made is left out; the question stays lexical-only). `attempt` fences a stale worker:
-- once the row was released or claimed again, a release of that attempt changes nothing.
create or replace function roi.release_work(work_id bigint, attempt integer, failure text) returns text
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  job roi.work;
begin
  select * into job from roi.work w where w.id = work_id and w.lease_until is not null for update;
  if not found or job.attempts <> attempt then
    return 'stale';
  end if;
  if job.attempts < (select s.max_attempts from roi.settings s) then
    update roi.work w
    set lease_until = null,
        last_error = left(failure, 1000),
        run_after = greatest(now(), w.run_after) + exp(least(w.attempts, 10)) * interval '1 second'
    where w.id = job.id;
    return 'retry';
  end if;
  case (select k.gives_up from roi.work_kinds k where k.kind = job.kind)
    when 'skip_verdict' then
      perform roi.settle_judgment(job.id, null, null, null, coalesce(nullif(failure, ''), 'judge failed'));
      return 'skipped';
    when 'retire_probe' then
      update roi.probes p
      set state = 'retired', retired_reason = 'generation_failed', retired_at = now(), last_error = left(failure, 1000)
      where p.id = job.probe_id and p.state = 'pending';
      delete from roi.work w where w.id = job.id;
      return 'retired';
    else
      delete from roi.work w where w.id = job.id;
      return 'dropped';
  end case;
end
$$;

-- Hands a worker the most urgent due row that is not leased (a waiting run's judgments first, then
-- the run's checks, questions to write, questions to embed; oldest first within a kind) under a fresh
-- lease, with what its kind needs and nothing more (a check of the judge gets the recall snapshot as
-- its check shows it, roi.judge_check_surfaced). A crashed worker's row comes back by itself once
-- the lease runs out; a row whose last allowed attempt died with its worker gives up when its turn
-- comes, as a failing attempt would have, and the next row is handed out instead. The lease is
-- written by a HOT update (no index covers attempts or lease_until), so a claim adds no index entries.
-- One round trip per poll, whatever the kind. lease_seconds is the lease handed out, by this
-- database's clock: the worker times its model calls from it (zm_roi/worker.py, call_timeout), so a
-- call never outlives the lease and a longer lease_duration gives a call longer.
create or replace function roi.claim_work()
  returns table (work_id bigint, kind text, attempt integer, owner_id uuid, run_id uuid, probe_id uuid,
                 question text, source_kind text, source_title text, source_body text, surfaced jsonb,
                 lease_seconds double precision)
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  config roi.settings;
  next_row record;
begin
  select * into config from roi.settings;
  loop
    select w.id, w.attempts, w.lease_until into next_row from roi.work w
    where w.run_after <= now() and (w.lease_until is null or w.lease_until < now())
    order by w.urgency, w.run_after, w.id
    limit 1
    for update skip locked;
    exit when not found or next_row.lease_until is null or next_row.attempts < config.max_attempts;
    -- Giving up removes the row (or, had max_attempts just been raised, puts it off): the loop ends.
    perform roi.release_work(next_row.id, next_row.attempts, 'the worker stopped during its last attempt');
  end loop;
  if not found then
    return;
  end if;

  return query
  with claimed as (
    update roi.work w
    set attempts = w.attempts + 1, lease_until = now() + config.lease_duration
    where w.id = next_row.id
    returning w.id, w.kind, w.attempts, w.owner_id, w.run_id, w.probe_id, w.lease_until
  )
  select c.id, c.kind, c.attempts, c.owner_id, c.run_id, c.probe_id, p.question,
         case when c.kind <> 'embed_question' then p.source_kind end,
         case when c.kind <> 'embed_question' then p.source_title end,
         case when c.kind <> 'embed_question' then p.source_body end,
         -- Only a check reshapes the snapshot: the call costs ~0.1 ms a claim (measured), most claims judge.
         case when c.kind in ('judge_withheld', 'judge_reversed')
           then roi.judge_check_surfaced(c.kind, r.surfaced, p.memory_id, p.source_body) else r.surfaced end,
         extract(epoch from c.lease_until - now())::double precision
  from claimed c
  join roi.probes p on p.id = c.probe_id
  left join roi.recalls r on c.kind = any (array(select k.kind from roi.work_kinds k where k.shows_snapshot))
                         and r.run_id = c.run_id and r.probe_id = c.probe_id;
end
$$;

-- `zm-roi embed` (as roi_embedder, which never reads a question): queue embed_question work for the
-- active questions not embedded by `model` (or, when given, by `minilm_model` in the second leg), for
-- the worker to embed. Returns how many were queued.
create or replace function roi.queue_question_embeddings(model text, minilm_model text default null) returns integer
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  queued integer;
begin
  select coalesce(sum(roi.enqueue('embed_question', o.owner_id, o.probes)), 0) into queued
  from (select p.owner_id, array_agg(p.id) as probes from roi.probes p
        where p.state = 'active'
          and (p.question_embedding_model is distinct from model
               or (minilm_model is not null and p.question_embedding_minilm_model is distinct from minilm_model))
        group by p.owner_id) o;
  return queued;
end
$$;

-- The checks of the judge are queued by roi.start_run itself now, and the outcomes noted there.
drop trigger recalls_note_outcomes on roi.recalls;
drop function roi.note_recall_outcomes();

-- ============================================================================================
-- Policies
-- ============================================================================================
alter policy "The worker reads the recall snapshots it judges" on roi.recalls
  using (exists (select from roi.work w
                 where w.kind = any (array(select k.kind from roi.work_kinds k where k.shows_snapshot))
                   and w.run_id = recalls.run_id and w.probe_id = recalls.probe_id));

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke execute on function roi.lexical_weights(), roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text),
  roi.note_recall_outcomes(uuid), roi.queue_judge_checks(uuid), roi.enqueue(text, uuid, uuid[], uuid)
  from public;
-- Every writer of memories computes their postings' impacts with the weights.
grant execute on function roi.lexical_weights() to authenticated, service_role;
grant execute on function roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text),
  roi.note_recall_outcomes(uuid), roi.queue_judge_checks(uuid), roi.enqueue(text, uuid, uuid[], uuid)
  to authenticated;
grant execute on function roi.write_verdicts(uuid, uuid, text, boolean, boolean, real, text),
  roi.enqueue(text, uuid, uuid[], uuid) to roi_worker;
grant execute on function roi.enqueue(text, uuid, uuid[], uuid) to roi_embedder;
