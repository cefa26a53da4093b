-- Results are append-only by construction. The result tables are declared once, in
-- roi.result_tables, not found by the trigger under test: every table listed carries both append-only
-- triggers (enabled), no role but the table's owner holds UPDATE, DELETE or TRUNCATE on it (not even on
-- one column), and every table that carries either trigger is listed. The list itself is held to the
-- catalog: every table of schema roi is either listed or one of the state tables named below, so a
-- result table dropped from the list along with its triggers is caught. Each check first proves it can
-- fail (an offender inside this transaction), then passes. Then the worker tries to rewrite a judge
-- check result and a run's judge row, and is refused.
begin;
select plan(21);

-- The tables of schema roi whose rows change by design, each with why; every other table of the schema,
-- found in pg_class, is a result and must be listed in roi.result_tables. A new table is a result until
-- it is named here.
create temporary table state_tables (table_name text primary key, why text not null);
insert into state_tables values
  ('roi.settings', 'the operator''s settings'),
  ('roi.probes', 'the pool: probes activate, retire and rotate'),
  ('roi.pending_runs', 'a run''s open marker, deleted when it closes'),
  ('roi.work_kinds', 'the kinds of queued work'),
  ('roi.work', 'the queue: rows are claimed, leased and removed'),
  ('roi.benchmark_schedules', 'an owner''s wish for routine runs, changed or removed by the owner'),
  ('roi.upkeep_state', 'upkeep''s progress'),
  ('roi.dirty_layers', 'layers marked for upkeep and cleared by it'),
  ('roi.layer_index_state', 'what the layer-index decision saw last, updated every minute'),
  ('roi.provider_keys', 'an owner''s provider key, replaced or removed by the owner');

-- Tables of schema roi, from the catalog, that are neither listed as results nor named state tables.
create temporary view unclassified_tables as
select c.oid::regclass::text as table_name
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = 'roi' and c.relkind in ('r', 'p') and not c.relispartition
  and c.oid::regclass::text not in (select table_name from roi.result_tables)
  and c.oid::regclass::text not in (select table_name from state_tables);

-- Listed tables that lack an enabled row trigger (before update and delete) calling
-- roi.forbid_result_change() or an enabled statement trigger (before truncate) calling
-- roi.forbid_result_truncate(). A listed name that is no table at all is reported too.
create temporary view unguarded_result_tables as
select l.table_name from roi.result_tables l
where to_regclass(l.table_name) is null
   or not exists (select from pg_trigger g
                  where g.tgrelid = to_regclass(l.table_name) and g.tgenabled in ('O', 'A')
                    and g.tgfoid = 'roi.forbid_result_change()'::regprocedure
                    -- row (1), before (2), delete (8), update (16)
                    and g.tgtype::int & (1 | 2 | 8 | 16) = (1 | 2 | 8 | 16))
   or not exists (select from pg_trigger g
                  where g.tgrelid = to_regclass(l.table_name) and g.tgenabled in ('O', 'A')
                    and g.tgfoid = 'roi.forbid_result_truncate()'::regprocedure
                    -- statement (no 1), before (2), truncate (32)
                    and g.tgtype::int & (1 | 2 | 32) = (2 | 32));

-- Tables that carry either append-only trigger but are not in the list.
create temporary view unlisted_result_tables as
select distinct g.tgrelid::regclass::text as table_name from pg_trigger g
where g.tgfoid in ('roi.forbid_result_change()'::regprocedure, 'roi.forbid_result_truncate()'::regprocedure)
  and g.tgrelid not in (select to_regclass(l.table_name) from roi.result_tables l where to_regclass(l.table_name) is not null);

-- Every role but a superuser, the table's owner and PostgreSQL's predefined roles that may rewrite a
-- listed table: UPDATE, DELETE or TRUNCATE on the table, or UPDATE on any column, held by the role or
-- by any role it may become (the client roles are NOINHERIT, so a grant of pg_write_all_data or of the
-- owner's role would not show in their own privileges, yet `set role` would use it).
create temporary view result_table_writers as
select l.table_name, r.rolname, p.privilege
from roi.result_tables l
join pg_class c on c.oid = to_regclass(l.table_name)
cross join pg_roles r
cross join (values ('UPDATE'), ('DELETE'), ('TRUNCATE')) p (privilege)
where not r.rolsuper and r.oid <> c.relowner and r.rolname !~ '^pg_'
  and exists (select from pg_roles x
              where pg_has_role(r.oid, x.oid, 'MEMBER')
                and (has_table_privilege(x.oid, c.oid, p.privilege)
                     or (p.privilege = 'UPDATE' and has_any_column_privilege(x.oid, c.oid, 'UPDATE'))));

select ok((select count(*) from roi.result_tables) >= 10, 'roi.result_tables lists the result tables');
select is_empty($$select table_name from roi.result_tables where to_regclass(table_name) is null$$,
  'every listed name is a table');
select ok('roi.judge_check_results' in (select table_name from roi.result_tables)
          and 'roi.run_judges' in (select table_name from roi.result_tables),
  'the judge check results and the judges of a run are results');

-- ---------------------------------------------------------------- every listed table is guarded
drop trigger if exists judge_check_results_are_append_only on roi.judge_check_results;
select is(array(select table_name from unguarded_result_tables), array['roi.judge_check_results'],
  '(sensitivity) a listed table without its row trigger is caught');
create trigger judge_check_results_are_append_only before update or delete on roi.judge_check_results
  for each row execute function roi.forbid_result_change();
alter table roi.run_judges disable trigger run_judges_refuse_truncate;
select is(array(select table_name from unguarded_result_tables), array['roi.run_judges'],
  '(sensitivity) a listed table whose TRUNCATE trigger is disabled is caught');
alter table roi.run_judges enable trigger run_judges_refuse_truncate;
select is_empty($$select * from unguarded_result_tables$$,
  'every listed result table refuses update, delete and truncate by trigger');

-- ---------------------------------------------------------------- every guarded table is listed
create table roi.offending_results (id int, owner_id uuid);
create trigger offending_results_are_append_only before update or delete on roi.offending_results
  for each row execute function roi.forbid_result_change();
select is(array(select table_name from unlisted_result_tables), array['roi.offending_results'],
  '(sensitivity) a table with the append-only trigger missing from the list is caught');
drop table roi.offending_results;
select is_empty($$select * from unlisted_result_tables$$,
  'every table with an append-only trigger is in roi.result_tables');

-- ---------------------------------------------------------------- no role but the owner may rewrite
grant update, delete on roi.judge_check_results to roi_worker;
grant update (note) on roi.verdict_notes to authenticated;
select set_eq($$select table_name || ' ' || rolname || ' ' || privilege from result_table_writers$$,
  array['roi.judge_check_results roi_worker UPDATE', 'roi.judge_check_results roi_worker DELETE',
        'roi.verdict_notes authenticated UPDATE', 'roi.verdict_notes authenticator UPDATE'],
  '(sensitivity) an UPDATE or DELETE grant, even on one column, is caught (and in authenticator, which may become authenticated)');
revoke update, delete on roi.judge_check_results from roi_worker;
revoke update (note) on roi.verdict_notes from authenticated;
grant pg_write_all_data to service_role;
select ok(exists (select from result_table_writers where rolname = 'service_role'),
  '(sensitivity) a role that may write every table through a predefined role is caught');
revoke pg_write_all_data from service_role;
select is_empty($$select * from result_table_writers$$,
  'no role but the owner holds UPDATE, DELETE or TRUNCATE on a result table');
select ok((select count(*) from pg_roles r where not r.rolsuper and r.rolname in
           ('anon', 'authenticated', 'service_role', 'roi_worker', 'roi_embedder')) = 5,
  'the roles checked include every client role and the worker and embedder');

-- ---------------------------------------------------------------- the worker is refused
-- A run of one probe, judged and checked, whose judgment is still queued (so the worker may read its
-- judge row and its check result under its policies): what the worker would rewrite if it could.
select tests.create_user('append@results.test');
insert into roi.probes (id, owner_id, memory_id, source_kind, source_scope, source_title, source_body, question,
                        state, activated_at)
values ('00000000-0000-0000-0000-00000000a901', tests.user_id('append@results.test'), gen_random_uuid(), 'decision',
        'personal', 'T', 'B', 'Which way did it go?', 'active', now());
insert into roi.runs (id, owner_id, mode, probe_count)
values ('00000000-0000-0000-0000-00000000a902', tests.user_id('append@results.test'), 'llm', 1);
insert into roi.pending_runs (run_id, owner_id, started_at)
values ('00000000-0000-0000-0000-00000000a902', tests.user_id('append@results.test'), now());
insert into roi.run_judges (run_id, owner_id, judge_fingerprint)
values ('00000000-0000-0000-0000-00000000a902', tests.user_id('append@results.test'), 'openai/judge#judge.j2@000000000000');
insert into roi.judge_check_results (run_id, probe_id, owner_id, kind, with_memory, without_memory)
values ('00000000-0000-0000-0000-00000000a902', '00000000-0000-0000-0000-00000000a901',
        tests.user_id('append@results.test'), 'judge_withheld', true, false);

set local role roi_worker;
select is((select count(*)::int from roi.run_judges where run_id = '00000000-0000-0000-0000-00000000a902'), 1,
  'the worker sees the open run''s judge row');
select throws_ok($$update roi.judge_check_results set with_memory = false
                   where run_id = '00000000-0000-0000-0000-00000000a902'$$,
  '42501', null, 'the worker cannot update a judge check result');
select throws_ok($$delete from roi.judge_check_results where run_id = '00000000-0000-0000-0000-00000000a902'$$,
  '42501', null, 'nor delete one');
select throws_ok($$update roi.run_judges set judge_fingerprint = 'another judge'
                   where run_id = '00000000-0000-0000-0000-00000000a902'$$,
  '42501', null, 'the worker cannot update the judge of a run');
select throws_ok($$delete from roi.run_judges where run_id = '00000000-0000-0000-0000-00000000a902'$$,
  '42501', null, 'nor delete it');
reset role;

-- ---------------------------------------------------------------- the list is held to the catalog
select is_empty($$select table_name from state_tables where to_regclass(table_name) is null$$,
  'every named state table exists');
select is_empty($$select table_name from state_tables where table_name in (select table_name from roi.result_tables)$$,
  'no state table is listed as a result');
select is_empty($$select table_name from unclassified_tables$$,
  'every table of schema roi is a listed result or a named state table');
-- The break the checks above cannot see: a result table dropped from the list with both its triggers.
do $$
begin
  execute format('create or replace view roi.result_tables with (security_invoker = true) as '
                 'select t.table_name from (values %s) t (table_name)',
                 (select string_agg(format('(%L)', table_name), ', ') from roi.result_tables
                  where table_name <> 'roi.scheduled_runs'));
end
$$;
drop trigger if exists scheduled_runs_are_append_only on roi.scheduled_runs;
drop trigger if exists scheduled_runs_refuse_truncate on roi.scheduled_runs;
select ok((select count(*) from unguarded_result_tables) = 0 and (select count(*) from unlisted_result_tables) = 0
          and array(select table_name from unclassified_tables) = array['roi.scheduled_runs'],
  '(sensitivity) a result table dropped from the list with its triggers passes the trigger checks, and is caught');

select * from finish();
rollback;
