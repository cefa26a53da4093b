-- The current definitions, read top to bottom (supabase/schemas/*.sql in name order, after
-- supabase/compat/supabase_compat.sql). supabase/migrations/ is the history that deploys them: a change goes
-- here AND into a new migration (docs/contributing.md, "Changing the schema"); tests/db/test_schema_files.py
-- builds a database from each and prints any difference.
--
-- The memory substrate: teams, projects, their members, the memories agents write (with their
-- embeddings), and the usage events every model call leaves behind, each table with every policy and
-- grant on it (the API's users and the embedder; the worker's metering of usage_events, which names
-- its queue, is with the spending caps: 90_keys_and_totals.sql). The recall that reads memories as
-- the caller: 20_recall.sql. What a write of a memory sets off: its postings (21_recall_postings.sql),
-- its layers marked for upkeep (80_roi_upkeep.sql), a stale embedding forgotten (85_embeddings.sql).
--
-- Visibility rule (the public contract): a user sees their own personal memories, the memories of
-- projects they are a member of and those of teams they are a member of. Row-level security carries
-- the rule; recall() is SECURITY INVOKER, so it never sees more than the caller could select.

-- ============================================================================================
-- Tables
-- ============================================================================================
create table public.teams (
  id uuid primary key default gen_random_uuid(),
  name text not null unique check (length(btrim(name)) > 0),
  created_at timestamptz not null default now(),
  -- Before the unique index refuses it ("index row size exceeds btree maximum 2704"), with a limit a
  -- user can read; the CLI refuses the same limit first (zm_roi/names.py).
  constraint teams_name_at_most_200_characters check (char_length(name) <= 200)
);

create table public.team_members (
  team_id uuid not null references public.teams (id) on delete cascade,
  user_id uuid not null references auth.users (id) on delete cascade,
  primary key (team_id, user_id)
);

create table public.projects (
  id uuid primary key default gen_random_uuid(),
  team_id uuid references public.teams (id) on delete set null,
  name text not null unique check (length(btrim(name)) > 0),
  created_at timestamptz not null default now(),
  constraint projects_name_at_most_200_characters check (char_length(name) <= 200)
);

create table public.project_members (
  project_id uuid not null references public.projects (id) on delete cascade,
  user_id uuid not null references auth.users (id) on delete cascade,
  primary key (project_id, user_id)
);

create table public.memories (
  id uuid primary key default gen_random_uuid(),
  author_id uuid not null default auth.uid() references auth.users (id) on delete cascade,
  scope text not null check (scope in ('personal', 'project', 'team')),
  project_id uuid references public.projects (id) on delete cascade,
  team_id uuid references public.teams (id) on delete cascade,
  kind text not null check (kind in ('decision', 'gotcha', 'convention', 'episode')),
  title text not null,
  body text not null,
  created_at timestamptz not null default now(),
  invalidated_at timestamptz,
  -- Only the first 100,000 characters of a body are indexed: a tsvector is capped at 1 MB, and a
  -- memory longer than that is an attachment, not knowledge an agent recalls by its tail.
  search tsvector generated always as (
    setweight(to_tsvector('english'::regconfig, title), 'A')
    || setweight(to_tsvector('english'::regconfig, left(body, 100000)), 'B')
  ) stored,
  -- The memory's embedding (384 dimensions) and the model that produced it, written from outside the
  -- database by the Python package's one embedding door (import, `zm-roi embed`). Null until then:
  -- recall's lexical leg still finds the memory. A change of title or body clears both (85_embeddings.sql).
  -- Stored in half precision (halfvec: 2 bytes a dimension, 776 a vector against 1,544 in `vector`),
  -- here and in every index that holds it; recall ranks as well as with float4 (docs/decisions/0023).
  -- Written as pgvector's text '[...]' or as a `vector`, which casts to halfvec by itself.
  embedding extensions.halfvec(384),
  embedding_model text,
  -- The second offline model's embedding (all-MiniLM-L6-v2, 384 dimensions) and its model, for the
  -- third leg of recall; written and cleared like the first. Null with a hosted model (docs/recall.md).
  embedding_minilm extensions.halfvec(384),
  embedding_minilm_model text,
  constraint memories_scope_owner check (
    (scope = 'personal' and project_id is null and team_id is null)
    or (scope = 'project' and project_id is not null and team_id is null)
    or (scope = 'team' and team_id is not null and project_id is null)
  )
);

-- Both vectors stay in the row, and the search vector too: pgvector's default (STORAGE external) moved
-- the vectors of a row written by the import (the row, then each vector by UPDATE) out of line, and
-- each exact distance of the hybrid recall then read the TOAST index and a TOAST page, ~7 buffers a row
-- (docs/decisions/0019). `plain`: never out of line, never compressed (float vectors do not compress);
-- a change of a column's type resets its storage to the type's default, so it is set again with it;
-- `main` for `search`, so a row sheds its title and body first, which recall reads only for the rows it
-- returns, while the lexical leg's ts_rank reads `search` from the row.
alter table public.memories
  alter column embedding set storage plain,
  alter column embedding_minilm set storage plain,
  alter column search set storage main;

create table public.usage_events (
  id bigint generated always as identity primary key,
  owner_id uuid not null references auth.users (id) on delete cascade,
  -- judge_check: `zm-roi judge-check`'s calls, attributed to the operator's account;
  -- judge_withheld, judge_reversed: the checks of the judge on each LLM run (70_roi_queue.sql).
  purpose text not null check (purpose in ('probe_generation', 'judgment', 'closed_book_answer',
                                           'closed_book_grade', 'embedding', 'judge_check',
                                           'judge_withheld', 'judge_reversed')),
  model text not null,
  input_tokens integer not null default 0 check (input_tokens >= 0),
  output_tokens integer not null default 0 check (output_tokens >= 0),
  byok boolean not null default false,
  created_at timestamptz not null default now(),
  -- Which run and probe a model call served. Plain values, not foreign keys: the ledger of what was
  -- spent does not depend on the benchmark's tables.
  run_id uuid,
  probe_id uuid,
  -- What the call cost in US dollars by litellm's local price map; null when the model has no price.
  cost_usd numeric(18, 10) check (cost_usd >= 0)
);

-- ============================================================================================
-- Indexes
-- ============================================================================================
-- No GIN index on `search`: no signed-in recall can use one (`@@` is not leakproof, so under RLS it
-- runs after the policy, never inside an index scan; 20_recall.sql), and the one path that could, an
-- unpinned recall by a caller who bypasses RLS, is no faster with it (docs/decisions/0009).
-- Each layer's live memories, newest first: top-up and rotation read a layer's never-probed
-- knowledge in this order and stop as soon as they have enough (roi.never_probed_knowledge). Recall
-- reads the covering indexes in 20_recall.sql instead.
create index memories_project_live_idx on public.memories (project_id, created_at desc)
  where invalidated_at is null and scope = 'project';
create index memories_team_live_idx on public.memories (team_id, created_at desc)
  where invalidated_at is null and scope = 'team';
create index memories_personal_live_idx on public.memories (author_id, created_at desc)
  where invalidated_at is null and scope = 'personal';

-- Each layer's invalidated memories by when: the tile's count of knowledge invalidated since the
-- latest run reads a layer's range here (roi.knowledge_growth_since). Live rows are not in them.
create index memories_project_invalidated_idx on public.memories (project_id, invalidated_at)
  where invalidated_at is not null and scope = 'project';
create index memories_team_invalidated_idx on public.memories (team_id, invalidated_at)
  where invalidated_at is not null and scope = 'team';
create index memories_personal_invalidated_idx on public.memories (author_id, invalidated_at)
  where invalidated_at is not null and scope = 'personal';

-- Each leg's live vectors by layer (the author's id for a personal memory, else its project's or
-- team's) and by the model that wrote them: roi.start_run asks, once per run and leg, whether the
-- caller's layers hold a vector of a model other than the questions' (50_roi_runs.sql), and reads
-- here only those rows (none while every vector is of one model), never another user's or the table.
create index memories_embedding_model_idx on public.memories
  ((case scope when 'personal' then author_id when 'project' then project_id else team_id end), embedding_model)
  where invalidated_at is null and embedding is not null;
create index memories_embedding_minilm_model_idx on public.memories
  ((case scope when 'personal' then author_id when 'project' then project_id else team_id end), embedding_minilm_model)
  where invalidated_at is null and embedding_minilm is not null;

create index team_members_user_idx on public.team_members (user_id);
create index project_members_user_idx on public.project_members (user_id);
create index projects_team_idx on public.projects (team_id);
create index usage_events_owner_idx on public.usage_events (owner_id, created_at);
-- A run's cost and tokens in the run list (public.roi_benchmark_runs).
create index usage_events_run_idx on public.usage_events (run_id) where run_id is not null;

-- ============================================================================================
-- Functions
-- ============================================================================================
-- The projects and teams the caller belongs to. Policies use them as `x in (select …)`, which
-- Postgres evaluates once per statement rather than once per memory row. PL/pgSQL, not SQL: a SQL
-- function with `set search_path` is never inlined, so each call parsed, rewrote (the memberships'
-- read policy) and planned its query again, ~0.2 ms a call and about six calls a recall; PL/pgSQL
-- keeps the plan for the session (docs/decisions/0024).
create function public.caller_project_ids() returns setof uuid
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return query select pm.project_id from public.project_members pm where pm.user_id = (select auth.uid());
end
$$;

create function public.caller_team_ids() returns setof uuid
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return query select tm.team_id from public.team_members tm where tm.user_id = (select auth.uid());
end
$$;

-- ============================================================================================
-- Policies
-- ============================================================================================
alter table public.teams enable row level security;
alter table public.team_members enable row level security;
alter table public.projects enable row level security;
alter table public.project_members enable row level security;
alter table public.memories enable row level security;
alter table public.usage_events enable row level security;

create policy "Teams are visible to their members" on public.teams
  for select to authenticated using (id in (select public.caller_team_ids()));
create policy "Members see their own team memberships" on public.team_members
  for select to authenticated using (user_id = (select auth.uid()));
create policy "Projects are visible to their members" on public.projects
  for select to authenticated using (id in (select public.caller_project_ids()));
create policy "Members see their own project memberships" on public.project_members
  for select to authenticated using (user_id = (select auth.uid()));

-- A hashed subplan of the caller's layers, unlike the postings' arrays (21_recall_postings.sql): with arrays,
-- generic plans put a caller's layer at about one row, and the pool's per-layer reads lost their
-- ordered index scans (benchmark_memory() +6% interleaved; docs/decisions/0013).
create policy "Memories are visible to their audience" on public.memories
  for select to authenticated using (
    (scope = 'personal' and author_id = (select auth.uid()))
    or (scope = 'project' and project_id in (select public.caller_project_ids()))
    or (scope = 'team' and team_id in (select public.caller_team_ids()))
  );

create policy "Members write memories where they belong" on public.memories
  for insert to authenticated with check (
    author_id = (select auth.uid())
    and (
      scope = 'personal'
      or (scope = 'project' and project_id in (select public.caller_project_ids()))
      or (scope = 'team' and team_id in (select public.caller_team_ids()))
    )
  );

create policy "Authors update their memories where they still belong" on public.memories
  for update to authenticated
  using (
    author_id = (select auth.uid())
    and (
      scope = 'personal'
      or (scope = 'project' and project_id in (select public.caller_project_ids()))
      or (scope = 'team' and team_id in (select public.caller_team_ids()))
    )
  )
  with check (
    author_id = (select auth.uid())
    and (
      scope = 'personal'
      or (scope = 'project' and project_id in (select public.caller_project_ids()))
      or (scope = 'team' and team_id in (select public.caller_team_ids()))
    )
  );

create policy "Authors delete their memories" on public.memories
  for delete to authenticated using (author_id = (select auth.uid()));

-- The embedder (85_embeddings.sql) reads and embeds live memories only.
create policy "The embedder reads and embeds live memories" on public.memories
  for select to roi_embedder using (invalidated_at is null);
create policy "The embedder writes embeddings of live memories" on public.memories
  for update to roi_embedder using (invalidated_at is null) with check (invalidated_at is null);

create policy "Owners read their own usage events" on public.usage_events
  for select to authenticated using (owner_id = (select auth.uid()));
create policy "The embedder meters its embedding calls" on public.usage_events
  for insert to roi_embedder with check (purpose = 'embedding');

-- ============================================================================================
-- Grants
-- ============================================================================================
revoke all on public.teams, public.team_members, public.projects, public.project_members,
  public.memories, public.usage_events from anon;
revoke all on public.teams, public.team_members, public.projects, public.project_members,
  public.memories, public.usage_events from authenticated;

grant select on public.teams, public.team_members, public.projects, public.project_members
  to authenticated;
grant select, insert, update, delete on public.memories to authenticated;
grant select on public.usage_events to authenticated;

-- The embedder: the text it embeds and the columns it writes, nothing else; it meters its calls.
-- The embedder: the text it embeds and the columns it writes, nothing else.
grant select (id, author_id, title, body, embedding_model, embedding_minilm_model, invalidated_at)
  on public.memories to roi_embedder;
grant update (embedding, embedding_model, embedding_minilm, embedding_minilm_model) on public.memories to roi_embedder;
grant insert on public.usage_events to roi_embedder;

revoke execute on function public.caller_project_ids(), public.caller_team_ids() from public, anon;
grant execute on function public.caller_project_ids(), public.caller_team_ids() to authenticated;
