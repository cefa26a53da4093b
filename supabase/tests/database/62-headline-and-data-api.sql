-- Each headline definition checked in its own tier. The exclusive count is the
-- verdicts with_memory AND NOT without_memory, in public.roi_benchmark_runs and in
-- public.roi_benchmark_breakdown, over a run holding every combination (and a skipped verdict). The
-- Data API allowlist: what authenticated may reach in the exposed schemas (public, graphql_public;
-- supabase/config.toml) is exactly the list below, anon reaches nothing there nor in roi or auth, and
-- another user (or anon) reads none of an owner's rows in any result table (roi.result_tables).
-- Each check first proves it can fail. tests/db/test_redteam.py holds the same allowlist and reads
-- every reachable row as each role.
begin;
select plan(15);

-- ---------------------------------------------------------------- the headline: with and not without
select tests.create_user('headline@defs.test');
select tests.create_user('stranger@defs.test');
-- Five probes: a decision and a gotcha in the personal layer, three conventions; one verdict each.
insert into roi.probes (id, owner_id, memory_id, source_kind, source_scope, source_title, source_body, question,
                        state, activated_at)
select ('00000000-0000-0000-0000-00000000c10' || i)::uuid, tests.user_id('headline@defs.test'), gen_random_uuid(),
       k.kind, 'personal', 'T' || i, 'B' || i, 'Which way did question ' || i || ' go?', 'active', now()
from generate_series(1, 5) i
cross join lateral (select case i when 1 then 'decision' when 2 then 'decision' else 'convention' end as kind) k;
insert into roi.runs (id, owner_id, mode, probe_count)
values ('00000000-0000-0000-0000-00000000c200', tests.user_id('headline@defs.test'), 'llm', 5);
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
select '00000000-0000-0000-0000-00000000c200', p.id, p.owner_id, '{}', '[]' from roi.probes p
where p.owner_id = tests.user_id('headline@defs.test');
select roi.note_recall_outcomes('00000000-0000-0000-0000-00000000c200');
-- Probe 1 (decision): with and not without, the one exclusive answer. Probe 2 (decision): with and
-- without. Probe 3: without only. Probe 4: neither. Probe 5: skipped.
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, skipped, skip_reason,
                          judged_by)
select '00000000-0000-0000-0000-00000000c200', p.id, p.owner_id, p.memory_id, v.w, v.wo, v.w is null,
       case when v.w is null then 'judge_failed' end, 'llm'
from roi.probes p
join (values (1, true, false), (2, true, true), (3, false, true), (4, false, false), (5, null, null))
  v (i, w, wo) on p.id = ('00000000-0000-0000-0000-00000000c10' || v.i)::uuid;
insert into roi.run_closures (run_id, owner_id, reason)
values ('00000000-0000-0000-0000-00000000c200', tests.user_id('headline@defs.test'), 'complete');
-- The rest of an LLM run's result rows, so the reads below are about rows that exist.
insert into roi.run_judges (run_id, owner_id, judge_fingerprint)
values ('00000000-0000-0000-0000-00000000c200', tests.user_id('headline@defs.test'), 'openai/j#judge.j2@000000000000');
insert into roi.judge_check_results (run_id, probe_id, owner_id, kind, with_memory, without_memory)
values ('00000000-0000-0000-0000-00000000c200', '00000000-0000-0000-0000-00000000c101',
        tests.user_id('headline@defs.test'), 'judge_withheld', false, false);
insert into roi.closed_book_results (run_id, probe_id, owner_id, bare_correct)
values ('00000000-0000-0000-0000-00000000c200', '00000000-0000-0000-0000-00000000c101',
        tests.user_id('headline@defs.test'), false);
insert into roi.verdict_notes (run_id, probe_id, owner_id, note)
values ('00000000-0000-0000-0000-00000000c200', '00000000-0000-0000-0000-00000000c101',
        tests.user_id('headline@defs.test'), 'a note');
insert into roi.rotations (run_id, owner_id, retired_count)
values ('00000000-0000-0000-0000-00000000c200', tests.user_id('headline@defs.test'), 0);
insert into roi.scheduled_runs (run_id, owner_id, period_start)
values ('00000000-0000-0000-0000-00000000c200', tests.user_id('headline@defs.test'), date_trunc('day', now()));

select tests.authenticate_as('headline@defs.test');
select results_eq(
  $$select judged_count, skipped_count, with_memory_count, without_memory_count, exclusive_count, exclusive_rate
    from public.roi_benchmark_runs where run_id = '00000000-0000-0000-0000-00000000c200'$$,
  $$values (4, 1, 2, 2, 1, 0.2500)$$,
  'the run counts one exclusive answer of four judged: with memory and not without it (0.25)');
select results_eq(
  $$select value, judged_count, with_memory_count, without_memory_count, exclusive_count, exclusive_rate
    from public.roi_benchmark_breakdown where run_id = '00000000-0000-0000-0000-00000000c200'
      and dimension = 'kind' order by value$$,
  $$values ('convention', 2, 0, 1, 0, 0.0000), ('decision', 2, 2, 1, 1, 0.5000)$$,
  'by kind: the two decisions, both answered with memory, hold one exclusive answer (0.5), not two');
select results_eq(
  $$select judged_count, exclusive_count, exclusive_rate from public.roi_benchmark_breakdown
    where run_id = '00000000-0000-0000-0000-00000000c200' and dimension = 'scope'$$,
  $$values (4, 1, 0.2500)$$,
  'by scope: the same one of four');
select results_eq(
  $$select exclusive_count, judged_count, exclusive_rate from public.roi_benchmark_tile$$,
  $$select 1, 4, 0.2500$$,
  'the tile shows the run''s one of four');
-- The check can fail: the three definitions a slip would give are all different numbers here.
select isnt((select count(*) filter (where with_memory)::int from roi.verdicts
             where run_id = '00000000-0000-0000-0000-00000000c200'), 1,
  '(sensitivity) with_memory alone would count 2, not 1');
select isnt((select count(*) filter (where not without_memory)::int from roi.verdicts
             where run_id = '00000000-0000-0000-0000-00000000c200'), 1,
  '(sensitivity) not without_memory alone would count 2, not 1');
select isnt((select (count(*) filter (where with_memory and not without_memory))::numeric / count(*)
             from roi.verdicts where run_id = '00000000-0000-0000-0000-00000000c200'), 0.25,
  '(sensitivity) a rate over every verdict, skipped included, would be 0.2, not 0.25');

-- ---------------------------------------------------------------- no client reads another's results
-- How many rows of the owner's a relation shows the current role: 0 when the role may not read it.
create function pg_temp.owner_rows(relation text, owner uuid) returns integer
  language plpgsql security invoker set search_path = ''
as $$
declare
  found integer;
begin
  execute format('select count(*) from %s where owner_id = $1', relation) into found using owner;
  return found;
exception when insufficient_privilege then
  return 0;
end
$$;
select tests.clear_authentication();
create temporary table headline_owner on commit drop as select tests.user_id('headline@defs.test') as id;
-- The list, read as the superuser (the client roles may not read roi.result_tables): the result
-- tables that hold an owner's rows (roi.judge_calibrations is the operator's, with no owner column;
-- the red team checks what an owner reads of it).
create temporary table listed on commit drop as
select r.table_name from roi.result_tables r
where exists (select from pg_attribute a
              where a.attrelid = r.table_name::regclass and a.attname = 'owner_id' and not a.attisdropped);
grant select on headline_owner, listed to anon, authenticated;
select is_empty($$select table_name from listed l
                  where pg_temp.owner_rows(l.table_name, (select id from headline_owner)) = 0$$,
  'as the superuser, the owner has rows in every result table');

select tests.authenticate_as('headline@defs.test');
select is(pg_temp.owner_rows('roi.run_judges', (select id from headline_owner)), 1,
  '(sensitivity) the owner reads the judge of their run');
select tests.clear_authentication();
select tests.authenticate_as('stranger@defs.test');
select is_empty($$select table_name from listed l
                  where pg_temp.owner_rows(l.table_name, (select id from headline_owner)) > 0$$,
  'another user reads none of the owner''s rows in any result table');
select tests.clear_authentication();
select tests.authenticate_as_anon();
select is_empty($$select table_name from listed l
                  where pg_temp.owner_rows(l.table_name, (select id from headline_owner)) > 0$$,
  'anon reads none of the owner''s rows in any result table');
select tests.clear_authentication();

-- ---------------------------------------------------------------- the Data API allowlist
-- What authenticated may select from and execute in the schemas the Data API exposes. A new entry
-- is a conscious choice: add it here and to tests/db/test_redteam.py.
create temporary view api_relations as
select c.relname::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname in ('public', 'graphql_public') and c.relkind in ('r', 'v', 'm', 'f', 'p')
  and has_schema_privilege('authenticated', n.oid, 'usage') and has_table_privilege('authenticated', c.oid, 'select');
create temporary view api_functions as
select p.proname::text as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
where n.nspname in ('public', 'graphql_public') and has_function_privilege('authenticated', p.oid, 'execute')
  and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e');
create temporary view anon_reach as
select n.nspname || '.' || c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname in ('public', 'graphql_public', 'roi', 'auth') and c.relkind in ('r', 'v', 'm', 'f', 'p')
  and has_schema_privilege('anon', n.oid, 'usage') and has_table_privilege('anon', c.oid, 'select')
union all
select n.nspname || '.' || p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
where n.nspname in ('public', 'graphql_public', 'roi') and has_function_privilege('anon', p.oid, 'execute')
  and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e');

create view public.run_judges with (security_invoker = true) as select * from roi.run_judges;
grant select on public.run_judges to authenticated;
select ok('run_judges' in (select name from api_relations),
  '(sensitivity) a public view over roi.run_judges would be reachable through the Data API');
drop view public.run_judges;
select set_eq($$select name from api_relations$$,
  array['memories', 'memory_postings', 'project_members', 'projects', 'roi_benchmark_breakdown',
        'roi_benchmark_runs', 'roi_benchmark_tile', 'team_members', 'teams', 'usage_events'],
  'authenticated reaches exactly the allowlisted relations in public and graphql_public');
select set_eq($$select name from api_functions$$,
  array['benchmark_memory', 'benchmark_schedule', 'caller_project_ids', 'caller_team_ids', 'recall',
        'recall_lexical', 'recall_query', 'roi_benchmark_comparison'],
  'authenticated executes exactly the allowlisted functions in public and graphql_public');
select is_empty($$select name from anon_reach$$,
  'anon selects from nothing and executes nothing in public, graphql_public, roi and auth');

select * from finish();
rollback;
