-- 20261201180000_minilm_third_recall_leg: the bundled recall's third leg (MiniLM, embedding_minilm)
-- finds a memory neither other leg finds, honours RLS and the pin, lets rows missing one embedding
-- be found by the others, fuses only the legs whose query embedding is given, and its column is
-- written by roi_embedder and cleared with the text like the first. Vectors are synthetic unit
-- vectors (one axis each), so the tests need no model.
begin;
select plan(13);

create function pg_temp.axis(i integer) returns extensions.vector language sql immutable as $$
  select (array_fill(0::real, array[i - 1]) || 1::real || array_fill(0::real, array[384 - i]))::extensions.vector
$$;

select tests.create_user('alice@minilm.test');
select tests.create_user('dave@minilm.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-00000000f001', 'minilm-atlas'),
  ('00000000-0000-0000-0000-00000000f002', 'minilm-secret');
insert into public.project_members values
  ('00000000-0000-0000-0000-00000000f001', tests.user_id('alice@minilm.test')),
  ('00000000-0000-0000-0000-00000000f002', tests.user_id('dave@minilm.test'));
-- Axis 1 is the query's e5 direction, axis 5 its MiniLM direction. "Canary" has no e5 embedding and
-- shares no word with the question: only the third leg can find it.
insert into public.memories (author_id, scope, project_id, kind, title, body, embedding, embedding_model,
                             embedding_minilm, embedding_minilm_model) values
  (tests.user_id('alice@minilm.test'), 'project', '00000000-0000-0000-0000-00000000f001', 'decision',
   'Canary releases for atlas', 'One percent of traffic first.', null, null, pg_temp.axis(5), 'test-axes'),
  (tests.user_id('alice@minilm.test'), 'project', '00000000-0000-0000-0000-00000000f001', 'gotcha',
   'Blue-green cutover for atlas', 'Traffic moves to the idle stack.', pg_temp.axis(1), 'test-axes', null, null),
  (tests.user_id('alice@minilm.test'), 'project', '00000000-0000-0000-0000-00000000f001', 'convention',
   'Release notes in the changelog', 'Every release lists its migrations.', null, null, null, null),
  (tests.user_id('dave@minilm.test'), 'project', '00000000-0000-0000-0000-00000000f002', 'decision',
   'Dave''s secret rollout plan', 'Only dave may read this.', pg_temp.axis(1), 'test-axes', pg_temp.axis(5),
   'test-axes'),
  (tests.user_id('dave@minilm.test'), 'personal', null, 'decision',
   'Dave''s personal rollout notes', 'Only dave may read this either.', pg_temp.axis(1), 'test-axes',
   pg_temp.axis(5), 'test-axes');

select tests.authenticate_as('alice@minilm.test');

select ok(
  exists (select from public.recall('how do we avoid outages when shipping?', '00000000-0000-0000-0000-00000000f001',
                                    query_embedding => pg_temp.axis(1), query_embedding_minilm => pg_temp.axis(5))
          where title = 'Canary releases for atlas'),
  'the third leg finds a memory neither the lexical nor the e5 leg can find');
select ok(
  not exists (select from public.recall('how do we avoid outages when shipping?', '00000000-0000-0000-0000-00000000f001',
                                        query_embedding => pg_temp.axis(1))
              where title = 'Canary releases for atlas'),
  'without the MiniLM query embedding that memory is not found (the third leg is what found it)');
select ok(
  exists (select from public.recall('how do we avoid outages when shipping?', '00000000-0000-0000-0000-00000000f001',
                                    query_embedding => pg_temp.axis(1), query_embedding_minilm => pg_temp.axis(5))
          where title = 'Blue-green cutover for atlas'),
  'a memory without a MiniLM embedding is still found by the e5 leg');
select ok(
  exists (select from public.recall('release changelog', '00000000-0000-0000-0000-00000000f001',
                                    query_embedding => pg_temp.axis(1), query_embedding_minilm => pg_temp.axis(5))
          where title = 'Release notes in the changelog'),
  'a memory with neither embedding is still found by the lexical leg');
select is(
  (select title from public.recall('how do we avoid outages when shipping?', '00000000-0000-0000-0000-00000000f001',
                                   query_embedding_minilm => pg_temp.axis(5)) limit 1),
  'Canary releases for atlas',
  'with only the MiniLM embedding given, recall fuses the lexical and MiniLM legs');
select ok(
  not exists (select from public.recall('how do we avoid outages when shipping?', '00000000-0000-0000-0000-00000000f001',
                                        query_embedding_minilm => pg_temp.axis(5))
              where title = 'Blue-green cutover for atlas'),
  'and leaves the e5 leg out (its query embedding is null)');
select is(
  (select title from public.recall('how do we avoid outages when shipping?', '00000000-0000-0000-0000-00000000f001',
                                   query_embedding => pg_temp.axis(1)) limit 1),
  'Blue-green cutover for atlas',
  'a call with today''s six arguments is the two-leg recall');

-- RLS and the pin hold for the third leg: dave's rows point exactly at the MiniLM query vector.
select is_empty(
  $$select 1 from public.recall('rollout', query_embedding_minilm => pg_temp.axis(5)) where title like 'Dave%'$$,
  'unpinned, the third leg never surfaces another user''s project or personal memories');
select is_empty(
  $$select 1 from public.recall('rollout', '00000000-0000-0000-0000-00000000f002',
                                query_embedding_minilm => pg_temp.axis(5)) where title like 'Dave%'$$,
  'pinning to a project the caller is not in surfaces none of it through the third leg');
select tests.clear_authentication();

-- The embedder writes the second column; a text edit clears it with the first.
set local role roi_embedder;
update public.memories set embedding_minilm = pg_temp.axis(7), embedding_minilm_model = 'test-axes-2'
where title = 'Release notes in the changelog';
reset role;
select is((select embedding_minilm_model from public.memories where title = 'Release notes in the changelog'),
  'test-axes-2', 'roi_embedder writes the MiniLM embedding and its model');
set local role roi_embedder;
select throws_ok($$update public.memories set title = 'x' where title = 'Release notes in the changelog'$$,
  '42501', null, 'and still no other column');
reset role;
update public.memories set body = 'One percent of traffic first, then ten.' where title = 'Canary releases for atlas';
select is((select embedding_minilm_model from public.memories where title = 'Canary releases for atlas'), null,
  'editing a memory''s text drops its stale MiniLM embedding too');
update public.memories set body = 'Traffic moves to the idle stack after checks.',
  embedding_minilm = pg_temp.axis(9), embedding_minilm_model = 'test-axes'
where title = 'Blue-green cutover for atlas';
select is(
  (select (embedding_model, embedding_minilm_model)::text from public.memories where title = 'Blue-green cutover for atlas'),
  '(,test-axes)', 'a write that sets the MiniLM embedding keeps it, and the stale e5 one still goes');

select * from finish();
rollback;
