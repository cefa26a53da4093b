-- Each claim below is checked, then broken once inside this transaction (a savepoint that
-- opens a policy or grants a column), to show the same check sees the break, then rolled back
-- (splinter's habit: the failure, the fix, the pass). What a broken state measured is carried past
-- the rollback in a psql variable (\gset), since pgTAP's own results would roll back with it.
--   1. an LLM-mode owner's rows, queued, pending and recorded, in every table that can hold them,
--      are unreadable by another user;
--   2. the tile's and the run list's 95% interval are the Wilson bounds (20 of 20: 0.8389 to 1);
--   3. roi_embedder reads only active questions and writes no memory text;
--   4. closed-book probes are picked at random;
--   5. the hybrid recall fuses with k = 5 and weights 1 (lexical), 1.25 (e5) and 1.25 (MiniLM).
begin;
select plan(23);

-- What one statement does as the current role: 'ok', or the SQLSTATE that refused it.
create function pg_temp.outcome(statement text) returns text language plpgsql as $$
begin
  execute statement;
  return 'ok';
exception when others then
  return sqlstate;
end
$$;

-- The owner's rows the current role can read, per table that can hold a user's rows (a foreign key to
-- auth.users, from the catalog: a queue table added later is counted without editing this file).
-- Tables the role may not select from at all count as 0 rows read.
create function pg_temp.readable_owner_rows(owner uuid) returns table (relation text, row_count bigint)
  language plpgsql as $$
declare
  t record;
begin
  for t in
    select format('%I.%I', n.nspname, r.relname) as rel, a.attname as col
    from pg_constraint c
    join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
    join pg_class r on r.oid = c.conrelid join pg_namespace n on n.oid = r.relnamespace
    where c.contype = 'f' and c.confrelid = 'auth.users'::regclass and c.conrelid <> 'auth.users'::regclass
  loop
    relation := t.rel;
    if has_table_privilege(current_user, t.rel, 'select') then
      execute format('select count(*) from %s where %I = $1', t.rel, t.col) into row_count using owner;
    else
      row_count := 0;
    end if;
    return next;
  end loop;
end
$$;
grant execute on function pg_temp.readable_owner_rows(uuid), pg_temp.outcome(text) to authenticated, roi_embedder;

-- ---------------------------------------------------------------------------------------------
-- 1. An LLM-mode owner with rows in every table that can hold a user's rows: through
--    benchmark_memory() pending probes, a run's recalls, outcomes, queued judgments, queued
--    spot-checks and a pending run; through upkeep a pending probe; and, as the worker would leave
--    them, the run's verdicts, notes, spot-check result, judge check results, closure, rotation, judge,
--    usage and a stored key; and a schedule with the run it started.
-- ---------------------------------------------------------------------------------------------
select tests.create_user('owner@break.test');
select tests.create_user('other@break.test');
select tests.user_id('owner@break.test') as owner_id \gset
insert into public.projects (id, name) values ('00000000-0000-0000-0000-0000000b4e01', 'break-project');
insert into public.teams (id, name) values ('00000000-0000-0000-0000-0000000b4e02', 'break-team');
insert into public.project_members values ('00000000-0000-0000-0000-0000000b4e01', :'owner_id');
insert into public.team_members values ('00000000-0000-0000-0000-0000000b4e02', :'owner_id');
insert into public.memories (author_id, scope, kind, title, body)
select :'owner_id', 'personal', (array['decision', 'gotcha', 'convention'])[1 + i % 3],
       format('Break fact %s %s', i, md5('break' || i)), format('Settled %s for reason %s.', i, md5('why' || i))
from generate_series(1, 3) i;
update roi.settings set extractor = 'llm', pool_target = 3, closed_book_checks = 2;

select tests.authenticate_as('owner@break.test');
select is(public.benchmark_memory() ->> 'status', 'generating', 'LLM mode: the first call queues pending probes');
select tests.clear_authentication();
-- The worker's job, done by hand: each pending probe gets a question.
update roi.probes set question = 'What did we settle about ' || source_title || '?', state = 'active',
                      activated_at = now()
where owner_id = :'owner_id';
select tests.authenticate_as('owner@break.test');
select b ->> 'status' as status, b ->> 'run_id' as run_id from public.benchmark_memory() b \gset
select tests.clear_authentication();
select is(:'status'::text, 'started', 'the next call starts a run and queues its judgments');
-- A fourth memory and a bigger pool: upkeep queues a pending probe while the run waits for a judge.
insert into public.memories (author_id, scope, kind, title, body)
values (:'owner_id', 'personal', 'gotcha', 'Break fact four', 'Learned while judging.');
update roi.settings set pool_target = 4;
select roi.upkeep();
-- What the worker leaves once it has judged (its verbs change; the rows they write do not).
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
select r.run_id, r.probe_id, r.owner_id, p.memory_id, true, false, 'llm'
from roi.recalls r join roi.probes p on p.id = r.probe_id where r.run_id = :'run_id';
insert into roi.verdict_notes (run_id, probe_id, owner_id, note)
select run_id, probe_id, owner_id, 'The first result says so.' from roi.recalls where run_id = :'run_id';
insert into roi.closed_book_results (run_id, probe_id, owner_id, bare_correct)
select run_id, probe_id, owner_id, false from roi.recalls where run_id = :'run_id' limit 1;
insert into roi.run_closures (run_id, owner_id, reason) values (:'run_id', :'owner_id', 'complete');
insert into roi.rotations (run_id, owner_id, retired_count) values (:'run_id', :'owner_id', 0);
insert into roi.run_judges (run_id, owner_id, judge_fingerprint) values (:'run_id', :'owner_id', 'pgtap#judge.j2@0');
insert into roi.judge_check_results (run_id, probe_id, owner_id, kind, with_memory, without_memory)
select run_id, probe_id, owner_id, k, true, false from roi.recalls, unnest(array['judge_withheld', 'judge_reversed']) k
where run_id = :'run_id' limit 2;
insert into public.usage_events (owner_id, purpose, model, input_tokens, output_tokens, run_id)
values (:'owner_id', 'judgment', 'pgtap-break', 100, 10, :'run_id');
select roi.store_provider_key(:'owner_id', 'openai', 'sk-break-owner', 'break passphrase');
-- The owner's schedule, and the run it would have started.
insert into roi.benchmark_schedules (owner_id, frequency) values (:'owner_id', 'daily');
insert into roi.scheduled_runs (run_id, owner_id, period_start) values (:'run_id', :'owner_id', now());

create temporary table held on commit drop as
select relation, row_count from pg_temp.readable_owner_rows(:'owner_id');
select is(array(select relation from held where row_count = 0 order by 1), '{}'::text[],
  'the owner has rows in every table that can hold a user''s rows, listed from the catalog');
select ok((select count(*) from roi.probes where owner_id = :'owner_id' and state = 'pending') > 0
          and exists (select from roi.pending_runs where owner_id = :'owner_id')
          and (select count(distinct kind) from roi.work where owner_id = :'owner_id') >= 3,
  'among them pending probes, a pending run and queued work of three kinds: the queued state is what is checked');

select tests.authenticate_as('other@break.test');
select is((select sum(row_count)::int from pg_temp.readable_owner_rows(:'owner_id')), 0,
  'another user reads none of the owner''s rows, queued or recorded, in any table');
select tests.clear_authentication();

-- Broken once: every owner table gets a select grant and a permissive select policy open to all.
savepoint opened;
do $$
declare t record;
begin
  for t in select relation from held loop
    execute format('grant select on %s to authenticated', t.relation);
    execute format('create policy "Broken on purpose" on %s for select to authenticated using (true)', t.relation);
  end loop;
end
$$;
select tests.authenticate_as('other@break.test');
select count(*) filter (where row_count > 0) as tables_leaking
from pg_temp.readable_owner_rows(:'owner_id') \gset
rollback to savepoint opened;
select is(:tables_leaking::int, (select count(*)::int from held),
  'with the policies opened the same check sees the owner''s rows in every table that holds them');
select tests.authenticate_as('other@break.test');
select is((select sum(row_count)::int from pg_temp.readable_owner_rows(:'owner_id')), 0,
  'and after the rollback another user reads none again');
select tests.clear_authentication();

-- ---------------------------------------------------------------------------------------------
-- 3. roi_embedder: active questions only, and no memory text written.
-- ---------------------------------------------------------------------------------------------
select ok(exists (select from roi.probes where state <> 'active'), 'there are probes that are not active');
set local role roi_embedder;
select is((select count(*)::int from roi.probes where state <> 'active'), 0,
  'roi_embedder reads no pending or retired probe');
select ok((select count(*) from roi.probes) > 0, 'but it does read active questions, to embed them');
select is(pg_temp.outcome($$update public.memories set title = 'rewritten'$$), '42501',
  'roi_embedder cannot rewrite a memory''s title');
select is(pg_temp.outcome($$update public.memories set body = body$$), '42501',
  'nor its body');
reset role;

savepoint embedder_opened;
create policy "Broken on purpose" on roi.probes for select to roi_embedder using (true);
grant update (title, body, invalidated_at) on public.memories to roi_embedder;
set local role roi_embedder;
select count(*) filter (where state <> 'active') as embedder_saw_pending from roi.probes \gset
select pg_temp.outcome($$update public.memories set title = title$$) as embedder_rewrite \gset
rollback to savepoint embedder_opened;
select ok(:embedder_saw_pending > 0, 'with its probes policy opened the check sees roi_embedder read pending probes');
select is(:'embedder_rewrite'::text, 'ok', 'with the column grant the check sees roi_embedder rewrite a title');

-- ---------------------------------------------------------------------------------------------
-- 2. The interval in both views is the Wilson interval, 20 of 20 by hand: n / (n + z^2) = 0.8389.
-- ---------------------------------------------------------------------------------------------
select tests.create_user('wilson@break.test');
insert into public.memories (author_id, scope, kind, title, body)
select tests.user_id('wilson@break.test'), 'personal', 'decision', format('Wilson rule %s', md5('wilson' || i)),
       format('Rule %s holds.', i)
from generate_series(1, 20) i;
update roi.settings set extractor = 'deterministic', pool_target = 20;
select tests.authenticate_as('wilson@break.test');
select is(public.benchmark_memory() ->> 'probes', '20', 'a deterministic run of 20 probes');
select results_eq($$select exclusive_count, judged_count, exclusive_rate_low, exclusive_rate_high
                    from public.roi_benchmark_runs$$,
  $$values (20, 20, round(20 / (20 + 1.96 ^ 2)::numeric, 4), 1.0000)$$,
  'the run list shows 20 of 20 with the Wilson interval 0.8389 to 1');
select results_eq($$select exclusive_count, judged_count, exclusive_rate_low, exclusive_rate_high
                    from public.roi_benchmark_tile$$,
  $$values (20, 20, 0.8389, 1.0000)$$,
  'the tile shows the same interval');
select tests.clear_authentication();

-- ---------------------------------------------------------------------------------------------
-- 4. Closed-book probes are picked at random: ten LLM runs of the same eight probes, one check each.
-- ---------------------------------------------------------------------------------------------
select tests.create_user('random@break.test');
insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body, question, state,
                        activated_at)
select tests.user_id('random@break.test'), gen_random_uuid(), 'decision', 'personal', 'Random ' || i, 'Body ' || i,
       'Which way did random ' || i || ' go?', 'active', now()
from generate_series(1, 8) i;
update roi.settings set closed_book_checks = 1;
do $$
declare
  run uuid;
begin
  for i in 1..10 loop
    insert into roi.runs (owner_id, mode, probe_count) values (tests.user_id('random@break.test'), 'llm', 8)
    returning id into run;
    insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
    select run, p.id, p.owner_id, '{}', '[]' from roi.probes p where p.owner_id = tests.user_id('random@break.test');
    perform roi.queue_judge_checks(run);
  end loop;
end
$$;
select is((select count(*)::int from roi.work where kind = 'closed_book' and owner_id = tests.user_id('random@break.test')), 10,
  'each of the ten runs queued one closed-book check');
-- All ten picks on one probe by chance: 8 * (1/8)^10, about 1 in 134 million.
select cmp_ok((select count(distinct probe_id)::int from roi.work
               where kind = 'closed_book' and owner_id = tests.user_id('random@break.test')), '>', 1,
  'the picks differ between runs: not the first, not the same probe every time');

-- ---------------------------------------------------------------------------------------------
-- 5. Fusion constants: score = 1 / (5 + lexical rank) + 1.25 / (5 + e5 rank) + 1.25 / (5 + MiniLM rank).
-- ---------------------------------------------------------------------------------------------
create function pg_temp.axis(i integer) returns extensions.vector language sql immutable as $$
  select (array_fill(0::real, array[i - 1]) || 1::real || array_fill(0::real, array[384 - i]))::extensions.vector
$$;
select tests.create_user('fusion@break.test');
insert into public.memories (author_id, scope, kind, title, body, embedding, embedding_model, embedding_minilm,
                             embedding_minilm_model) values
  (tests.user_id('fusion@break.test'), 'personal', 'decision', 'Quokka cutover plan', 'Move traffic at noon.',
   pg_temp.axis(1), 'test-axes', pg_temp.axis(2), 'test-axes'),
  (tests.user_id('fusion@break.test'), 'personal', 'gotcha', 'Wombat changelog rule', 'List every migration.',
   null, null, null, null);
select tests.authenticate_as('fusion@break.test');
select is((select round(score::numeric, 5) from public.recall('quokka cutover', query_embedding => pg_temp.axis(1))
           where title = 'Quokka cutover plan'), round(1 / 6.0 + 1.25 / 6.0, 5),
  'first in both legs given: 1/6 + 1.25/6');
select is((select round(score::numeric, 5) from public.recall('quokka cutover', query_embedding => pg_temp.axis(1),
                                                               query_embedding_minilm => pg_temp.axis(2))
           where title = 'Quokka cutover plan'), round(1 / 6.0 + 1.25 / 6.0 + 1.25 / 6.0, 5),
  'first in all three legs: 1/6 + 1.25/6 + 1.25/6');
select is((select round(score::numeric, 5) from public.recall('zebra xylophone', query_embedding => pg_temp.axis(1))
           where title = 'Quokka cutover plan'), round(1.25 / 6.0, 5),
  'first in the semantic leg only: 1.25/6');
select is((select round(score::numeric, 5) from public.recall('wombat changelog', query_embedding => pg_temp.axis(1))
           where title = 'Wombat changelog rule'), round(1 / 6.0, 5),
  'first in the lexical leg only (no embedding): 1/6');
select tests.clear_authentication();

select * from finish();
rollback;
