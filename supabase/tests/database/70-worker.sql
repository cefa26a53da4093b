-- roi_worker, the LLM worker's role: least privilege (no memories, no users, only its verbs), it sees
-- only what queued rows carry, and what it writes stays where owners and clients cannot read it.
begin;
select plan(47);

-- The claim hands out any owner's work: rows that suites run earlier on this cluster committed wait
-- until this transaction (rolled back) is over, so the claims below see this file's rows alone.
update roi.work set run_after = 'infinity';

select tests.create_user('owner@worker.test');
select tests.create_user('idle@worker.test');
insert into public.memories (id, author_id, scope, kind, title, body) values
  ('00000000-0000-0000-0000-00000000d001', tests.user_id('owner@worker.test'), 'personal', 'decision', 'pending source', 'p'),
  ('00000000-0000-0000-0000-00000000d002', tests.user_id('owner@worker.test'), 'personal', 'decision', 'judged source', 'j'),
  ('00000000-0000-0000-0000-00000000d003', tests.user_id('owner@worker.test'), 'personal', 'decision', 'idle source', 'i'),
  ('00000000-0000-0000-0000-00000000d004', tests.user_id('idle@worker.test'), 'personal', 'decision', 'other source', 'o');
-- The active questions are embedded already (no embed_question work), as the worker leaves them.
insert into roi.probes (id, owner_id, memory_id, source_kind, source_scope, source_title, source_body, question,
                        state, activated_at, question_embedding, question_embedding_model)
select v.id::uuid, tests.user_id(v.email), v.memory_id::uuid, 'decision', 'personal', v.title, v.body, v.question,
       v.state, case when v.state = 'active' then now() - interval '1 day' end,
       case when v.state = 'active' then array_fill(0.1::real, array[384])::extensions.vector end,
       case when v.state = 'active' then 'pgtap' end
from (values
  ('00000000-0000-0000-0000-00000000e001', 'owner@worker.test', '00000000-0000-0000-0000-00000000d001',
   'pending source', 'p', null, 'pending'),
  ('00000000-0000-0000-0000-00000000e002', 'owner@worker.test', '00000000-0000-0000-0000-00000000d002',
   'judged source', 'j', 'What was judged?', 'active'),
  ('00000000-0000-0000-0000-00000000e003', 'owner@worker.test', '00000000-0000-0000-0000-00000000d003',
   'idle source', 'i', 'What sits idle?', 'active'),
  ('00000000-0000-0000-0000-00000000e004', 'idle@worker.test', '00000000-0000-0000-0000-00000000d004',
   'other source', 'o', 'What is the other one?', 'active')) v (id, email, memory_id, title, body, question, state);
insert into roi.runs (id, owner_id, mode, probe_count) values
  ('00000000-0000-0000-0000-00000000f001', tests.user_id('owner@worker.test'), 'llm', 2);
insert into roi.pending_runs (run_id, owner_id, started_at) values
  ('00000000-0000-0000-0000-00000000f001', tests.user_id('owner@worker.test'), now());
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced) values
  ('00000000-0000-0000-0000-00000000f001', '00000000-0000-0000-0000-00000000e002', tests.user_id('owner@worker.test'), '{}', '[]'),
  ('00000000-0000-0000-0000-00000000f001', '00000000-0000-0000-0000-00000000e003', tests.user_id('owner@worker.test'), '{}', '[]');
-- Only e002's judgment is still queued; e003's was judged already.
select roi.enqueue('judge', tests.user_id('owner@worker.test'), array['00000000-0000-0000-0000-00000000e002'::uuid],
                   '00000000-0000-0000-0000-00000000f001');
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by) values
  ('00000000-0000-0000-0000-00000000f001', '00000000-0000-0000-0000-00000000e003', tests.user_id('owner@worker.test'),
   '00000000-0000-0000-0000-00000000d003', true, false, 'llm');
select roi.store_provider_key(tests.user_id('owner@worker.test'), 'openai', 'sk-owner', 'pass');
select roi.store_provider_key(tests.user_id('idle@worker.test'), 'openai', 'sk-idle', 'pass');
insert into public.usage_events (owner_id, purpose, model, input_tokens, output_tokens, byok) values
  (tests.user_id('owner@worker.test'), 'judgment', 'pgtap-model', 100, 10, false),
  (tests.user_id('owner@worker.test'), 'judgment', 'pgtap-model', 200, 20, true),
  (tests.user_id('idle@worker.test'), 'probe_generation', 'pgtap-model', 300, 30, false);

select tests.user_id('owner@worker.test') as owner_id, tests.user_id('idle@worker.test') as idle_id \gset

-- The role itself.
select has_role('roi_worker', 'the migration creates roi_worker');
select is((select rolsuper or rolbypassrls or rolcreaterole or rolcreatedb from pg_roles where rolname = 'roi_worker'),
  false, 'roi_worker has no superuser, bypassrls, createrole or createdb');
select is_empty(
  $$select p.proname from pg_proc p where p.pronamespace = 'roi'::regnamespace
    and has_function_privilege('roi_worker', p.oid, 'execute') and p.proname not in
    ('claim_work', 'release_work', 'record_question', 'record_question_embedding',
     'record_question_embedding_minilm', 'record_verdict',
     'settle_judgment', 'record_usage', 'owner_provider_key', 'close_run_if_done', 'record_run_closure',
     'run_lock_key', 'record_closed_book', 'template_question', 'record_judge_check', 'judge_check_surfaced',
     'budget_refusal', 'abort_run_for_budget', 'defer_work', 'question_length_bounds', 'enqueue',
     'write_verdicts')$$,
  'roi_worker executes its own verbs (and what they call) and nothing else in roi');

-- Who sees what: 1 issue first (the superuser sees every probe), then the worker's view.
select is((select count(*)::int from roi.probes where owner_id in (tests.user_id('owner@worker.test'),
  tests.user_id('idle@worker.test'))), 4, 'the superuser sees all four probes');
set local role roi_worker;
select results_eq($$select id::text from roi.probes where id::text like '00000000-0000-0000-0000-00000000e%' order by id$$,
  array['00000000-0000-0000-0000-00000000e001', '00000000-0000-0000-0000-00000000e002'],
  'the worker sees the pending probe and the probe with a queued judgment, no other question');
select results_eq($$select probe_id::text from roi.recalls where run_id = '00000000-0000-0000-0000-00000000f001'$$,
  array['00000000-0000-0000-0000-00000000e002'],
  'the worker sees only the recall snapshot it has to judge');
select is((select count(*)::int from roi.provider_keys where owner_id = :'owner_id'), 1,
  'the worker sees the key of an owner it has work for');
select is((select count(*)::int from roi.provider_keys where owner_id = :'idle_id'), 0,
  'the worker does not see the key of an owner it has no work for');
select throws_ok($$select 1 from public.memories$$, '42501', null, 'the worker cannot read memories');
select throws_ok($$select * from public.recall('source')$$, '42501', null, 'the worker cannot call recall');
select throws_ok($$select public.benchmark_memory()$$, '42501', null, 'the worker cannot run a benchmark');
select throws_ok($$select roi.top_up_pool()$$, '42501', null, 'the worker cannot top up pools');
select throws_ok($$select 1 from auth.users$$, '42501', null, 'the worker cannot read users');
select is((select count(*)::int from public.usage_events where owner_id = :'owner_id'), 2,
  'the worker reads what an owner it has work for spent (counts and dollars: the spending caps)');
select is((select count(*)::int from public.usage_events where owner_id = :'idle_id'), 0,
  'and nothing of an owner it has no work for');
select throws_ok($$select * from roi.deployment_token_totals$$, '42501', null, 'the worker cannot read the totals');

-- What it may write, and what not.
select throws_ok(
  $$insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
    select '00000000-0000-0000-0000-00000000f001', p.id, p.owner_id, p.memory_id, true, true, 'llm'
    from roi.probes p where p.id = '00000000-0000-0000-0000-00000000e001'$$,
  '42501', null, 'the worker cannot record a verdict for a probe with no queued judgment');
select throws_ok($$update roi.verdicts set with_memory = false$$, '42501', null,
  'the worker cannot change a recorded verdict');
select throws_ok($$update roi.probes set source_body = 'rewritten'$$, '42501', null,
  'the worker cannot rewrite a probe''s ground truth');
-- One queue, one claim: the waiting run's judgment comes before the question to write, each with what
-- its kind needs; a leased row is not handed out again, and a stale release changes nothing.
select results_eq($$select kind, probe_id::text, attempt, question, source_title, surfaced from roi.claim_work()$$,
  $$values ('judge', '00000000-0000-0000-0000-00000000e002', 1, 'What was judged?', 'judged source', '[]'::jsonb)$$,
  'the first claim hands out the judgment, with its question, ground truth and recall snapshot');
select results_eq($$select kind, probe_id::text, question, source_title, surfaced from roi.claim_work()$$,
  $$values ('write_question', '00000000-0000-0000-0000-00000000e001', null::text, 'pending source', null::jsonb)$$,
  'the second the question to write, with the source and nothing else');
select is_empty($$select * from roi.claim_work()$$, 'leased rows are not claimed twice');
select is(roi.release_work((select id from roi.work where kind = 'judge'), 2, 'late'), 'stale',
  'a release for another attempt changes nothing');
select is(roi.release_work((select id from roi.work where kind = 'judge'), 1, 'boom'), 'retry',
  'a failed attempt goes back to the queue');
select is((select run_after > now() from roi.work where kind = 'judge'), true, 'after a backoff');
select is(roi.record_verdict('00000000-0000-0000-0000-00000000f001', '00000000-0000-0000-0000-00000000e002',
  true, false, 0.7, 'the first result answers it'), true, 'the worker records the queued verdict');
select is(roi.record_verdict('00000000-0000-0000-0000-00000000f001', '00000000-0000-0000-0000-00000000e002',
  false, false, 0.7, 'again'), false, 'a second verdict for the same probe of the run is a no-op');
select is(roi.record_question('00000000-0000-0000-0000-00000000e001', 'What is pending here, and why?'), true,
  'the worker writes the pending probe''s question');
select is_empty($$select 1 from roi.probes where id = '00000000-0000-0000-0000-00000000e002'$$,
  'once judged, the probe is out of the worker''s sight again');

-- Owners: verdicts yes, the judge's notes and the keys never, not even inside the benchmark's gate.
reset role;
select is((select count(*)::int from roi.verdicts where run_id = '00000000-0000-0000-0000-00000000f001'), 2,
  'the run has exactly two verdicts');
select tests.authenticate_as('owner@worker.test');
select roi.open_gate();
select is((select count(*)::int from roi.verdicts), 2, 'the owner reads their verdicts');
select throws_ok($$select * from roi.verdict_notes$$, '42501', null, 'the owner cannot read the judge''s notes');
select throws_ok($$select * from roi.provider_keys$$, '42501', null, 'the owner cannot read stored keys');
select throws_ok($$select * from roi.claim_work()$$, '42501', null, 'the owner cannot claim queued work');
select throws_ok($$select * from roi.deployment_token_totals$$, '42501', null,
  'users cannot read the deployment''s token totals');
select tests.clear_authentication();

-- The operators' totals leave out calls made on an owner's own key.
select results_eq(
  $$select calls::int, input_tokens::int, output_tokens::int from roi.deployment_token_totals where model = 'pgtap-model'
    order by purpose$$,
  $$values (1, 100, 10), (1, 300, 30)$$,
  'totals count the deployment''s calls only, not the 200 tokens on the owner''s own key');

-- The kinds of work are the rows of roi.work_kinds, the one list of them (70_roi_queue.sql's header).
select results_eq(
  $$select kind, urgency::int, needs_run, shows_snapshot, gives_up from roi.work_kinds order by urgency, kind$$,
  $$values ('judge', 0, true, true, 'skip_verdict'), ('closed_book', 1, true, false, 'drop'),
           ('judge_reversed', 1, true, true, 'drop'), ('judge_withheld', 1, true, true, 'drop'),
           ('write_question', 2, false, false, 'retire_probe'), ('embed_question', 3, false, false, 'drop')$$,
  'six kinds of work, each with its urgency, run rule, snapshot and way of giving up');
select throws_ok(
  format($$select roi.enqueue('nonsense', %L, array['00000000-0000-0000-0000-00000000e003'::uuid])$$, :'owner_id'),
  '23503', 'insert or update on table "work" violates foreign key constraint "work_kind_is_known"', 'an unknown kind is refused by roi.work''s foreign key to the kinds');
select throws_ok(
  format($$insert into roi.work (kind, owner_id, probe_id) values ('embed_question', %L, '00000000-0000-0000-0000-00000000e003')$$,
         :'owner_id'),
  '23503', 'insert or update on table "work" violates foreign key constraint "work_kind_is_known"', 'a row queued without its kind''s urgency (not through roi.enqueue) is refused too');
select throws_ok(
  format($$select roi.enqueue('judge', %L, array['00000000-0000-0000-0000-00000000e003'::uuid])$$, :'owner_id'),
  '23514', null, 'a kind that belongs to a run is refused without one');
select is(roi.enqueue('embed_question', :'owner_id', array['00000000-0000-0000-0000-00000000e003'::uuid]), 1,
  'roi.enqueue queues a known kind, with its urgency');
select is(roi.enqueue('embed_question', :'owner_id', array['00000000-0000-0000-0000-00000000e003'::uuid]), 0,
  'work already queued stays as it is');
update roi.work_kinds set urgency = 7 where kind = 'embed_question';
select is((select urgency::int from roi.work where probe_id = '00000000-0000-0000-0000-00000000e003'
           and kind = 'embed_question'), 7,
  'a kind''s new urgency reaches its queued rows (the foreign key cascades it)');

-- roi.start_run queues the run's judgments and checks of the judge itself, in plain sight: no
-- trigger on roi.recalls does it.
select hasnt_trigger('roi', 'recalls', 'recalls_note_outcomes', 'no trigger on roi.recalls queues work');
update roi.settings set closed_book_checks = 1, withheld_source_checks = 0, order_checks = 0, extractor = 'llm';
select tests.authenticate_as('idle@worker.test');
select roi.open_gate();
create temporary table started on commit drop as select roi.start_run('llm') as r;
select tests.clear_authentication();
select results_eq(
  $$select (select count(*)::int from roi.recalls c where c.run_id = (select (r ->> 'run_id')::uuid from started)),
           (select count(*)::int from roi.work w where w.kind = 'judge' and w.run_id = (select (r ->> 'run_id')::uuid from started))$$,
  $$values (1, 1)$$,
  'start_run queues one judgment per recall of the run');
select is((select count(*)::int from roi.work w where w.kind = 'closed_book'
           and w.run_id = (select (r ->> 'run_id')::uuid from started)), 1,
  'and the spot-check its settings ask for');
select is((select count(*)::int from roi.recall_outcomes o where o.run_id = (select (r ->> 'run_id')::uuid from started)), 1,
  'and notes each recall''s text-free outcome');

select * from finish();
rollback;
