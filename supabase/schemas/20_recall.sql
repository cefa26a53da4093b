-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- sql/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (README, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- Recall: the one read path agents use, the query parser it shares with nothing else, and the
-- covering indexes it reads memories from. public.recall is hybrid (lexical + semantic, fused by
-- reciprocal rank); public.recall_lexical is its lexical leg, and a recall a deployment can configure
-- to compare against (which recall the benchmark calls: roi.configured_recall, 32_roi_runs.sql).
--
-- Why it reads the way it does (each choice measured by `make bench`, bench/README.md):
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
--      the lexical matcher. The semantic leg ranks by exact cosine distance. No HNSW or IVFFlat
--      index on purpose: under RLS an index-ordered approximate scan applies the policy after the
--      search, so it under-returns, and its row counts reveal how dense other tenants' data is.
--   3. Index-only. Reading a heap page per row of the layer (a layer's memories arrive interleaved
--      with everyone else's), for the hybrid a TOASTed 1.5 kB vector too, and ranking with
--      ts_rank_cd, a pinned recall at 1M takes 14 ms (project) and 27 ms (team) against a target of
--      10, and the hybrid 3× that. A b-tree covering index per layer kind keeps a layer's entries
--      together whatever order they arrive in, and an index-only scan evaluates the policy, `@@`
--      and the distance on the entry itself; ts_rank ranks the templated questions as well as
--      ts_rank_cd or better at ~1/10 the CPU (public ADR set: hit@1 323 against 321 of 328, MRR
--      0.991 against 0.988); and the plan, the same shape for every pin, is generic instead of
--      re-planned on every call. A pin narrows to the caller's own memberships first, so pinning
--      someone else's project or team reads nothing of it (its size cannot be timed).
--   4. Hybrid planned per call: for a team whose one project holds most memories, a generic plan
--      scans the whole table for the semantic leg of every pin (1,000-row layer next to a
--      100,000-row one: 62 ms of CPU a call, against 3.4 planned per call). recall_lexical keeps
--      its generic plan: its arms stay on their indexes.
--   5. No JIT: a recall's cost estimate grows with the table, its work does not; compiling its plan
--      would cost more than running it.

-- ============================================================================================
-- Indexes
-- ============================================================================================
-- One covering index per layer kind for the lexical leg: the layer key, then every column the read
-- policy and recall need (the policy's scope, author_id, project_id, team_id run on each entry before
-- the question does). A b-tree entry holds at most ~2.7 kB and a search vector can be larger (bodies
-- are indexed up to 100,000 characters), so only vectors that fit go in: 2,400 bytes keeps each entry
-- under the limit (2,704) with the rest. `octet_length(search::text) + 4 * length(search)` bounds the
-- stored size of a tsvector from above (per lexeme the binary form is at most 4 bytes longer than its
-- text form), is immutable, and is repeated verbatim in the recall functions so the planner can match
-- each arm to its index.
create index memories_personal_search_idx on public.memories (author_id)
  include (scope, project_id, team_id, created_at, id, search)
  where invalidated_at is null and scope = 'personal'
    and octet_length(search::text) + 4 * length(search) <= 2400;
create index memories_project_search_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, search)
  where invalidated_at is null and scope = 'project'
    and octet_length(search::text) + 4 * length(search) <= 2400;
create index memories_team_search_idx on public.memories (team_id)
  include (scope, project_id, author_id, created_at, id, search)
  where invalidated_at is null and scope = 'team'
    and octet_length(search::text) + 4 * length(search) <= 2400;

-- The live memories whose search vector is too large for the covering indexes (bodies of several
-- pages: rare), per layer; recall reads them in an arm of their own.
create index memories_personal_oversized_idx on public.memories (author_id)
  where invalidated_at is null and scope = 'personal'
    and octet_length(search::text) + 4 * length(search) > 2400;
create index memories_project_oversized_idx on public.memories (project_id)
  where invalidated_at is null and scope = 'project'
    and octet_length(search::text) + 4 * length(search) > 2400;
create index memories_team_oversized_idx on public.memories (team_id)
  where invalidated_at is null and scope = 'team'
    and octet_length(search::text) + 4 * length(search) > 2400;

-- The semantic leg's covering indexes: each layer's vectors together and inline (~4 a page). A
-- 384-dimension vector always fits a b-tree entry (1.5 kB of 2.7 kB), so no row is left out; the
-- price is the vectors stored a second time (~1.9 kB per embedded memory with the entry's overhead).
create index memories_personal_embedding_idx on public.memories (author_id)
  include (scope, project_id, team_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'personal' and embedding is not null;
create index memories_project_embedding_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'project' and embedding is not null;
create index memories_team_embedding_idx on public.memories (team_id)
  include (scope, project_id, author_id, created_at, id, embedding)
  where invalidated_at is null and scope = 'team' and embedding is not null;

-- The same for the third leg's vectors (MiniLM), for the same reason and at the same price.
create index memories_personal_embedding_minilm_idx on public.memories (author_id)
  include (scope, project_id, team_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'personal' and embedding_minilm is not null;
create index memories_project_embedding_minilm_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'project' and embedding_minilm is not null;
create index memories_team_embedding_minilm_idx on public.memories (team_id)
  include (scope, project_id, author_id, created_at, id, embedding_minilm)
  where invalidated_at is null and scope = 'team' and embedding_minilm is not null;

-- ============================================================================================
-- Functions
-- ============================================================================================

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

-- The lexical recall: public.recall without a query embedding, and a recall of its own a deployment
-- can configure (the demo compares against it). Runs as the caller: row-level security decides what
-- exists, the pin decides which of it a session working in that scope would read (project or team
-- plus the caller's personal layer; `personal_only` the personal layer alone; no pin every project
-- and team the caller is a member of). Best match first, live memories only. The best `match_count`
-- are chosen from the covering indexes alone (index-only scans: id, created_at and score), then only
-- those rows are read from the table for their text. A caller with no identity (maintenance): the
-- pin as given, or with no pin everything their role may see, in its own statement.
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
  -- ts_rank's weights for D, C, B (the body) and A (the title): the title weighted like the body.
  weights constant real[] := '{0.1, 0.2, 0.4, 0.4}';
  tsq tsquery := public.recall_query(coalesce(query, ''));
  caller uuid := auth.uid();
  unpinned boolean := recall_lexical.project_id is null and recall_lexical.team_id is null
                      and not coalesce(personal_only, false);
  projects uuid[];
  teams uuid[];
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if unpinned and caller is null then
    return query
      select m.id, m.kind, m.scope, m.title, m.body, ts_rank(weights, m.search, tsq, 1)::real as score
      from public.memories m
      where m.invalidated_at is null and m.search @@ tsq
      order by score desc, m.created_at desc, m.id
      limit wanted;
    return;
  end if;
  if caller is null then
    projects := array_remove(array[recall_lexical.project_id], null);
    teams := array_remove(array[recall_lexical.team_id], null);
  else
    projects := array(select p from public.caller_project_ids() p where p = recall_lexical.project_id or unpinned);
    teams := array(select t from public.caller_team_ids() t where t = recall_lexical.team_id or unpinned);
  end if;
  return query
    with best as (
      select c.id, c.created_at, c.score
      from (
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real as score
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.invalidated_at is null
          and octet_length(m.search::text) + 4 * length(m.search) > 2400
          and ((m.scope = 'personal' and m.author_id = caller)
               or (m.scope = 'project' and m.project_id = any (projects))
               or (m.scope = 'team' and m.team_id = any (teams)))
          and m.search @@ tsq
      ) c
      order by c.score desc, c.created_at desc, c.id
      limit wanted
    )
    -- `= any (array(…))`: the text of the chosen rows by primary key, never a join planned over the table.
    select m.id, m.kind, m.scope, m.title, m.body, b.score
    from public.memories m
    join best b on b.id = m.id
    where m.id = any (array(select best.id from best))
    order by b.score desc, b.created_at desc, b.id;
end
$$;

-- The bundled recall: the contract's five arguments plus two optional query embeddings (the documented
-- extension of the contract): the first model's (`embedding`) and MiniLM's (`embedding_minilm`).
-- Without an embedding, or for a caller with no identity and no pin (maintenance: exact distances over
-- a whole corpus are not a read path), it is the lexical recall. With one or both, the lexical leg
-- plus a semantic leg per embedding given (a leg whose embedding is null is left out, so a deployment
-- with one hosted model fuses two legs), over the layers the lexical recall reads, each from its
-- covering indexes alone
-- (index-only scans: id, created_at and the leg's rank): the lexical leg's arms are recall_lexical's
-- (written twice, held equal by tests/db/test_schema_files.py), ranked by ts_rank; the semantic legs
-- rank the embedded memories by exact cosine distance (`minilm` on the second column). Each keeps its
-- best 2 × match_count, reciprocal rank fusion adds weight / (k + rank) per leg (k and the three
-- weights chosen on paraphrased questions: bench/README.md, "Three legs"), and only the best match_count rows are read from the table for
-- their text. (Calling recall_lexical for the lexical leg instead cost a fifth more: its text fetch
-- of 2 × match_count rows, then this one's.) Planned per call, unlike recall_lexical: a generic plan
-- estimates the pinned layers at a share of the table, and where one project holds most of the
-- memories that share made the semantic leg scan the whole table for every pin (bench/README.md,
-- "Pinned recall against the layer's size").
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
  -- Chosen on the paraphrased questions with all three legs (bench/README.md, "Three legs"): a small k
  -- lets a leg's first ranks count, and the two embedding legs weigh alike, a quarter above the lexical.
  rrf_k constant integer := 5;
  lexical_weight constant real := 1.0;
  semantic_weight constant real := 1.25;
  minilm_weight constant real := 1.25;
  -- recall_lexical's ranking weights: the title weighted like the body.
  weights constant real[] := '{0.1, 0.2, 0.4, 0.4}';
  tsq tsquery := public.recall_query(coalesce(query, ''));
  caller uuid := auth.uid();
  unpinned boolean := recall.project_id is null and recall.team_id is null and not coalesce(personal_only, false);
  projects uuid[];
  teams uuid[];
  wanted integer := greatest(least(coalesce(match_count, 10), 100), 0);
begin
  if (query_embedding is null and query_embedding_minilm is null) or (unpinned and caller is null) then
    return query select * from public.recall_lexical(query, recall.project_id, recall.team_id, match_count,
                                                      personal_only);
    return;
  end if;
  if caller is null then
    projects := array_remove(array[recall.project_id], null);
    teams := array_remove(array[recall.team_id], null);
  else
    projects := array(select p from public.caller_project_ids() p where p = recall.project_id or unpinned);
    teams := array(select t from public.caller_team_ids() t where t = recall.team_id or unpinned);
  end if;
  return query
    with lexical as (
      select c.id, c.created_at, row_number() over (order by c.score desc, c.created_at desc, c.id) as rank
      from (
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real as score
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and octet_length(m.search::text) + 4 * length(m.search) <= 2400
          and m.search @@ tsq
        union all
        select m.id, m.created_at, ts_rank(weights, m.search, tsq, 1)::real
        from public.memories m
        where m.invalidated_at is null
          and octet_length(m.search::text) + 4 * length(m.search) > 2400
          and ((m.scope = 'personal' and m.author_id = caller)
               or (m.scope = 'project' and m.project_id = any (projects))
               or (m.scope = 'team' and m.team_id = any (teams)))
          and m.search @@ tsq
        order by 3 desc, 2 desc, 1
        limit wanted * 2
      ) c
    ), semantic as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding as distance
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and m.embedding is not null
        union all
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and m.embedding is not null
        union all
        select m.id, m.created_at, m.embedding operator(extensions.<=>) query_embedding
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and m.embedding is not null
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
    ), minilm as (
      select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
      from (
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm as distance
        from public.memories m
        where m.scope = 'personal' and m.invalidated_at is null and m.author_id = caller
          and m.embedding_minilm is not null
        union all
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
        from public.memories m
        where m.scope = 'project' and m.invalidated_at is null and m.project_id = any (projects)
          and m.embedding_minilm is not null
        union all
        select m.id, m.created_at, m.embedding_minilm operator(extensions.<=>) query_embedding_minilm
        from public.memories m
        where m.scope = 'team' and m.invalidated_at is null and m.team_id = any (teams)
          and m.embedding_minilm is not null
        order by 3, 2 desc, 1
        limit wanted * 2
      ) c
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
revoke execute on function public.recall_query(text), public.recall_lexical(text, uuid, uuid, integer, boolean),
  public.recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector) from public, anon;
grant execute on function public.recall_query(text), public.recall_lexical(text, uuid, uuid, integer, boolean),
  public.recall(text, uuid, uuid, integer, boolean, extensions.vector, extensions.vector) to authenticated;
