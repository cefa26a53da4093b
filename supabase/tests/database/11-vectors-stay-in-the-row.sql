-- 20261202191000_vectors_stay_in_the_row: a memory's two vectors are stored in its row (STORAGE plain)
-- and its search vector stays there too (main), so that the import's path (rows first, then each
-- vector column by UPDATE) leaves nothing recall reads in TOAST. With pgvector's default (external),
-- a row past ~2 kB had a vector moved out of line, and each exact distance then read the TOAST index
-- and a TOAST page: ~3 buffers a vector, ~7 a row for the hybrid recall (docs/decisions/0019).
-- 20261203040000_vectors_in_half_precision: both are halfvec(384), and still plain (a change of type
-- resets the storage; the migration sets it again in the same statement, docs/decisions/0023).
begin;
select plan(5);

select is(
  array(select attname::text || ' ' || atttypmod from pg_catalog.pg_attribute
        where attrelid = 'public.memories'::regclass and attname in ('embedding', 'embedding_minilm')
          and atttypid = 'extensions.halfvec'::regtype
        order by attname),
  array['embedding 384', 'embedding_minilm 384'],
  'both vectors are stored in half precision, 384 dimensions');

-- A 384-dimension vector of sines: distinct per seed and incompressible, like a real embedding (one of
-- zeros and ones would be compressed and prove nothing).
create function pg_temp.noise(seed integer) returns extensions.vector language sql immutable as $$
  select array_agg(sin(seed * 7919 + i)::real order by i)::extensions.vector from generate_series(1, 384) i
$$;

-- The bytes of the memories' TOAST table that this transaction sees.
create function pg_temp.toast_bytes() returns bigint language plpgsql as $$
declare
  bytes bigint;
begin
  execute format('select coalesce(sum(octet_length(chunk_data)), 0) from %s',
                 (select c.reltoastrelid::regclass from pg_catalog.pg_class c where c.oid = 'public.memories'::regclass))
  into bytes;
  return bytes;
end
$$;

-- Shared buffers (hit + read) a statement's plan touched, by EXPLAIN (ANALYZE, BUFFERS).
create function pg_temp.buffers(statement text) returns bigint language plpgsql as $$
declare
  plan json;
begin
  execute 'explain (analyze, buffers, format json) ' || statement into plan;
  return (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::bigint + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::bigint;
end
$$;

select is(
  array(select attname::text || ' ' || attstorage::text from pg_catalog.pg_attribute
        where attrelid = 'public.memories'::regclass and attname in ('embedding', 'embedding_minilm', 'search')
        order by attname),
  array['embedding p', 'embedding_minilm p', 'search m'],
  'both vectors are stored plain (in the row, uncompressed) and the search vector main');

select tests.create_user('writer@pages.test');
insert into public.projects (id, name) values ('00000000-0000-0000-0000-0000000a9e01', 'pages-project');
create temp table toast_before as select pg_temp.toast_bytes() as bytes;

-- 400 memories written as `zm-roi import` writes them: the rows, then MiniLM's column, then e5's.
insert into public.memories (author_id, scope, project_id, kind, title, body)
select tests.user_id('writer@pages.test'), 'project', '00000000-0000-0000-0000-0000000a9e01', 'decision',
       'Shard ' || i || ' replicas', 'Shard ' || i || ' keeps three replicas across two zones.'
from generate_series(1, 400) i;
update public.memories
set embedding_minilm = pg_temp.noise(substring(title from '\d+')::integer), embedding_minilm_model = 'test-noise'
where project_id = '00000000-0000-0000-0000-0000000a9e01';
update public.memories
set embedding = pg_temp.noise(-substring(title from '\d+')::integer), embedding_model = 'test-noise'
where project_id = '00000000-0000-0000-0000-0000000a9e01';

select cmp_ok(pg_temp.toast_bytes() - (select bytes from toast_before), '<', 400 * 384::bigint,
  'vectors filled by UPDATE stay in their rows: 400 memories add under a quarter of a vector each to TOAST');

-- Reading both vectors of every row against reading the rows alone, in the same scan of the heap: the
-- difference is what the vectors cost beyond their rows (with vectors out of line, ~3 buffers each).
set local enable_indexscan = off;
set local enable_bitmapscan = off;
set local enable_indexonlyscan = off;
select cmp_ok(
  pg_temp.buffers($$select sum(extensions.vector_dims(embedding) + extensions.vector_dims(embedding_minilm))
                    from public.memories where project_id = '00000000-0000-0000-0000-0000000a9e01'$$)
  - pg_temp.buffers($$select count(*) from public.memories
                      where project_id = '00000000-0000-0000-0000-0000000a9e01' and embedding is not null$$),
  '<', 40::bigint,
  'reading 400 memories'' two vectors touches no page beyond their rows (no TOAST index or page)');
select cmp_ok(
  pg_temp.buffers($$select sum(length(search)) from public.memories
                    where project_id = '00000000-0000-0000-0000-0000000a9e01'$$)
  - pg_temp.buffers($$select count(*) from public.memories
                      where project_id = '00000000-0000-0000-0000-0000000a9e01' and embedding is not null$$),
  '<', 40::bigint,
  'nor does reading their search vectors, which the lexical leg ranks');
reset enable_indexscan;
reset enable_bitmapscan;
reset enable_indexonlyscan;

select * from finish();
rollback;
