-- The synthetic corpus `make bench` measures: users, teams, projects with overlapping memberships
-- and memories with realistic lengths and a Zipf-like vocabulary. Applied to the bench's own
-- throwaway cluster only, never to a user's database (schema `bench` exists nowhere else).
--
-- Reproducible from a seed: every random draw comes from random() after a setseed() derived from
-- (seed, chunk), in a plan that runs on one process (no parallel workers), and every id is an md5 of
-- the seed and a row number. Memories are generated in fixed chunks of bench.chunk_size(), so a
-- 100k corpus is the first 100k memories of the 1M corpus with the same seed.

create schema if not exists bench;

-- ============================================================================================
-- Tables
-- ============================================================================================

-- The vocabulary, by frequency rank: English function words first (to_tsvector drops them, as it
-- drops them from real notes), then the words of software work, then invented words for the tail.
create table bench.vocab (rank integer primary key, word text not null);

-- Sentences of Zipf-drawn words; bodies are made of several of them.
create table bench.phrases (id integer primary key, phrase text not null);

-- Who belongs where, as arrays, so a memory's author is drawn from its scope's members.
create table bench.project_roster (n integer primary key, project_id uuid not null, team_id uuid,
                                   members uuid[] not null);
create table bench.team_roster (n integer primary key, team_id uuid not null, members uuid[] not null);
create table bench.user_roster (n integer primary key, user_id uuid not null);

create table bench.shape (singleton boolean primary key default true check (singleton),
                          seed integer not null, users integer not null, teams integer not null,
                          projects integer not null, vocabulary integer not null, phrases integer not null);

-- ============================================================================================
-- Functions
-- ============================================================================================

create function bench.chunk_size() returns integer
  language sql immutable set search_path = ''
as $$ select 10000 $$;

-- A setseed() argument in [-1, 1) from the seed and a stream number, so each chunk has its own
-- reproducible stream whichever connection generates it.
create function bench.seed_for(seed integer, stream bigint) returns double precision
  language sql immutable set search_path = ''
as $$ select (hashint8extended(stream, seed::bigint) % 1000000)::double precision / 1000001 $$;

create function bench.uuid_for(seed integer, kind text, n bigint) returns uuid
  language sql immutable set search_path = ''
as $$ select md5(format('zm-roi-bench:%s:%s:%s', seed, kind, n))::uuid $$;

-- Users, teams, projects, memberships, vocabulary and phrases. Run once on an empty substrate.
create function bench.build_population(
  seed integer, users integer default 1000, teams integer default 50, projects integer default 500,
  vocabulary integer default 4000, phrase_count integer default 50000
) returns void
  language plpgsql volatile set search_path = '' set max_parallel_workers_per_gather = 0 set jit = off
as $$
declare
  function_words text[] := array[
    'the', 'to', 'of', 'and', 'a', 'in', 'is', 'for', 'that', 'it', 'on', 'with', 'we', 'this', 'be',
    'not', 'as', 'are', 'when', 'if', 'or', 'by', 'from', 'at', 'but', 'so', 'an', 'all', 'after',
    'before', 'our', 'they', 'which', 'should', 'can', 'will', 'only', 'then', 'into'];
  work_words text[] := array[
    'deploy', 'database', 'query', 'index', 'cache', 'test', 'build', 'release', 'service', 'request',
    'token', 'user', 'migration', 'schema', 'table', 'column', 'config', 'error', 'retry', 'timeout',
    'latency', 'worker', 'queue', 'job', 'lock', 'transaction', 'commit', 'branch', 'review', 'merge',
    'staging', 'production', 'rollback', 'feature', 'flag', 'api', 'endpoint', 'client', 'server',
    'session', 'auth', 'password', 'secret', 'key', 'bucket', 'storage', 'upload', 'file', 'log',
    'metric', 'alert', 'dashboard', 'incident', 'customer', 'invoice', 'payment', 'webhook', 'event',
    'stream', 'batch', 'cron', 'schedule', 'container', 'image', 'cluster', 'node', 'memory', 'cpu',
    'disk', 'network', 'dns', 'certificate', 'proxy', 'gateway', 'load', 'balancer', 'replica',
    'backup', 'restore', 'snapshot', 'vacuum', 'partition', 'shard', 'tenant', 'role', 'policy',
    'permission', 'grant', 'view', 'function', 'trigger', 'extension', 'version', 'upgrade',
    'dependency', 'package', 'library', 'framework', 'component', 'page', 'route', 'form',
    'validation', 'email', 'notification', 'template', 'render', 'style', 'theme', 'layout', 'mobile',
    'browser', 'header', 'cookie', 'cors', 'limit', 'quota', 'pagination', 'cursor', 'offset',
    'sort', 'filter', 'search', 'ranking', 'embedding', 'model', 'prompt', 'agent', 'tool', 'context',
    'window', 'budget', 'cost', 'price', 'plan', 'tier', 'signup', 'onboarding', 'invite', 'team',
    'project', 'workspace', 'owner', 'admin', 'member', 'guest', 'audit', 'trail', 'export', 'import',
    'csv', 'json', 'parser', 'encoding', 'timezone', 'date', 'locale', 'translation', 'currency',
    'decimal', 'rounding', 'float', 'integer', 'uuid', 'sequence', 'constraint', 'foreign', 'unique',
    'null', 'default', 'nullable', 'enum', 'array', 'jsonb', 'vector', 'slow', 'fast', 'broken',
    'flaky', 'stale', 'fresh', 'duplicate', 'missing', 'wrong', 'empty', 'large', 'small', 'old',
    'new', 'first', 'last', 'always', 'never', 'usually', 'because', 'instead', 'avoid', 'prefer',
    'use', 'keep', 'drop', 'add', 'remove', 'rename', 'split', 'move', 'check', 'verify', 'run',
    'fails', 'works', 'breaks', 'returns', 'expects', 'needs', 'decided', 'agreed', 'chose'];
  syllables text[] := array[
    'ka', 'lo', 'mi', 'ne', 'ru', 'ta', 'vo', 'zi', 'ber', 'dan', 'fel', 'gor', 'hin', 'jas', 'kel',
    'lum', 'mor', 'nix', 'pal', 'quin', 'ros', 'sul', 'tem', 'ud', 'vex', 'wil', 'yar', 'zon', 'bri',
    'cla', 'dro', 'fen', 'gla', 'hum', 'ist', 'jor', 'kra', 'lin', 'mab', 'nor'];
  fixed text[];
begin
  if exists (select from bench.shape) then
    raise exception 'bench population already built';
  end if;
  perform setseed(bench.seed_for(seed, -1));
  insert into bench.shape (seed, users, teams, projects, vocabulary, phrases)
  values (seed, users, teams, projects, vocabulary, phrase_count);

  -- Vocabulary: function words, work words, then invented three-syllable words until `vocabulary`.
  fixed := function_words || work_words;
  insert into bench.vocab (rank, word)
  select r, word from (
    select row_number() over (order by src, ord) as r, word
    from (
      select distinct on (word) word, src, ord
      from (
        select 0 as src, f.ord, f.word from unnest(fixed) with ordinality as f (word, ord)
        union all
        select 1, g.i, syllables[1 + (g.i * 7) % 40] || syllables[1 + (g.i / 40 * 11) % 40]
                       || syllables[1 + (g.i / 1600 + g.i) % 40]
        from generate_series(0, vocabulary * 2) g (i)
      ) candidates
      order by word, src, ord
    ) words
  ) ranked
  where r <= vocabulary;

  -- Phrases of 4 to 12 words, each word drawn with P(rank r) ~ 1/r (Zipf, s = 1).
  insert into bench.phrases (id, phrase)
  select d.p, string_agg(v.word, ' ' order by d.w)
  from (
    select s.p, w, least(vocabulary, floor(exp(random() * ln(vocabulary + 1)))::integer) as r
    from (select p, 4 + floor(random() * 9)::integer as len from generate_series(1, phrase_count) p) s
    cross join lateral generate_series(1, s.len) w
  ) d
  join bench.vocab v on v.rank = d.r
  group by d.p;

  insert into auth.users (id, email, created_at)
  select bench.uuid_for(seed, 'user', i), format('bench-user-%s@bench.test', i),
         timestamptz '2025-01-01 00:00+00' + i * interval '1 hour'
  from generate_series(1, users) i;
  insert into bench.user_roster (n, user_id)
  select i, bench.uuid_for(seed, 'user', i) from generate_series(1, users) i;

  insert into public.teams (id, name)
  select bench.uuid_for(seed, 'team', t), format('bench-team-%s', t) from generate_series(1, teams) t;

  -- Four projects in five belong to a team; the fifth stands alone.
  insert into public.projects (id, team_id, name)
  select bench.uuid_for(seed, 'project', p),
         case when p % 5 <> 0 then bench.uuid_for(seed, 'team', 1 + p % teams) end,
         format('bench-project-%s', p)
  from generate_series(1, projects) p;

  -- Every user is in a home team, half of them in a second, a fifth in a third.
  insert into public.team_members (team_id, user_id)
  select distinct bench.uuid_for(seed, 'team', t), bench.uuid_for(seed, 'user', u)
  from (
    select u, 1 + u % teams as t from generate_series(1, users) u
    union all
    select u, 1 + floor(random() * teams)::integer from generate_series(1, users) u where random() < 0.5
    union all
    select u, 1 + floor(random() * teams)::integer from generate_series(1, users) u where random() < 0.2
  ) picks;

  -- Every project has one anchor member; every user joins 2 to 8 projects, most of them in their
  -- home team, some anywhere: memberships overlap across teams.
  insert into public.project_members (project_id, user_id)
  select distinct bench.uuid_for(seed, 'project', p), bench.uuid_for(seed, 'user', u)
  from (
    select 1 + (p * 37) % users as u, p from generate_series(1, projects) p
    union all
    select s.u,
           case when random() < 0.7
             then 1 + ((s.u % teams) + teams * floor(random() * (projects / teams))::integer) % projects
             else 1 + floor(random() * projects)::integer end
    from (select u, 2 + floor(random() * 7)::integer as k from generate_series(1, users) u) s
    cross join lateral generate_series(1, s.k) j
  ) picks;

  insert into bench.project_roster (n, project_id, team_id, members)
  select p, pr.id, pr.team_id,
         (select array_agg(pm.user_id order by pm.user_id) from public.project_members pm
          where pm.project_id = pr.id)
  from generate_series(1, projects) p
  join public.projects pr on pr.id = bench.uuid_for(seed, 'project', p);

  insert into bench.team_roster (n, team_id, members)
  select t, bench.uuid_for(seed, 'team', t),
         (select array_agg(tm.user_id order by tm.user_id) from public.team_members tm
          where tm.team_id = bench.uuid_for(seed, 'team', t))
  from generate_series(1, teams) t;
end
$$;

-- A random 384-dimension unit vector: what the hybrid recall's semantic leg costs does not depend on
-- what the vectors mean, and embedding a million memories with the real model would take hours.
-- Drawn last in each insert, after every other draw, so the rest of the corpus is unchanged by it.
create function bench.random_unit_vector() returns extensions.vector
  language sql volatile set search_path = ''
as $$
  select array_agg(r.x / r.norm order by r.i)::real[]::extensions.vector
  from (select g.i, g.x, sqrt(sum(g.x * g.x) over ()) as norm
        from (select i, random() - 0.5 as x from generate_series(1, 384) i) g) r
$$;

-- The first `count` memories of chunk `chunk` (numbers chunk * chunk_size() onwards): one chunk at
-- a time keeps every chunk's draws reproducible, whichever connection runs it. Scopes: 25% personal, 60% project, 15% team; kinds: 60% knowledge (decision 25%,
-- gotcha 20%, convention 15%), 40% episodes; projects and teams skewed so a few are large; titles of
-- 5 to 12 words, bodies of 150 to 600 characters (drawn in 160..600, cut back to a word); 5% invalidated; a year of history.
create function bench.add_memories(chunk integer, count integer default bench.chunk_size()) returns integer
  language plpgsql volatile set search_path = '' set max_parallel_workers_per_gather = 0 set jit = off
as $$
declare
  shape bench.shape;
  first bigint := chunk::bigint * bench.chunk_size();
  added integer;
begin
  select * into shape from bench.shape;
  perform setseed(bench.seed_for(shape.seed, chunk));

  create temporary table draws as
  select i, random() as u_scope, random() as u_where, random() as u_who, random() as u_kind,
         random() as u_time, random() as u_gone,
         5 + floor(random() * 8)::integer as title_words,
         160 + floor(random() * 441)::integer as body_chars
  from generate_series(first, first + least(count, bench.chunk_size()) - 1) i;

  -- Title words, Zipf-drawn.
  create temporary table titles as
  select d.i, string_agg(v.word, ' ' order by d.w) as title
  from (
    select dr.i, w, least(shape.vocabulary, floor(exp(random() * ln(shape.vocabulary + 1)))::integer) as r
    from draws dr cross join lateral generate_series(1, dr.title_words) w
  ) d
  join bench.vocab v on v.rank = d.r
  group by d.i;

  -- Bodies: enough random phrases to pass the drawn length, cut back to a word boundary.
  create temporary table bodies as
  select d.i, string_agg(ph.phrase, '. ' order by d.k) as body
  from (
    select dr.i, k, 1 + floor(random() * shape.phrases)::integer as phrase_id
    from draws dr cross join lateral generate_series(1, dr.body_chars / 40 + 2) k
  ) d
  join bench.phrases ph on ph.id = d.phrase_id
  group by d.i;

  insert into public.memories (id, author_id, scope, project_id, team_id, kind, title, body,
                               created_at, invalidated_at, embedding, embedding_model)
  select bench.uuid_for(shape.seed, 'memory', d.i),
         case x.scope
           when 'personal' then (select u.user_id from bench.user_roster u
                                 where u.n = 1 + floor(shape.users * d.u_who)::integer)
           when 'project' then pr.members[1 + floor(d.u_who * cardinality(pr.members))::integer]
           else tr.members[1 + floor(d.u_who * cardinality(tr.members))::integer]
         end,
         x.scope,
         case when x.scope = 'project' then pr.project_id end,
         case when x.scope = 'team' then tr.team_id end,
         case when d.u_kind < 0.25 then 'decision' when d.u_kind < 0.45 then 'gotcha'
              when d.u_kind < 0.60 then 'convention' else 'episode' end,
         upper(left(t.title, 1)) || substr(t.title, 2),
         upper(left(b.body, 1)) || substr(regexp_replace(left(b.body, d.body_chars), '\s+\S*$', ''), 2) || '.',
         timestamptz '2026-11-01 00:00+00' - d.u_time * interval '365 days',
         case when d.u_gone < 0.05
           then timestamptz '2026-11-01 00:00+00' - d.u_time * interval '365 days' + interval '7 days' end,
         bench.random_unit_vector(), 'bench-random-unit'
  from draws d
  cross join lateral (
    select case when d.u_scope < 0.25 then 'personal' when d.u_scope < 0.85 then 'project'
                else 'team' end as scope
  ) x
  join titles t on t.i = d.i
  join bodies b on b.i = d.i
  left join bench.project_roster pr on x.scope = 'project'
    and pr.n = 1 + floor(shape.projects * power(d.u_where, 1.5))::integer
  left join bench.team_roster tr on x.scope = 'team'
    and tr.n = 1 + floor(shape.teams * power(d.u_where, 1.5))::integer;
  get diagnostics added = row_count;
  -- The load skips the triggers (session_replication_role = replica), so the chunk's postings are
  -- written here, as roi.post_new_memories writes them (unless the database predates postings: a
  -- side-by-side base of `make bench BASE=…`; plpgsql plans the insert only when it runs).
  if exists (select from pg_attribute where attrelid = to_regclass('public.memory_postings')
             and attname = 'layer_kind' and not attisdropped) then
    insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
    select m.id, coalesce(m.project_id, m.team_id, m.author_id),
           ts_rank('{0.1, 0.2, 0.4, 0.4}'::real[], m.search,
                   ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
           (case m.scope when 'personal' then 'u' when 'project' then 'p' else 't' end)::"char", l.lexeme
    from draws d
    join public.memories m on m.id = bench.uuid_for(shape.seed, 'memory', d.i)
    cross join lateral unnest(m.search) l
    where m.invalidated_at is null;
  elsif to_regclass('public.memory_postings') is not null then
    -- A base that predates the slim postings (its author and scope columns).
    insert into public.memory_postings (memory_id, lexeme, impact, scope, layer_id, author_id)
    select m.id, l.lexeme,
           ts_rank('{0.1, 0.2, 0.4, 0.4}'::real[], m.search,
                   ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery, 1),
           m.scope, coalesce(m.project_id, m.team_id, m.author_id), m.author_id
    from draws d
    join public.memories m on m.id = bench.uuid_for(shape.seed, 'memory', d.i)
    cross join lateral unnest(m.search) l
    where m.invalidated_at is null;
  end if;
  drop table draws, titles, bodies;
  return added;
end
$$;
