-- 20261201050000_hybrid_recall: the bundled recall is hybrid (the semantic leg finds a paraphrase the
-- lexical leg misses), both legs honour RLS and the pin, rows without an embedding are still found,
-- the benchmark calls the configured recall function, configure refuses definer, missing and
-- wrongly shaped functions, and roi_embedder reaches only what it embeds.
-- Vectors are synthetic unit vectors (one axis each), so the tests need no model.
begin;
select plan(22);

create function pg_temp.axis(i integer) returns extensions.vector language sql immutable as $$
  select (array_fill(0::real, array[i - 1]) || 1::real || array_fill(0::real, array[384 - i]))::extensions.vector
$$;

select tests.create_user('alice@hybrid.test');
select tests.create_user('dave@hybrid.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000e0b01', 'hybrid-atlas'),
  ('00000000-0000-0000-0000-0000000e0b02', 'hybrid-secret');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000e0b01', tests.user_id('alice@hybrid.test')),
  ('00000000-0000-0000-0000-0000000e0b02', tests.user_id('dave@hybrid.test'));
insert into public.memories (author_id, scope, project_id, kind, title, body, embedding, embedding_model) values
  (tests.user_id('alice@hybrid.test'), 'project', '00000000-0000-0000-0000-0000000e0b01', 'decision',
   'Blue-green cutover for atlas', 'Traffic moves to the idle stack after smoke checks.', pg_temp.axis(1), 'test-axes'),
  (tests.user_id('alice@hybrid.test'), 'project', '00000000-0000-0000-0000-0000000e0b01', 'gotcha',
   'Lambda cold starts on atlas', 'Provisioned concurrency hides them.', pg_temp.axis(2), 'test-axes'),
  (tests.user_id('alice@hybrid.test'), 'project', '00000000-0000-0000-0000-0000000e0b01', 'convention',
   'Release notes in the changelog', 'Every release lists its migrations.', null, null),
  (tests.user_id('alice@hybrid.test'), 'personal', null, 'gotcha',
   'My laptop VPN', 'Reconnect before deploying.', pg_temp.axis(3), 'test-axes'),
  (tests.user_id('dave@hybrid.test'), 'project', '00000000-0000-0000-0000-0000000e0b02', 'decision',
   'Dave''s secret rollout plan', 'Only dave may read this.', pg_temp.axis(1), 'test-axes'),
  (tests.user_id('dave@hybrid.test'), 'personal', null, 'decision',
   'Dave''s personal rollout notes', 'Only dave may read this either.', pg_temp.axis(1), 'test-axes');

select tests.authenticate_as('alice@hybrid.test');

-- The semantic leg finds the paraphrase.
select is_empty(
  $$select 1 from public.recall_lexical('how do we avoid outages when shipping a new version?',
                                        '00000000-0000-0000-0000-0000000e0b01')$$,
  'the lexical leg alone finds nothing for a paraphrase that shares no word with the memory');
select is(
  (select title from public.recall('how do we avoid outages when shipping a new version?', '00000000-0000-0000-0000-0000000e0b01',
                                   query_embedding => pg_temp.axis(1)) limit 1),
  'Blue-green cutover for atlas',
  'the hybrid recall ranks the paraphrased memory first through its embedding');
select results_eq(
  $$select memory_id from public.recall('release changelog', '00000000-0000-0000-0000-0000000e0b01')$$,
  $$select memory_id from public.recall_lexical('release changelog', '00000000-0000-0000-0000-0000000e0b01')$$,
  'without a query embedding the bundled recall is the lexical recall');
select ok(
  exists (select from public.recall('release changelog', '00000000-0000-0000-0000-0000000e0b01',
                                    query_embedding => pg_temp.axis(2))
          where title = 'Release notes in the changelog'),
  'a memory without an embedding is still found by the lexical leg');
select is(
  (select count(*)::integer from public.recall('atlas', '00000000-0000-0000-0000-0000000e0b01', match_count => 2,
                                               query_embedding => pg_temp.axis(2))),
  2, 'match_count limits the fused results');
select ok(
  (select bool_and(score > 0) from public.recall('atlas', '00000000-0000-0000-0000-0000000e0b01',
                                                 query_embedding => pg_temp.axis(2))),
  'every fused result carries a positive score');

-- RLS and the pin hold for the semantic leg: dave's rows point exactly at the query vector.
select is_empty(
  $$select 1 from public.recall('rollout', query_embedding => pg_temp.axis(1)) where title like 'Dave%'$$,
  'unpinned hybrid recall never surfaces another user''s project or personal memories');
select is_empty(
  $$select 1 from public.recall('rollout', '00000000-0000-0000-0000-0000000e0b02', query_embedding => pg_temp.axis(1))
    where title like 'Dave%'$$,
  'pinning to a project the caller is not in surfaces none of it, through either leg');
select results_eq(
  $$select title from public.recall('vpn', personal_only => true, query_embedding => pg_temp.axis(1))$$,
  array['My laptop VPN'],
  'the personal pin reads the personal layer alone through both legs');
update public.memories set body = 'Reconnect before deploying, and after lunch.' where title = 'My laptop VPN';
select is((select embedding_model from public.memories where title = 'My laptop VPN'), null,
  'editing a memory''s text drops its stale embedding (the backfill embeds it again)');

-- The benchmark calls the configured recall: one that surfaces nothing gives zero with_memory.
select tests.clear_authentication();
create function public.hybrid_test_nothing(query text, project_id uuid, team_id uuid, match_count integer,
  personal_only boolean) returns table (memory_id uuid, title text, body text, score real)
  language sql stable security invoker set search_path = ''
as $$ select null::uuid, null::text, null::text, null::real where false $$;
grant execute on function public.hybrid_test_nothing(text, uuid, uuid, integer, boolean) to authenticated;
create function public.hybrid_test_definer(query text, project_id uuid, team_id uuid, match_count integer,
  personal_only boolean) returns table (memory_id uuid, title text, body text, score real)
  language sql stable security definer set search_path = ''
as $$ select null::uuid, null::text, null::text, null::real where false $$;
create function public.hybrid_test_wrong(query text, match_count integer)
  returns table (memory_id uuid, title text, body text, score real)
  language sql stable security invoker set search_path = ''
as $$ select null::uuid, null::text, null::text, null::real where false $$;
create function public.hybrid_test_columns(query text, project_id uuid, team_id uuid, match_count integer,
  personal_only boolean) returns table (id uuid, content text)
  language sql stable security invoker set search_path = ''
as $$ select null::uuid, null::text where false $$;

select throws_ok($$select roi.configure_recall('public.hybrid_test_definer')$$, '42501', null,
  'configure refuses a SECURITY DEFINER recall');
select throws_ok($$select roi.configure_recall('public.hybrid_test_wrong')$$, '42883', null,
  'configure refuses a function with the wrong arguments');
select throws_ok($$select roi.configure_recall('public.hybrid_test_columns')$$, '42804', null,
  'configure refuses a function without memory_id, title, body and score');
select throws_ok($$select roi.configure_recall('public.no_such_recall')$$, '42883', null,
  'configure refuses a missing function');
select is((select recall_function from roi.settings),
  'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)',
  'a refused function leaves the setting unchanged');

select is(roi.configure_recall('public.hybrid_test_nothing'),
  'public.hybrid_test_nothing(text,uuid,uuid,integer,boolean)', 'configure accepts an invoker function of the contract');
update roi.settings set extractor = 'deterministic';
select tests.authenticate_as('alice@hybrid.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'alice''s benchmark runs');
select results_eq(
  $$select with_memory_count, judged_count, recall_function from public.roi_benchmark_runs$$,
  $$values (0, 4, 'public.hybrid_test_nothing(text,uuid,uuid,integer,boolean)')$$,
  'the run called the configured recall (nothing surfaced, so no question is answered with memory) and says so');

select tests.clear_authentication();
select is(roi.configure_recall('public.recall'), 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)',
  '--recall-function public.recall goes back to the bundled hybrid recall');

-- A configured function replaced by a definer one after configure is refused at run time.
select roi.configure_recall('public.hybrid_test_nothing');
alter function public.hybrid_test_nothing(text, uuid, uuid, integer, boolean) security definer;
select tests.authenticate_as('alice@hybrid.test');
select throws_ok($$select * from roi.configured_recall('x', null, null, 10, false, null, null)$$, '42501', null,
  'a configured recall that became SECURITY DEFINER is refused when called');

-- roi_embedder reaches only what it embeds.
select tests.clear_authentication();
select set_config('hybrid.alice', tests.user_id('alice@hybrid.test')::text, true);
set local role roi_embedder;
select throws_ok($$select kind from public.memories$$, '42501', null,
  'the embedder reads no memory column it does not embed');
select throws_ok($$insert into public.usage_events (owner_id, purpose, model) values
  (current_setting('hybrid.alice')::uuid, 'judgment', 'x')$$, '42501', null,
  'the embedder meters embedding calls only');
reset role;

select * from finish();
rollback;
