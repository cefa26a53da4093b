-- The cheaper bookkeeping of a deterministic run (20261201080000) changes no outcome: a run still
-- closes complete and rotates once, leaving no pending-run row behind; roi.rotate_and_top_up()
-- retires and adds exactly the probes of rotation's former two reads (never-probed knowledge counted,
-- the longest-serving retired, then roi.top_up_pool()), on twin owners
-- with identical memories, whatever the pool target, rotation size and mode; the PL/pgSQL
-- roi.template_question() words every question as the former SQL expression did.
begin;
select plan(15);

update roi.settings set extractor = 'deterministic', pool_target = 20, rotation_per_run = 3;

-- ---------------------------------------------------------------- a deterministic run, end to end
select tests.create_user('solo@bookkeeping.test');
insert into public.memories (author_id, scope, kind, title, body, created_at)
select tests.user_id('solo@bookkeeping.test'), 'personal', 'decision', format('Solo fact %s', i),
       format('Solo body %s', i), now() - make_interval(days => i)
from generate_series(1, 30) i;
select tests.authenticate_as('solo@bookkeeping.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'a deterministic run starts');
select tests.clear_authentication();
select is((select array[c.reason, rt.retired_count::text] from roi.runs r
           join roi.run_closures c on c.run_id = r.id join roi.rotations rt on rt.run_id = r.id
           where r.owner_id = tests.user_id('solo@bookkeeping.test')),
  array['complete', '3'], 'it closed complete and rotated three probes out, once');
select is_empty($$select 1 from roi.pending_runs where owner_id = tests.user_id('solo@bookkeeping.test')$$,
  'and left no pending-run row for upkeep');
select is((select count(*)::int from roi.probes
           where owner_id = tests.user_id('solo@bookkeeping.test') and state = 'active'), 20,
  'the pool is back at 20 active probes');
select is((select count(*)::int from roi.verdicts v join roi.runs r on r.id = v.run_id
           where r.owner_id = tests.user_id('solo@bookkeeping.test') and not v.skipped), 20,
  'with a verdict for each of the 20 probes');
select is((select count(*)::int from roi.recalls rc join roi.probes p on p.id = rc.probe_id
           where rc.owner_id = tests.user_id('solo@bookkeeping.test')
             and rc.surfaced is null and rc.surfaced_ids[1] = p.memory_id), 20,
  'its recall snapshots keep what surfaced as ids in rank order (each source first) and no text');

-- ---------------------------------------------------------------- twins: new step against old pair
-- Two owners with identical memories and identical pools; distinct service counts make the choice
-- of the longest-serving probes independent of probe ids. After each scenario's closed run, twin A
-- goes through the former two reads, twin B through roi.rotate_and_top_up().
select tests.create_user('a@twins.test');
select tests.create_user('b@twins.test');
insert into public.memories (author_id, scope, kind, title, body, created_at)
select tests.user_id(t.email), 'personal', (array['decision', 'gotcha', 'convention'])[1 + i % 3],
       format('Twin fact %s', i), format('Twin body %s', i), now() - make_interval(hours => i)
from generate_series(1, 60) i cross join (values ('a@twins.test'), ('b@twins.test')) t (email);

create function pg_temp.pool_of(email text) returns text[]
  language sql as $$
  select array_agg(format('%s %s %s %s', p.source_title, p.state, coalesce(p.retired_reason, '-'),
                          coalesce(p.question, '-')) order by p.source_title)
  from roi.probes p where p.owner_id = tests.user_id(email)
$$;
create function pg_temp.twin_scenario(target integer, rotation integer, mode text) returns boolean
  language plpgsql as $$
  declare
    run_a uuid;
    run_b uuid;
  begin
    update roi.settings set pool_target = target, rotation_per_run = rotation, extractor = mode;
    insert into roi.runs (owner_id, mode, probe_count) values (tests.user_id('a@twins.test'), 'deterministic', 20)
    returning id into run_a;
    insert into roi.runs (owner_id, mode, probe_count) values (tests.user_id('b@twins.test'), 'deterministic', 20)
    returning id into run_b;
    perform tests.authenticate_as('a@twins.test');
    perform roi.open_gate();
    perform roi.retire_longest_serving(run_a, (select count(*)::integer
      from roi.never_probed_knowledge((select s.rotation_per_run from roi.settings s))));
    perform roi.top_up_pool();
    perform tests.clear_authentication();
    perform tests.authenticate_as('b@twins.test');
    perform roi.open_gate();
    perform roi.rotate_and_top_up(run_b);
    perform tests.clear_authentication();
    return pg_temp.pool_of('a@twins.test') = pg_temp.pool_of('b@twins.test')
       and (select rt.retired_count from roi.rotations rt where rt.run_id = run_a)
           = (select rt.retired_count from roi.rotations rt where rt.run_id = run_b);
  end
$$;

-- Both twins' pools are filled the same way first (the first call fills and runs them, rotating
-- nothing: which of 20 equally served probes would rotate out is up to their random ids). Then every
-- active probe gets a distinct activation time, so "longest-serving" names the same probes on both.
update roi.settings set rotation_per_run = 0;
select tests.authenticate_as('a@twins.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'twin A runs once');
select tests.clear_authentication();
select tests.authenticate_as('b@twins.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'twin B runs once');
select tests.clear_authentication();
update roi.probes p
set activated_at = now() - interval '1 day' - substring(p.source_title from '[0-9]+$')::integer * interval '1 minute'
where p.owner_id in (tests.user_id('a@twins.test'), tests.user_id('b@twins.test'));
select is(pg_temp.pool_of('a@twins.test'), pg_temp.pool_of('b@twins.test'), 'the twins start from the same pool');

select ok(pg_temp.twin_scenario(20, 3, 'deterministic'),
  'a full pool rotating 3: the same probes retire, the same 3 newest come in, with the same questions');
select ok(pg_temp.twin_scenario(24, 3, 'deterministic'),
  'a pool short by more than the rotation (target raised to 24): the same pools');
select ok(pg_temp.twin_scenario(18, 5, 'deterministic'), 'a pool over its target (18, rotating 5): the same pools');
select ok(pg_temp.twin_scenario(18, 0, 'deterministic'), 'rotation off: the same pools');
select ok(pg_temp.twin_scenario(20, 2, 'llm'), 'LLM mode: the same probes retire and the same replacements wait, pending');

-- ---------------------------------------------------------------- questions worded as before
select is_empty($$
  with input (kind, title, body) as (values
    ('decision', 'Use   tabs' || chr(9) || 'not spaces', 'b'), ('gotcha', null, '  body only  here '),
    ('convention', '   ', repeat('wordy ', 300)), ('decision', repeat('abcdefghij ', 20), null),
    ('gotcha', repeat('x', 200), 'b'), ('episode', 't', 'b'), (null, 't', 'b'),
    ('convention', 'Quote "this" and %s and é', ''), ('decision', '', ''), ('gotcha', e'line\nbreak\r\n', 'b')
  ), former as (
    select i.kind, i.title, i.body, (
      with cleaned as (
        select coalesce(
          nullif(btrim(regexp_replace(coalesce(i.title, ''), '[[:space:][:cntrl:]]+', ' ', 'g')), ''),
          btrim(regexp_replace(left(coalesce(i.body, ''), 1000), '[[:space:][:cntrl:]]+', ' ', 'g'))
        ) as t
      ), subject as (
        select case when length(t) <= 120 then t
                    else regexp_replace(left(t, 120), '\s+\S*$', '') || '…' end as s
        from cleaned
      )
      select case i.kind
        when 'decision' then format('What did we decide about "%s", and why?', s)
        when 'gotcha' then format('What goes wrong with "%s", and how do we avoid it?', s)
        when 'convention' then format('What is our convention for "%s"?', s)
      end
      from subject) as question
    from input i
  )
  select * from former f where f.question is distinct from roi.template_question(f.kind, f.title, f.body)
$$, 'every templated question is worded exactly as the former SQL function worded it');

select * from finish();
rollback;
