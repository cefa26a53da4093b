-- The anchor (issue 44, item 1): Supabase's documented hybrid search ("Hybrid search",
-- supabase.com/docs/guides/ai/hybrid-search), built on the bench's throwaway cluster only, never in
-- the product schema. Its table, indexes and function follow that page: a `tsvector` generated column
-- with a GIN index, a pgvector HNSW index with inner product (`vector_ip_ops`, queried with `<#>`), and
-- reciprocal rank fusion in a SQL function with the page's defaults (full_text_weight 1,
-- semantic_weight 1, rrf_k 50; each leg its least(match_count, 30) * 2 best).
-- What our schema and house rules force, and nothing else:
--   * `vector(384)`, not the page's `vector(512)`: the offline model (e5) has 384 dimensions. The page's
--     type, `vector`, is kept (zm-roi stores `halfvec`).
--   * The columns row-level security needs (author_id, scope, project_id, team_id) and the memories'
--     own read policy on them, so the member sees exactly what recall shows them.
--   * `content` is the memory's title and body as the embedding reads them (title, newline, body).
--   * In its own schema, `anchor`, with schema-qualified names and `set search_path = ''`; the
--     operator is therefore written `operator(extensions.<#>)`.
-- The query's text search configuration is the server's default_text_search_config, as on the page;
-- Supabase's is `pg_catalog.english`, and the bench's cluster has the same (the report shows it).

create schema anchor;
grant usage on schema anchor to authenticated;

create table anchor.documents (
  id bigint primary key generated always as identity,
  content text,
  fts tsvector generated always as (to_tsvector('english', content)) stored,
  embedding extensions.vector(384),
  author_id uuid not null,
  scope text not null,
  project_id uuid,
  team_id uuid
);

alter table anchor.documents enable row level security;
create policy "Documents are visible to their memory's audience" on anchor.documents
  for select to authenticated using (
    (scope = 'personal' and author_id = (select auth.uid()))
    or (scope = 'project' and project_id in (select public.caller_project_ids()))
    or (scope = 'team' and team_id in (select public.caller_team_ids()))
  );
grant select on anchor.documents to authenticated;

-- Supabase's hybrid_search, as the page writes it (only the adaptations listed above): the keyword and
-- semantic legs each rank their best, fused by reciprocal rank.
create function anchor.hybrid_search(
  query_text text,
  query_embedding extensions.vector(384),
  match_count int,
  full_text_weight float = 1,
  semantic_weight float = 1,
  rrf_k int = 50
)
returns setof anchor.documents
language sql
set search_path = ''
as $$
with full_text as (
  select
    id,
    row_number() over(order by ts_rank_cd(fts, websearch_to_tsquery(query_text)) desc) as rank_ix
  from
    anchor.documents
  where
    fts @@ websearch_to_tsquery(query_text)
  order by rank_ix
  limit least(match_count, 30) * 2
),
semantic as (
  select
    id,
    row_number() over (order by embedding operator(extensions.<#>) query_embedding) as rank_ix
  from
    anchor.documents
  order by rank_ix
  limit least(match_count, 30) * 2
)
select
  documents.*
from
  full_text
  full outer join semantic
    on full_text.id = semantic.id
  join anchor.documents
    on coalesce(full_text.id, semantic.id) = documents.id
order by
  coalesce(1.0 / (rrf_k + full_text.rank_ix), 0.0) * full_text_weight +
  coalesce(1.0 / (rrf_k + semantic.rank_ix), 0.0) * semantic_weight
  desc
limit
  least(match_count, 30)
$$;
grant execute on function anchor.hybrid_search(text, extensions.vector, int, float, float, int) to authenticated;
