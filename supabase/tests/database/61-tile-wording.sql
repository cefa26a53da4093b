-- The tile view words every state itself: a finished run whose every question was skipped is
-- `no_score` (not `ready` with "Judging…" forever), and deterministic runs carry the caveat saying
-- which figure their strict check bounds in which direction; LLM runs carry none. Every word is the
-- view's (the invite quotes roi.settings.pool_target), the hint says what its count is, the view
-- names the scored run, and an all-skipped latest run is no_score even after an earlier score.
begin;
select plan(16);

select tests.create_user('skipped@tile.test');
select tests.create_user('strict@tile.test');
insert into public.memories (author_id, scope, kind, title, body)
select tests.user_id(u), 'personal', 'decision', 'Tile fact ' || i || ' ' || u, 'Body of tile fact ' || i
from generate_series(1, 3) i, unnest(array['skipped@tile.test', 'strict@tile.test']) u;

-- Before any run: the invite, its words from the view, the pool size from the settings.
update roi.settings set pool_target = 3;
select tests.authenticate_as('skipped@tile.test');
select results_eq($$select state, headline, explanation, scored_run_id from public.roi_benchmark_tile$$,
  $$values ('invite', 'No benchmark yet', 'It asks about 3 questions drawn from your own decisions, gotchas and '
    'conventions, and counts the ones your memory answers that a bare agent could not.', null::uuid)$$,
  'the invite is worded by the view, with the configured pool size');
select tests.clear_authentication();

-- LLM mode: a run is started, then the judge fails for every question.
update roi.settings set extractor = 'llm';
select tests.authenticate_as('skipped@tile.test');
select is(public.benchmark_memory() ->> 'status', 'generating', 'LLM mode: the pool is queued');
select tests.clear_authentication();
update roi.probes set question = 'What about ' || source_title || '?', state = 'active', activated_at = now()
where owner_id = tests.user_id('skipped@tile.test');
select tests.authenticate_as('skipped@tile.test');
create temporary table started on commit drop as select (public.benchmark_memory() ->> 'run_id')::uuid as run_id;
select results_eq($$select state, hint from public.roi_benchmark_tile$$,
  $$values ('judging', 'Judging 3 questions from your memory…')$$, 'while judged: judging, with the count');
select tests.clear_authentication();
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, skipped, skip_reason, judged_by)
select j.run_id, j.probe_id, j.owner_id, p.memory_id, true, 'judge_failed', 'llm'
from roi.work j join roi.probes p on p.id = j.probe_id where j.kind = 'judge' and j.run_id = (select run_id from started);
select ok(roi.close_run_if_done((select run_id from started)), 'every question skipped: the run closes');

select tests.authenticate_as('skipped@tile.test');
select is((select status from public.roi_benchmark_runs), 'complete', 'the run is complete');
select results_eq($$select state, exclusive_rate, caveat from public.roi_benchmark_tile$$,
  $$values ('no_score', null::numeric, null::text)$$,
  'a finished run with nothing judged is no_score: no rate, never ready');
select is((select hint from public.roi_benchmark_tile),
  'None of the latest run''s 3 questions could be judged: ask your agent to run benchmark_memory again.',
  'the hint says what happened and what to do, not "Judging…"');
select tests.clear_authentication();

-- Deterministic mode: the rate comes with the sentence that says what it bounds.
update roi.settings set extractor = 'deterministic';
select tests.authenticate_as('strict@tile.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'deterministic: a run at once');
select results_eq($$select state, caveat from public.roi_benchmark_tile$$,
  $$values ('ready', 'In deterministic mode only the source memory counts as an answer, so search success is if '
    'anything under-counted, and no question is assumed answerable without memory, so this rate is an upper bound '
    'on what only memory knows.')$$, 'a deterministic score carries the caveat');
select tests.clear_authentication();

-- An LLM-judged score carries none.
insert into roi.runs (owner_id, mode, probe_count, started_at)
select tests.user_id('skipped@tile.test'), 'llm', 1, now() + interval '1 minute';
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
select r.id, p.id, r.owner_id, array[p.memory_id], '[]'
from roi.runs r join roi.probes p on p.owner_id = r.owner_id
where r.owner_id = tests.user_id('skipped@tile.test') and r.id <> (select run_id from started) limit 1;
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, true, false, 'llm'
from roi.recalls rc join roi.probes p on p.id = rc.probe_id
where rc.owner_id = tests.user_id('skipped@tile.test') and rc.run_id <> (select run_id from started);
insert into roi.run_closures (run_id, owner_id, reason)
select id, owner_id, 'complete' from roi.runs
where owner_id = tests.user_id('skipped@tile.test') and id <> (select run_id from started);
select tests.authenticate_as('skipped@tile.test');
select results_eq($$select state, exclusive_rate, caveat from public.roi_benchmark_tile$$,
  $$values ('ready', 1.0000::numeric, null::text)$$, 'an LLM-judged score: ready, no caveat');
select tests.clear_authentication();

-- The hint states what the count is: a judge that says neither side answers gives 0 exclusive, and
-- the tile must not call those questions ones "a bare agent could not answer".
insert into roi.runs (owner_id, mode, probe_count, started_at)
select tests.user_id('skipped@tile.test'), 'llm', 2, now() + interval '2 minutes';
create temporary table neither on commit drop as
  select id as run_id from roi.runs where owner_id = tests.user_id('skipped@tile.test')
  order by started_at desc limit 1;
grant select on neither to authenticated;
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
select (select run_id from neither), p.id, p.owner_id, '{}', '[]'
from roi.probes p where p.owner_id = tests.user_id('skipped@tile.test') order by p.id limit 2;
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
select (select run_id from neither), p.id, p.owner_id, p.memory_id, false, false, 'llm'
from roi.probes p where p.owner_id = tests.user_id('skipped@tile.test') order by p.id limit 2;
insert into roi.run_closures (run_id, owner_id, reason)
select run_id, tests.user_id('skipped@tile.test'), 'complete' from neither;
select tests.authenticate_as('skipped@tile.test');
select results_eq($$select state, hint, scored_run_id, headline from public.roi_benchmark_tile$$,
  $$select 'ready', '0 of 2 questions only memory answered', run_id, null::text from neither$$,
  'the hint names the exclusive count as what only memory answered; the view names the scored run');
select tests.clear_authentication();

-- After that score, a run whose every question is skipped: no_score, as the README promises, with
-- no rate (an older one would pose as the latest measurement); the trend keeps the earlier scores.
insert into roi.runs (owner_id, mode, probe_count, started_at)
select tests.user_id('skipped@tile.test'), 'llm', 2, now() + interval '3 minutes';
create temporary table all_skipped on commit drop as
  select id as run_id from roi.runs where owner_id = tests.user_id('skipped@tile.test')
  order by started_at desc limit 1;
grant select on all_skipped to authenticated;
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
select (select run_id from all_skipped), p.id, p.owner_id, '{}', '[]'
from roi.probes p where p.owner_id = tests.user_id('skipped@tile.test') order by p.id limit 2;
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, skipped, skip_reason, judged_by)
select (select run_id from all_skipped), p.id, p.owner_id, p.memory_id, true, 'judge_failed', 'llm'
from roi.probes p where p.owner_id = tests.user_id('skipped@tile.test') order by p.id limit 2;
insert into roi.run_closures (run_id, owner_id, reason)
select run_id, tests.user_id('skipped@tile.test'), 'complete' from all_skipped;
select tests.authenticate_as('skipped@tile.test');
select results_eq(
  $$select state, exclusive_rate, exclusive_count, judged_count, scored_run_id, latest_run_id, headline
    from public.roi_benchmark_tile$$,
  $$select 'no_score', null::numeric, null::integer, null::integer, null::uuid, run_id,
           'No score for the latest run' from all_skipped$$,
  'an all-skipped latest run after a score: no_score, no rate, latest_run_id is that run');
select is((select hint from public.roi_benchmark_tile),
  'None of the latest run''s 2 questions could be judged: ask your agent to run benchmark_memory again.',
  'its hint says what happened and what to do');
select is((select trend from public.roi_benchmark_tile), array[1.0000, 0.0000]::numeric[],
  'the trend keeps the earlier scores');
select tests.clear_authentication();

-- A newer run being judged beside a score: the view says so (clients used to word it themselves).
insert into roi.runs (owner_id, mode, probe_count, started_at)
select tests.user_id('strict@tile.test'), 'llm', 4, now() + interval '1 minute';
select tests.authenticate_as('strict@tile.test');
select results_eq($$select state, note from public.roi_benchmark_tile$$,
  $$values ('judging', 'A newer run of 4 questions is being judged.')$$, 'the note names the newer run');
select is((select scored_run_id from public.roi_benchmark_tile),
  (select run_id from public.roi_benchmark_runs where status = 'complete'), 'the scored run is the completed one');
select tests.clear_authentication();

select * from finish();
rollback;
