-- Paths the other suites left untested: the per-probe pin (and that an unpinned recall would fail
-- the check), rotation order and "nothing when nothing is fresh", top-up newest-first on refills,
-- append-only for rotations and verdict notes, TRUNCATE refused on every result table (even for
-- its owner), and upkeep isolating one owner's failure from the others.
begin;
select plan(28);

-- ---------------------------------------------------------------- per-probe pin
select tests.create_user('pinned@pool.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000a0a01', 'pin-a'),
  ('00000000-0000-0000-0000-0000000a0a02', 'pin-b');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000a0a01', tests.user_id('pinned@pool.test')),
  ('00000000-0000-0000-0000-0000000a0a02', tests.user_id('pinned@pool.test'));
-- Look-alikes in project A, project B and the personal layer: one question matches all three.
insert into public.memories (author_id, scope, project_id, kind, title, body)
select tests.user_id('pinned@pool.test'), s.scope, s.project_id, 'decision',
       'Frobnicate the widget with the blue lever', 'Always frobnicate the widget with the blue lever.'
from (values ('project', '00000000-0000-0000-0000-0000000a0a01'::uuid),
             ('project', '00000000-0000-0000-0000-0000000a0a02'::uuid),
             ('personal', null::uuid)) s (scope, project_id);
update roi.settings set extractor = 'deterministic', pool_target = 20, rotation_per_run = 3;
select tests.authenticate_as('pinned@pool.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'a run over the three look-alikes');
-- Made by the user (so they can read it back), filled by the test.
create temporary table pin_case (project_id uuid, scope text, question text, surfaced_ids uuid[]) on commit drop;
select tests.clear_authentication();
insert into pin_case
select m.project_id, m.scope, p.question, rc.surfaced_ids
from roi.probes p join public.memories m on m.id = p.memory_id
join roi.recalls rc on rc.probe_id = p.id
where p.owner_id = tests.user_id('pinned@pool.test');

select is((select count(*)::int from pin_case c, unnest(c.surfaced_ids) s (id)
           join public.memories m on m.id = s.id
           where c.project_id = '00000000-0000-0000-0000-0000000a0a01'
             and m.project_id is distinct from '00000000-0000-0000-0000-0000000a0a01' and m.scope <> 'personal'), 0,
  'the probe from project A surfaced nothing outside project A and the personal layer');
select ok((select c.surfaced_ids @> array(select id from public.memories where project_id = '00000000-0000-0000-0000-0000000a0a01')
           from pin_case c where c.project_id = '00000000-0000-0000-0000-0000000a0a01'),
  'and it did surface its own source');
select is((select count(*)::int from pin_case c, unnest(c.surfaced_ids) s (id)
           join public.memories m on m.id = s.id
           where c.scope = 'personal' and m.scope <> 'personal'), 0,
  'the personal probe was recalled from the personal layer alone');
-- The check can fail: unpinned, the same questions do reach the other layers.
select tests.authenticate_as('pinned@pool.test');
select ok(exists (select from pin_case c, public.recall(c.question) r
                  join public.memories m on m.id = r.memory_id
                  where c.project_id = '00000000-0000-0000-0000-0000000a0a01'
                    and m.project_id = '00000000-0000-0000-0000-0000000a0a02'),
  '(sensitivity) an unpinned recall of project A''s question surfaces project B''s look-alike');
select ok(exists (select from pin_case c, public.recall(c.question) r
                  where c.scope = 'personal' and r.scope = 'project'),
  '(sensitivity) an unpinned recall of the personal question surfaces project memories');
select tests.clear_authentication();

-- ---------------------------------------------------------------- rotation order and top-up order
select tests.create_user('rotor@pool.test');
insert into public.memories (author_id, scope, kind, title, body, created_at)
select tests.user_id('rotor@pool.test'), 'personal', 'gotcha', format('Rotor fact %s', i),
       format('Rotor body %s about gear %s', i, md5(i::text)), now() - make_interval(days => i)
from generate_series(1, 25) i;
update roi.settings set pool_target = 20, rotation_per_run = 3;
create function pg_temp.rotor_titles(wanted text) returns text[]
  language sql as $$
  select coalesce(array_agg(p.source_title order by p.source_title), '{}') from roi.probes p
  where p.owner_id = tests.user_id('rotor@pool.test') and
        case wanted when 'rotated' then p.retired_reason = 'rotated' else p.state = 'active' end
$$;

select tests.authenticate_as('rotor@pool.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'run 1: the 20 newest of 25');
select tests.clear_authentication();
select is((select array_agg(t order by t) from unnest(pg_temp.rotor_titles('active')) t
           where t in ('Rotor fact 21', 'Rotor fact 22', 'Rotor fact 23', 'Rotor fact 24', 'Rotor fact 25')),
  array['Rotor fact 21', 'Rotor fact 22', 'Rotor fact 23'],
  'the refill after run 1 took the three newest never-probed memories (21-23), not 24 or 25');

-- Make two active probes the longest-serving; add one brand-new memory; rotate two per run.
create temporary table boosted on commit drop as
select p.id, p.source_title from roi.probes p
where p.owner_id = tests.user_id('rotor@pool.test') and p.state = 'active' order by p.source_title limit 2;
update roi.probes p set activated_at = now() - interval '1 day' from boosted b where p.id = b.id;
insert into public.memories (author_id, scope, kind, title, body, created_at)
values (tests.user_id('rotor@pool.test'), 'personal', 'gotcha', 'Rotor fact 0', 'Brand new rotor knowledge', now() + interval '1 minute');
update roi.settings set rotation_per_run = 2;
select tests.authenticate_as('rotor@pool.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'run 2');
select tests.clear_authentication();
select ok(pg_temp.rotor_titles('rotated') @> array(select source_title from boosted),
  'run 2 rotated out the two longest-serving probes');
select is((select retired_count from roi.rotations rt join roi.runs r on r.id = rt.run_id
           where r.owner_id = tests.user_id('rotor@pool.test') order by r.started_at desc limit 1), 2,
  'exactly two');
select ok(pg_temp.rotor_titles('active') @> array['Rotor fact 0', 'Rotor fact 24']
          and not pg_temp.rotor_titles('active') @> array['Rotor fact 25'],
  'the refill took the brand-new memory, then the next newest (24), not the oldest (25)');

-- Nothing fresh left: the one never-probed memory is invalidated; a run rotates nothing.
update public.memories set invalidated_at = now()
where author_id = tests.user_id('rotor@pool.test') and title = 'Rotor fact 25';
create temporary table active_before on commit drop as select pg_temp.rotor_titles('active') as titles;
select tests.authenticate_as('rotor@pool.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'run 3');
select tests.clear_authentication();
select is((select retired_count from roi.rotations rt join roi.runs r on r.id = rt.run_id
           where r.owner_id = tests.user_id('rotor@pool.test') order by r.started_at desc limit 1), 0,
  'with no fresh knowledge, run 3 rotated nothing out');
select is(pg_temp.rotor_titles('active'), (select titles from active_before), 'and the pool is unchanged');

-- ---------------------------------------------------------------- append-only, TRUNCATE refused
insert into roi.verdict_notes (run_id, probe_id, owner_id, note)
select v.run_id, v.probe_id, v.owner_id, 'a note' from roi.verdicts v
where v.owner_id = tests.user_id('rotor@pool.test') limit 1;
select throws_ok($$update roi.rotations set retired_count = 99$$, '42501',
  'roi.rotations: recorded results are append-only (update refused)', 'a rotation is never rewritten');
select throws_ok($$delete from roi.rotations$$, '42501', null, 'nor deleted');
select throws_ok($$update roi.verdict_notes set note = 'rewritten'$$, '42501',
  'roi.verdict_notes: recorded results are append-only (update refused)', 'a verdict note is never rewritten');
select throws_ok($$delete from roi.verdict_notes$$, '42501', null, 'nor deleted');
-- As the tables' owner (this session is the superuser that owns them).
select is((select count(*)::int from pg_tables where schemaname = 'roi'
           and tablename in ('runs', 'recalls', 'verdicts', 'run_closures', 'rotations', 'verdict_notes')
           and tableowner = current_user), 6, 'this session owns every result table');
-- Result tables are the ones whose rows refuse update and delete; each must refuse TRUNCATE too.
select isnt_empty($$select 1 from pg_trigger g where g.tgfoid = 'roi.forbid_result_change()'::regprocedure$$,
  'result tables are found by their append-only row trigger');
select is(array(select distinct g.tgrelid::regclass::text from pg_trigger g
                where g.tgfoid = 'roi.forbid_result_change()'::regprocedure
                  and not exists (select from pg_trigger t where t.tgrelid = g.tgrelid
                                  and t.tgfoid = 'roi.forbid_result_truncate()'::regprocedure)
                order by 1),
  '{}'::text[], 'every append-only result table has a TRUNCATE trigger');
select throws_ok($$truncate roi.recall_outcomes$$, '42501',
  'roi.recall_outcomes: recorded results are append-only (truncate refused)', 'TRUNCATE of recall outcomes is refused');
select throws_ok($$truncate roi.verdicts cascade$$, '42501',
  'roi.verdicts: recorded results are append-only (truncate refused)', 'TRUNCATE of verdicts is refused, even for the owner');
select throws_ok($$truncate roi.runs cascade$$, '42501', null, 'TRUNCATE of runs (and everything hanging off them) is refused');

-- ---------------------------------------------------------------- upkeep isolates one owner's failure
-- Both owners get a new memory and room in the pool; upkeep fails for rotor alone (a trigger stands
-- in for any failure inside one owner's upkeep).
update roi.settings set pool_target = 21;
insert into public.memories (author_id, scope, kind, title, body, created_at)
values (tests.user_id('rotor@pool.test'), 'personal', 'gotcha', 'Rotor fact late', 'Late rotor knowledge', now() + interval '2 minutes'),
       (tests.user_id('pinned@pool.test'), 'personal', 'gotcha', 'Pinned fact late', 'Late pinned knowledge', now());
do $do$
begin
  execute format($f$
    create function tests.refuse_rotor_probes() returns trigger
      language plpgsql security invoker set search_path = '' as $t$
    begin
      if new.owner_id = %L::uuid then
        raise exception 'simulated failure for one owner';
      end if;
      return new;
    end $t$$f$, tests.user_id('rotor@pool.test'));
end
$do$;
grant execute on function tests.refuse_rotor_probes() to authenticated;
create trigger refuse_rotor_probes before insert on roi.probes
  for each row execute function tests.refuse_rotor_probes();
select ok((roi.upkeep() ->> 'failures')::int >= 1, 'upkeep reports the failing owner');
select results_eq($$select m.title from roi.probes p join public.memories m on m.id = p.memory_id
  where m.title in ('Rotor fact late', 'Pinned fact late')$$, $$values ('Pinned fact late'::text)$$,
  'the other owner''s pool was topped up all the same; the failing owner''s was left as it was');
drop trigger refuse_rotor_probes on roi.probes;
select roi.upkeep();
select set_eq($$select m.title from roi.probes p join public.memories m on m.id = p.memory_id
  where m.title in ('Rotor fact late', 'Pinned fact late')$$, $$values ('Pinned fact late'::text), ('Rotor fact late')$$,
  'once the failure is gone, the next cycle catches the skipped owner up');

select * from finish();
rollback;
