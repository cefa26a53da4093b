-- The bench's queries, by name (sql.py beside this file reads them with bench_query). What they
-- measure and why: bench/README.md. The corpus generator itself is corpus.sql, also beside this file.

-- name: deactivate_cron
update cron.job set active = false;

-- What else the server did while it was measured: reads that missed shared buffers (and the time they
-- took: the bench turns on track_io_timing), checkpoints, and autovacuum's runs and busy workers.
-- name: server_counters
select d.blks_read, d.blks_hit, round(d.blk_read_time)::bigint as blk_read_ms,
       b.checkpoints_timed + b.checkpoints_req as checkpoints,
       (select coalesce(sum(t.autovacuum_count + t.autoanalyze_count), 0)::bigint
        from pg_stat_all_tables t) as autovacuum_runs,
       (select count(*) from pg_stat_activity a where a.backend_type = 'autovacuum worker') as autovacuum_workers
from pg_stat_database d, pg_stat_bgwriter b
where d.datname = current_database();

-- name: reported_settings
select name, current_setting(name) from pg_settings where name = any (%(names)s) order by name;

-- to_regclass: a side-by-side base (`make bench BASE=…`) may predate the postings table.
-- name: memories_secondary_indexes
select indexrelid::regclass::text as name, pg_get_indexdef(indexrelid) as definition
from pg_index where indrelid in ('public.memories'::regclass, to_regclass('public.memory_postings')) and not indisprimary
order by 1;

-- name: build_population
select bench.build_population(%(seed)s);

-- `make bench OWNERS=n`: n users, with teams and projects in the default proportions (1 team per
-- 20 users, 1 project per 2), so memberships per user stay as in the default corpus.
-- name: build_population_for_owners
select bench.build_population(%(seed)s, users => %(owners)s, teams => greatest(%(owners)s / 20, 1),
                              projects => greatest(%(owners)s / 2, 1));

-- name: add_memories
select bench.add_memories(%(chunk)s, %(count)s);

-- Mark every owner with a pool dirty, as a write that touched everyone would (the bulk load skips
-- the triggers, and the refill cycles below empty every pool by hand).
-- name: mark_every_pool_dirty
insert into roi.dirty_layers (layer, layer_id, can_retire)
select distinct 'personal', p.owner_id, true from roi.probes p
on conflict do nothing;

-- name: corpus_shape
select
  (select count(*) from public.memories) as memories,
  (select count(*) from auth.users) as users,
  (select count(*) from public.teams) as teams,
  (select count(*) from public.projects) as projects,
  (select count(*) from public.team_members) as team_memberships,
  (select count(*) from public.project_members) as project_memberships,
  (select round(avg(n), 1) from (select count(*) n from public.project_members group by user_id) x)
    as projects_per_user,
  (select round(avg(n), 1) from (select count(*) n from public.team_members group by user_id) x)
    as teams_per_user,
  (select round(avg(n), 1) from (select count(*) n from public.project_members group by project_id) x)
    as members_per_project,
  (select jsonb_object_agg(scope, n) from (select scope, count(*) n from public.memories group by 1) x)
    as by_scope,
  (select jsonb_object_agg(kind, n) from (select kind, count(*) n from public.memories group by 1) x)
    as by_kind,
  (select count(*) from public.memories where invalidated_at is not null) as invalidated,
  (select round(avg(array_length(regexp_split_to_array(title, '\s+'), 1)), 1) from public.memories)
    as title_words_avg,
  (select jsonb_build_object('min', min(length(body)), 'avg', round(avg(length(body))), 'max', max(length(body)))
   from public.memories) as body_chars,
  (select jsonb_build_object(
     'p50', percentile_disc(0.5) within group (order by n),
     'p95', percentile_disc(0.95) within group (order by n), 'max', max(n))
   from (select count(*) n from public.memories where scope = 'project' group by project_id) x)
    as memories_per_project,
  (select jsonb_build_object(
     'p50', percentile_disc(0.5) within group (order by n), 'max', max(n))
   from (select count(*) n from public.memories where scope = 'team' group by team_id) x)
    as memories_per_team,
  (select jsonb_build_object(
     'p50', percentile_disc(0.5) within group (order by n), 'max', max(n))
   from (select count(*) n from public.memories where scope = 'personal' group by author_id) x)
    as personal_memories_per_user,
  (select count(*) from bench.vocab) as vocabulary,
  pg_size_pretty(pg_table_size('public.memories')) as table_size,
  pg_size_pretty(pg_indexes_size('public.memories')) as indexes_size;

-- ============================================================================================
-- Samples: who asks what, pinned how. Questions are the benchmark's own (roi.template_question),
-- about live knowledge, asked by someone who can see it; drawn reproducibly from the seed.
-- ============================================================================================

-- name: recall_samples_project
select m.id as memory_id, pm.user_id, m.project_id, null::uuid as team_id, false as personal_only,
       roi.template_question(m.kind, m.title, m.body) as question,
       (select count(*) from public.memories x
        where x.scope = 'project' and x.invalidated_at is null and x.project_id = m.project_id) as layer_rows
from (
  select * from public.memories m
  where m.scope = 'project' and m.invalidated_at is null and m.kind <> 'episode'
  order by md5(m.id::text || %(seed)s::text) limit %(n)s
) m
cross join lateral (
  select pm.user_id from public.project_members pm where pm.project_id = m.project_id
  order by md5(pm.user_id::text || m.id::text) limit 1
) pm;

-- name: recall_samples_team
select m.id as memory_id, tm.user_id, null::uuid as project_id, m.team_id, false as personal_only,
       roi.template_question(m.kind, m.title, m.body) as question,
       (select count(*) from public.memories x
        where x.scope = 'team' and x.invalidated_at is null and x.team_id = m.team_id) as layer_rows
from (
  select * from public.memories m
  where m.scope = 'team' and m.invalidated_at is null and m.kind <> 'episode'
  order by md5(m.id::text || %(seed)s::text) limit %(n)s
) m
cross join lateral (
  select tm.user_id from public.team_members tm where tm.team_id = m.team_id
  order by md5(tm.user_id::text || m.id::text) limit 1
) tm;

-- name: recall_samples_personal
select m.id as memory_id, m.author_id as user_id, null::uuid as project_id, null::uuid as team_id,
       true as personal_only, roi.template_question(m.kind, m.title, m.body) as question,
       (select count(*) from public.memories x
        where x.scope = 'personal' and x.invalidated_at is null and x.author_id = m.author_id) as layer_rows
from public.memories m
where m.scope = 'personal' and m.invalidated_at is null and m.kind <> 'episode'
order by md5(m.id::text || %(seed)s::text) limit %(n)s;

-- name: recall
select memory_id, kind, scope, title, body, score
from public.recall(%(question)s, %(project_id)s, %(team_id)s, 10, %(personal_only)s);

-- name: round_trip
select 1;

-- name: bench_owners
select u.user_id from bench.user_roster u order by md5(u.user_id::text || %(seed)s::text) limit %(n)s;

-- name: all_owners
select u.user_id from bench.user_roster u order by u.n;

-- name: benchmark_memory
select public.benchmark_memory();

-- What the owner's next run will recall (read as the bench's superuser, outside any run).
-- name: active_probes
select p.id, p.memory_id, p.question, p.pin_project_id as project_id, p.pin_team_id as team_id,
       p.source_scope = 'personal' as personal_only
from roi.probes p where p.owner_id = %(owner)s and p.state = 'active'
order by p.id;

-- ============================================================================================
-- Upkeep
-- ============================================================================================

-- name: upkeep
select roi.upkeep();

-- name: upkeep_owner
select roi.upkeep_owner(%(owner)s);

-- Empty every pool (as rotation would, all at once) so the next cycle must refill them; then mark
-- every owner dirty, which is what makes upkeep visit every owner with a pool.
-- name: retire_all_probes
update roi.probes set state = 'retired', retired_reason = 'rotated', retired_at = now()
where state in ('pending', 'active');

-- Retire the `k` longest-serving active probes of every owner, as one rotation per owner would.
-- name: retire_some_probes
with ranked as (
  select p.id, row_number() over (partition by p.owner_id order by p.activated_at, p.id) as r
  from roi.probes p where p.state = 'active'
)
update roi.probes p set state = 'retired', retired_reason = 'rotated', retired_at = now()
from ranked where ranked.id = p.id and ranked.r <= %(k)s;

-- Projects to write into, one per write, each with a member to write as, the number of its members
-- with a pool that is not full (the owners a cycle after an addition should visit) and with a pool
-- at all (after an invalidation).
-- name: write_targets
select r.project_id, r.members[1] as author,
       (select count(*) from unnest(r.members) m (u)
        where exists (select from roi.probes p where p.owner_id = m.u)
          and (select count(*) from roi.probes p where p.owner_id = m.u and p.state in ('pending', 'active'))
              < (select s.pool_target from roi.settings s)) as open_pool_owners,
       (select count(*) from unnest(r.members) m (u) where exists (select from roi.probes p where p.owner_id = m.u))
         as pool_owners
from bench.project_roster r
where cardinality(r.members) > 0
order by r.n
limit %(n)s;

-- One project memory, written as its author (the caller switched to them first).
-- name: write_project_memory
insert into public.memories (author_id, scope, project_id, kind, title, body)
values (%(author)s, 'project', %(project_id)s, 'decision', %(title)s,
        'A decision written while the bench measures upkeep, so the next cycle has something to do.');

-- An invalidation, written as the author of the project's newest live memory of theirs (the caller
-- switched to them first): it can retire probes, so every member with a pool is visited.
-- name: invalidate_project_memory
update public.memories set invalidated_at = now()
where id = (select m.id from public.memories m
            where m.project_id = %(project_id)s and m.author_id = %(author)s and m.invalidated_at is null
            order by m.created_at desc limit 1);

-- The distinct owners with a pool that is not full among the members of these projects.
-- name: pool_owners_of_projects
select count(distinct pm.user_id) from public.project_members pm
where pm.project_id = any (%(projects)s) and exists (select from roi.probes p where p.owner_id = pm.user_id)
  and (select count(*) from roi.probes p where p.owner_id = pm.user_id and p.state in ('pending', 'active'))
      < (select s.pool_target from roi.settings s);

-- The distinct owners with a pool, full or not, among the members of these projects.
-- name: pool_owners_of_projects_any
select count(distinct pm.user_id) from public.project_members pm
where pm.project_id = any (%(projects)s) and exists (select from roi.probes p where p.owner_id = pm.user_id);

-- name: pool_summary
select count(distinct owner_id) as owners, count(*) filter (where state = 'active') as active,
       count(*) filter (where state = 'pending') as pending
from roi.probes;

-- ============================================================================================
-- Worker (issue 4): present once the verbs exist.
-- ============================================================================================

-- ============================================================================================
-- EXPLAIN of what recall() runs inside: auto_explain logs nested statements to this client.
-- ============================================================================================

-- name: auto_explain_on
load 'auto_explain';
set auto_explain.log_min_duration = 0;
set auto_explain.log_nested_statements = on;
set auto_explain.log_analyze = on;
set auto_explain.log_buffers = on;
set auto_explain.log_timing = on;
set auto_explain.log_level = notice;
set client_min_messages = notice;

-- ============================================================================================
-- The worker's queue: runs of 20 judgments queued for many owners at once, as start_run() leaves
-- them in LLM mode (the probes are synthetic: the worker never reads memories anyway).
-- ============================================================================================

-- name: seed_judgments
with owners as (
  select u.id from auth.users u order by u.id limit %(runs)s
), new_runs as (
  insert into roi.runs (owner_id, mode, probe_count)
  select o.id, 'llm', %(per_run)s from owners o
  returning id, owner_id
), pending as (
  insert into roi.pending_runs (run_id, owner_id, started_at)
  select r.id, r.owner_id, now() from new_runs r
), new_probes as (
  insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body,
                          question, state, activated_at, question_embedding, question_embedding_model)
  select r.owner_id, gen_random_uuid(), 'decision', 'personal', 'Bench decision ' || g,
         'The body of bench decision ' || g || ': we chose the second option for its lower cost.',
         'Which option did bench decision ' || g || ' choose?', 'active', now(),
         -- embedded already, as the worker leaves the questions it writes: judgments only in the queue
         array_fill(0.05::real, array[384])::extensions.vector, 'bench'
  from new_runs r, generate_series(1, %(per_run)s) g
  returning id, owner_id
), snapshots as (
  insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
  select r.id, p.id, p.owner_id, '{}', '[]' from new_probes p join new_runs r on r.owner_id = p.owner_id
)
select roi.enqueue('judge', r.owner_id, array_agg(p.id), r.id)
from new_probes p join new_runs r on r.owner_id = p.owner_id
group by r.id, r.owner_id;

-- name: queued_judgments
select count(*) from roi.work where kind = 'judge';

-- The judgments a drain's `--once` workers left, by the error of their last attempt (queue.drain).
-- name: judgments_waiting
select coalesce(last_error, '(no attempt failed)'), count(*)::integer from roi.work where kind = 'judge'
group by 1 order by 2 desc;

-- name: drain_span_ms
select extract(epoch from max(v.recorded_at) - min(v.recorded_at)) * 1000, count(*)
from roi.verdicts v where v.judged_by = 'llm' and v.recorded_at >= %(since)s;

-- ============================================================================================
-- Model latency with one worker process (issue 13): a 1-second model, 20 questions, 20 judgments.
-- ============================================================================================

-- name: latency_owner
-- A new owner each time, so that one cluster can take several measurements (worker_peak.py).
insert into auth.users (email) values ('latency-owner-' || gen_random_uuid() || '@bench.test') returning id;

-- name: latency_memories
insert into public.memories (author_id, scope, kind, title, body)
select %(owner)s, 'personal', (array['decision', 'gotcha', 'convention'])[1 + i %% 3],
       format('Latency fact %%s for the cache of service %%s', i, i),
       format('Entries for service %%s expire after %%s minutes since incident %%s.', i, i + 5, i * 7)
from generate_series(1, %(count)s) i;

-- name: get_extractor
select extractor from roi.settings;

-- name: set_extractor
update roi.settings set extractor = %(extractor)s;

-- name: set_judge_checks
-- Returns the settings it replaced, for the bench to put back.
update roi.settings s set withheld_source_checks = %(withheld)s, order_checks = %(order)s
from (select withheld_source_checks, order_checks from roi.settings) before
returning before.withheld_source_checks, before.order_checks;

-- name: active_probes_of
select count(*) from roi.probes where owner_id = %(owner)s and state = 'active';

-- name: run_closed
select exists (select from roi.run_closures where run_id = %(run_id)s);

-- Worker lanes that are connected and idle after looking for work: the worker is ready.
-- name: idle_worker_lanes
select count(*) from pg_stat_activity
where usename = 'roi_worker' and state = 'idle' and query like '%%claim_work%%';
-- The bundled hybrid recall, same sample, with a query vector (random unit, as the corpus's).
-- name: recall_hybrid
select memory_id, kind, scope, title, body, score
from public.recall(%(question)s, %(project_id)s, %(team_id)s, 10, %(personal_only)s, %(embedding)s::extensions.vector);


-- Recall quality (recall_quality.py), run as the evaluation user.

-- name: quality_memory_ids
select m.id, p.name as project, m.title, m.body
from public.memories m join public.projects p on p.id = m.project_id
where m.author_id = %(user_id)s;

-- name: quality_lexical_leg
select memory_id, score from public.recall_lexical(%(question)s, %(project_id)s, null, %(count)s);

-- The lexical leg as main ranked it before the title was weighted like the body (ts_rank's default
-- weights: title 1.0, body 0.4), over the same pinned layer, for the side-by-side rows of the report.
-- name: quality_lexical_leg_title_weighted
select m.id, ts_rank(m.search, public.recall_query(%(question)s), 1) as score
from public.memories m
where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null
  and m.search @@ public.recall_query(%(question)s)
order by score desc, m.created_at desc, m.id
limit %(count)s;

-- The semantic leg alone, as the hybrid recall computes it: exact distances over the pinned layer.
-- name: quality_semantic_leg
select m.id, 1 - (m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector) as similarity
from public.memories m
where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null and m.embedding is not null
order by m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector, m.created_at desc, m.id
limit %(count)s;

-- The third leg alone (MiniLM), the same way.
-- name: quality_minilm_leg
select m.id, 1 - (m.embedding_minilm operator(extensions.<=>) %(embedding_minilm)s::extensions.vector) as similarity
from public.memories m
where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null
  and m.embedding_minilm is not null
order by m.embedding_minilm operator(extensions.<=>) %(embedding_minilm)s::extensions.vector, m.created_at desc, m.id
limit %(count)s;

-- The same legs binary-quantised (--bit-candidates, decision 0021): the N best by the Hamming distance of
-- the sign bits (routes_bq_columns, or quality_bq_columns_centred: the signs after the corpus's mean
-- vector is subtracted, the question's too), re-ranked by exact distance. Written for e5's column; the
-- MiniLM leg is the same text with `embedding` read as `embedding_minilm` (recall_quality.leg_sql).
-- name: quality_bq_columns_centred
select format('alter table public.memories '
              'add column embedding_bq bit(384) generated always as (extensions.binary_quantize('
              'embedding operator(extensions.-) %%L::extensions.vector)::bit(384)) stored, '
              'add column embedding_minilm_bq bit(384) generated always as (extensions.binary_quantize('
              'embedding_minilm operator(extensions.-) %%L::extensions.vector)::bit(384)) stored',
              e5, minilm), e5, minilm
from (select avg(embedding)::text as e5, avg(embedding_minilm)::text as minilm from public.memories) means;

-- name: quality_semantic_leg_bit
with candidates as (
  select m.id from public.memories m
  where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null and m.embedding is not null
  order by m.embedding_bq operator(extensions.<~>)
           extensions.binary_quantize(%(embedding)s::extensions.vector operator(extensions.-) %(embedding_mean)s::extensions.vector)::bit(384)
  limit %(candidates)s
)
select m.id, 1 - (m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector) as similarity
from public.memories m join candidates c on c.id = m.id
order by m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector, m.created_at desc, m.id
limit %(count)s;

-- The bundled recall as a configured one with today's six arguments calls it: two legs.
-- name: quality_hybrid
select memory_id from public.recall(%(question)s, %(project_id)s, null, 10, false, %(embedding)s::extensions.vector);

-- The bundled recall with both query embeddings: three legs.
-- name: quality_three_legs
select memory_id from public.recall(%(question)s, %(project_id)s, null, 10, false, %(embedding)s::extensions.vector,
                                    %(embedding_minilm)s::extensions.vector);

-- name: quality_templates
select m.id, p.name as project, roi.template_question(m.kind, m.title, m.body) as question
from public.memories m join public.projects p on p.id = m.project_id
where m.author_id = %(user_id)s order by m.id;

-- Pinned recall against the layer's size, on real text (layers.py).

-- name: layers_project_id
select id from public.projects where name = %(name)s;

-- name: layers_user_id
select id from auth.users where email = %(email)s;

-- name: layers_copy
copy public.memories (author_id, project_id, kind, title, body, embedding, embedding_model, embedding_minilm,
                      embedding_minilm_model, scope)
from stdin;

-- name: layers_template_question
select roi.template_question(%(kind)s, %(title)s, %(body)s);

-- Who the layer curve's recalls run as: the member's role and identity, so RLS applies.
-- name: layers_caller
select current_user || ' ' || coalesce(auth.uid()::text, 'no identity');

-- The large layers' HNSW indexes still to build, as the ten-minute decision finds them.
-- name: layers_index_statements
select index_name, statement from roi.layer_vector_indexes() where statement is not null order by index_name;

-- name: layers_titles
select id, title from public.memories where project_id = %(project_id)s;

-- name: layers_lexical
select memory_id from public.recall_lexical(%(question)s, %(project_id)s, null, 10);

-- The shipped hybrid: all three legs, each question with both of its query embeddings.
-- name: layers_hybrid
select memory_id from public.recall(%(question)s, %(project_id)s, null, 10, false, %(embedding)s::extensions.vector,
                                    %(embedding_minilm)s::extensions.vector);

-- Today's lexical leg beside the new one (issue 22, item 8): before the postings, recall ranked every
-- match of the pinned project from its covering indexes (20261201060000_recall_index_only, dropped by
-- 20261201190000_recall_reads_impact_ordered_postings). The bench cluster gets them back to run it.
-- name: layers_before_indexes
create index memories_project_search_idx on public.memories (project_id)
  include (scope, team_id, author_id, created_at, id, search)
  where invalidated_at is null and scope = 'project'
    and octet_length(search::text) + 4 * length(search) <= 2400;
create index memories_project_oversized_idx on public.memories (project_id)
  where invalidated_at is null and scope = 'project'
    and octet_length(search::text) + 4 * length(search) > 2400;

-- name: layers_lexical_before
with best as (
  select c.id, c.created_at, c.score
  from (
    select m.id, m.created_at, ts_rank('{0.1, 0.2, 0.4, 0.4}', m.search, public.recall_query(%(question)s), 1) as score
    from public.memories m
    where m.scope = 'project' and m.invalidated_at is null and m.project_id = %(project_id)s
      and octet_length(m.search::text) + 4 * length(m.search) <= 2400
      and m.search @@ public.recall_query(%(question)s)
    union all
    select m.id, m.created_at, ts_rank('{0.1, 0.2, 0.4, 0.4}', m.search, public.recall_query(%(question)s), 1)
    from public.memories m
    where m.scope = 'project' and m.invalidated_at is null and m.project_id = %(project_id)s
      and octet_length(m.search::text) + 4 * length(m.search) > 2400
      and m.search @@ public.recall_query(%(question)s)
  ) c
  order by c.score desc, c.created_at desc, c.id
  limit 10
)
select m.id, m.kind, m.scope, m.title, m.body, b.score
from public.memories m join best b on b.id = m.id
where m.id = any (array(select best.id from best))
order by b.score desc, b.created_at desc, b.id;

-- Today's two-leg hybrid (lexical and e5, before the postings and the MiniLM leg), as a plain statement.
-- name: layers_hybrid_before
with lexical as (
  select c.id, c.created_at, row_number() over (order by c.score desc, c.created_at desc, c.id) as rank
  from (
    select m.id, m.created_at, ts_rank('{0.1, 0.2, 0.4, 0.4}', m.search, public.recall_query(%(question)s), 1) as score
    from public.memories m
    where m.scope = 'project' and m.invalidated_at is null and m.project_id = %(project_id)s
      and octet_length(m.search::text) + 4 * length(m.search) <= 2400
      and m.search @@ public.recall_query(%(question)s)
    union all
    select m.id, m.created_at, ts_rank('{0.1, 0.2, 0.4, 0.4}', m.search, public.recall_query(%(question)s), 1)
    from public.memories m
    where m.scope = 'project' and m.invalidated_at is null and m.project_id = %(project_id)s
      and octet_length(m.search::text) + 4 * length(m.search) > 2400
      and m.search @@ public.recall_query(%(question)s)
    order by 3 desc, 2 desc, 1
    limit 20
  ) c
), semantic as (
  select c.id, c.created_at, row_number() over (order by c.distance, c.created_at desc, c.id) as rank
  from (
    select m.id, m.created_at, m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector as distance
    from public.memories m
    where m.scope = 'project' and m.invalidated_at is null and m.project_id = %(project_id)s
      and m.embedding is not null
    order by 3, 2 desc, 1
    limit 20
  ) c
), best as (
  select coalesce(x.id, s.id) as id, coalesce(x.created_at, s.created_at) as created_at,
         (coalesce(1.0 / (50 + x.rank), 0) + coalesce(1.5 / (50 + s.rank), 0))::real as score
  from lexical x full join semantic s on s.id = x.id
  order by 3 desc, 2 desc, 1
  limit 10
)
select m.id from public.memories m join best b on b.id = m.id
where m.id = any (array(select best.id from best))
order by b.score desc, b.created_at desc, b.id;

-- Which model filled each embedding column of the layers, and how many rows: the layers carry both legs.
-- name: layers_embedded
select 'embedding' as leg, embedding_model as model, count(*) from public.memories
where embedding is not null group by embedding_model
union all
select 'embedding_minilm', embedding_minilm_model, count(*) from public.memories
where embedding_minilm is not null group by embedding_minilm_model;

-- Pages per recall on the import's write path (pages.py, decision 0019): the hybrid and lexical recalls
-- as the member, their shared buffers read from the plan's top node, which counts every nested statement.
-- name: pages_hybrid
select * from public.recall(%(question)s, %(project_id)s, null, 10, false,
                            %(embedding)s::extensions.vector, %(embedding_minilm)s::extensions.vector);

-- name: pages_hybrid_buffers
explain (analyze, buffers, format json)
select * from public.recall(%(question)s, %(project_id)s, null, 10, false,
                            %(embedding)s::extensions.vector, %(embedding_minilm)s::extensions.vector);

-- name: pages_lexical_buffers
explain (analyze, buffers, format json)
select * from public.recall_lexical(%(question)s, %(project_id)s, null, 10, false);

-- name: pages_storage
select attname, attstorage from pg_attribute
where attrelid = 'public.memories'::regclass and attname in ('embedding', 'embedding_minilm', 'search', 'body', 'title');

-- The layout a run measures, set before the rows are written: the statement for a column's storage,
-- and for the table's toast_tuple_target.
-- name: pages_set_storage
select format('alter table public.memories alter column %%I set storage %%s', %(column)s::text, s)
from unnest(array['plain', 'main', 'external', 'extended']) s where s = %(storage)s;

-- name: pages_set_toast_target
select format('alter table public.memories set (toast_tuple_target = %%s)', %(target)s::integer);

-- Autovacuum held off while the layers are written and measured right after the import.
-- name: pages_autovacuum_off
alter table public.memories set (autovacuum_enabled = off);
alter table public.memory_postings set (autovacuum_enabled = off);

-- name: pages_autovacuum_reset
alter table public.memories reset (autovacuum_enabled);
alter table public.memory_postings reset (autovacuum_enabled);

-- The two moments: right after the import (statistics only), and once vacuum has set the visibility maps.
-- name: pages_analyze
analyze;

-- name: pages_vacuum_analyze
vacuum analyze;

-- From the import's end to fast recall (pages.py --to-fast-recall): pg_cron's ten-minute index decision
-- switched back on, the large layers' indexes' states, and what autovacuum has left to do on the two tables
-- (the statistics lag a write by up to a second).
-- name: pages_activate_index_decision
update cron.job set active = true where jobname = 'zm-roi-layer-indexes';

-- name: pages_index_states
select index_name, state from roi.layer_vector_indexes();

-- The index builds' jobs are unscheduled once done; their runs stay in job_run_details under the job id.
-- The build job's last statement may rebuild the postings' impact index (docs/decisions/0036).
-- name: pages_index_build_runs
select coalesce(substring(d.command from 'hnsw_[0-9a-f]+_[a-z_]+'), substring(d.command from 'memory_postings_impact_idx')),
       d.start_time, d.end_time, d.status, d.return_message
from cron.job_run_details d
where d.command like 'create index concurrently%%' or d.command like 'drop index%%' or d.command like 'reindex%%'
order by d.start_time;

-- Whether the build job still has a statement to run (it is unscheduled once nothing is left).
-- name: pages_build_job_scheduled
select exists (select from cron.job where jobname = 'zm-roi-layer-index-build');

-- name: pages_vacuum_stats
select relname, autovacuum_count, n_dead_tup, n_ins_since_vacuum from pg_stat_user_tables
where relid in ('public.memories'::regclass, 'public.memory_postings'::regclass);

-- name: pages_project_rows
select id, title, body from public.memories where project_id = %(project_id)s order by id;

-- name: pages_load_auto_explain
load 'auto_explain';

-- name: pages_setting
select set_config(%(name)s, %(value)s, false);

-- Bytes per memory split by structure (footprint.py): the memories' heap (with its free space and
-- visibility maps), their TOAST table with its index, each index on the memories by name (the covering
-- vector indexes and any layer's HNSW index among them), the postings' heap and each of its indexes.
-- The parts add up to pg_total_relation_size of the two tables.
-- name: storage_split
select part, relation, bytes from (
  select 1 as o, 'memories heap' as part, 'public.memories' as relation,
         pg_table_size(c.oid) - coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) as bytes
  from pg_class c where c.oid = 'public.memories'::regclass
  union all
  select 2, 'memories TOAST', coalesce(nullif(c.reltoastrelid, 0)::regclass::text, 'none'),
         coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)
  from pg_class c where c.oid = 'public.memories'::regclass
  union all
  select 3, 'memories index', i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)
  from pg_index i where i.indrelid = 'public.memories'::regclass
  union all
  select 4, 'postings heap', 'public.memory_postings', pg_table_size('public.memory_postings')
  union all
  select 5, 'postings index', i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)
  from pg_index i where i.indrelid = 'public.memory_postings'::regclass
) s
order by o, bytes desc, relation;

-- name: storage_counts
select (select count(*) from public.memories) as memories,
       (select count(*) from public.memory_postings) as postings;

-- Routes to fewer bytes per memory (routes.py, decision 0021), tried in the bench's scratch database only.
-- name: routes_column_bytes
select avg(pg_column_size(title))::int as title, avg(pg_column_size(body))::int as body,
       avg(pg_column_size(search))::int as search, avg(pg_column_size(embedding))::int as embedding,
       avg(pg_column_size(embedding_minilm))::int as embedding_minilm, avg(pg_column_size(m.*))::int as row
from public.memories m;

-- name: routes_vacuum_full_memories
vacuum full public.memories;

-- name: routes_vacuum_full_postings
vacuum full public.memory_postings;

-- After a rewrite: `vacuum full` leaves the visibility map unset, and without it every index-only scan
-- fetches the heap; a plain vacuum sets it.
-- name: routes_analyze
vacuum analyze public.memories, public.memory_postings;

-- name: routes_storage
select attname, attstorage from pg_attribute
where attrelid = 'public.memories'::regclass and attname like 'embedding%%' and atttypid <> 'text'::regtype;

-- The covering vector indexes (20_recall.sql) by name and definition.
-- name: routes_covering_indexes
select i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
from pg_index i
where i.indrelid = 'public.memories'::regclass and pg_get_indexdef(i.indexrelid) ~ 'INCLUDE \(.*embedding';

-- Binary quantisation: each vector's sign bits as a stored column beside it (the b-tree INCLUDE list
-- takes columns, not expressions).
-- name: routes_bq_columns
alter table public.memories
  add column embedding_bq bit(384)
    generated always as (extensions.binary_quantize(embedding)::bit(384)) stored,
  add column embedding_minilm_bq bit(384)
    generated always as (extensions.binary_quantize(embedding_minilm)::bit(384)) stored,
  alter column embedding_bq set storage plain,
  alter column embedding_minilm_bq set storage plain;

-- name: routes_drop_bq_columns
alter table public.memories drop column embedding_bq, drop column embedding_minilm_bq;

-- One layer's HNSW index as pg_cron would build it (22_recall_layer_indexes.sql: m 32, ef_construction
-- 200, halfvec's operator class), for its size in a layer too small to get one.
-- name: routes_hnsw_statement
select format('create index routes_hnsw on public.memories using hnsw (embedding extensions.halfvec_cosine_ops) '
              'with (m = 32, ef_construction = 200) where project_id = %%L and scope = ''project'' '
              'and invalidated_at is null and embedding is not null', %(project_id)s::text);

-- name: routes_hnsw_bytes
select pg_relation_size('public.routes_hnsw');

-- name: routes_drop_hnsw
drop index public.routes_hnsw;

-- One semantic leg as the recall ranks it (exact distances over the pinned layer's covering index, its
-- best 20), as the superuser: the pages one leg reads.
-- name: routes_exact_leg_buffers
explain (analyze, buffers, format json)
select m.id from public.memories m
where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null and m.embedding is not null
order by m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector, m.created_at desc, m.id
limit 20;

-- The same leg over the bit covering index: the best 80 by Hamming distance, re-ranked by their exact
-- vectors read from the heap (the primary key finds each row).
-- name: routes_bq_leg_buffers
explain (analyze, buffers, format json)
with candidates as (
  select m.id from public.memories m
  where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null
    and m.embedding is not null
  order by m.embedding_bq operator(extensions.<~>) extensions.binary_quantize(%(embedding)s::extensions.vector)::bit(384)
  limit 80
)
select m.id from public.memories m join candidates c on c.id = m.id
order by m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector, m.created_at desc, m.id
limit 20;

-- name: routes_seqscan
select set_config('enable_seqscan', %(setting)s, false);

-- Compact postings layouts, built beside the real one from its rows for their sizes only (no trigger,
-- no policy reads them): the lexemes as integer ids into a lexicon, and then also no primary key.
-- name: routes_postings_lexicon
create schema routes_scratch;
create table routes_scratch.lexicon (id integer generated always as identity primary key, lexeme text unique not null);
insert into routes_scratch.lexicon (lexeme) select distinct lexeme from public.memory_postings order by 1;
create table routes_scratch.postings (
  memory_id uuid not null, layer_id uuid not null, lexeme_id integer not null, impact real not null,
  layer_kind "char" not null
);
insert into routes_scratch.postings
select p.memory_id, p.layer_id, l.id, p.impact, p.layer_kind
from public.memory_postings p join routes_scratch.lexicon l using (lexeme);
create index postings_impact_idx on routes_scratch.postings (layer_id, lexeme_id, impact desc) include (layer_kind, memory_id);

-- name: routes_postings_lexicon_pkey
alter table routes_scratch.postings add primary key (memory_id, lexeme_id);

-- name: routes_postings_copy
create table routes_scratch.postings_copy as select * from public.memory_postings;
create index postings_copy_impact_idx on routes_scratch.postings_copy (layer_id, lexeme, impact desc) include (layer_kind, memory_id);
create index postings_copy_memory_idx on routes_scratch.postings_copy (memory_id);

-- name: routes_scratch_sizes
select c.relname, pg_table_size(c.oid) as heap, pg_indexes_size(c.oid) as indexes
from pg_class c where c.relnamespace = 'routes_scratch'::regnamespace and c.relkind = 'r';

-- Every statement pg_stat_statements tracked, nested ones included, longest first (statements.py).
-- name: statements_by_time
select s.query, s.calls, s.rows, s.total_exec_time as total_ms
from extensions.pg_stat_statements s
where s.calls > 0
order by s.total_exec_time desc
limit 60;

-- The anchor (anchor.py, anchor.sql): Supabase's documented hybrid_search, as the member, with the e5
-- query embedding and the page's match_count of 10.
-- name: layers_anchor
select id from anchor.hybrid_search(%(question)s, %(embedding)s::extensions.vector, 10);

-- The anchor's rows of a project, as the member, by the title their content starts with (the layers'
-- copies are told apart by their titles).
-- name: anchor_titles
select id, split_part(content, E'\n', 1) from anchor.documents where project_id = %(project_id)s;

-- The anchor (anchor.py): its rows, its indexes and its bytes; its table and function are anchor.sql.
-- The same rows as public.memories, each with its e5 vector, loaded before the page's two indexes are
-- built (the indexes the page creates on the empty table; built after the load here, the bench's way).
-- name: anchor_fill
insert into anchor.documents (content, embedding, author_id, scope, project_id, team_id)
select m.title || E'\n' || m.body, m.embedding::extensions.vector(384), m.author_id, m.scope, m.project_id, m.team_id
from public.memories m
order by m.created_at, m.id;

-- name: anchor_indexes
create index on anchor.documents using gin (fts);
create index on anchor.documents using hnsw (embedding extensions.vector_ip_ops);

-- name: anchor_vacuum_analyze
vacuum analyze anchor.documents;

-- Bytes of the anchor by structure, shaped as storage_split's rows (footprint.split): the heap, its TOAST
-- table with its index, each index by name.
-- name: anchor_storage_split
with t as (select oid, reltoastrelid from pg_class where oid = 'anchor.documents'::regclass)
select 'documents heap', 'anchor.documents', pg_table_size(t.oid) - pg_total_relation_size(t.reltoastrelid) from t
union all
select 'documents TOAST', t.reltoastrelid::regclass::text, pg_total_relation_size(t.reltoastrelid) from t
union all
(select 'documents index', i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)
 from pg_index i join t on i.indrelid = t.oid order by 3 desc, 2);

-- The anchor's rows: all of them as the owner; as a member or a stranger, what its policy shows them.
-- name: anchor_count
select count(*) from anchor.documents;

-- The text search configuration the page relies on (Supabase's is pg_catalog.english).
-- name: anchor_default_text_search_config
show default_text_search_config;

-- recall_quality --sweep (decision 0030): one semantic leg over the whole corpus as one layer, its
-- `candidates` best by the Hamming distance of the stored sign bits (roi.embedding_bits, the shipped
-- centres) ranked again exactly, as roi.recall_semantic_leg ranks them; no cut when candidates is null.
-- Written for e5's column; the MiniLM leg is the same text with `m.embedding` read as `m.embedding_minilm`.
-- name: quality_sweep_leg
with candidates as (
  select m.id from public.memories m
  where m.invalidated_at is null and m.embedding_bits is not null
  order by m.embedding_bits operator(extensions.<~>)
           roi.embedding_bits(%(embedding)s::extensions.halfvec, %(model)s), m.id
  limit %(candidates)s
)
select m.id from public.memories m
where m.id = any (array(select c.id from candidates c))
order by m.embedding operator(extensions.<=>) %(embedding)s::extensions.halfvec, m.created_at desc, m.id
limit 10;

-- The postings as blocks in impact order (blocks.py): one row per layer, lexeme and block number, holding
-- {block} memory ids and their impacts, a list's highest impacts in block 0 (ties by memory id, as a
-- compaction would write them). storage main keeps the arrays in the row, which fits a page.
-- name: blocks_build
create table blocks_scratch.{name} (
  layer_id uuid not null, block smallint not null, layer_kind "char" not null, lexeme text not null,
  memory_ids uuid[] not null, impacts real[] not null
);
alter table blocks_scratch.{name} alter memory_ids set storage main, alter impacts set storage main;
insert into blocks_scratch.{name}
select layer_id, (r / {block})::smallint, layer_kind, lexeme, array_agg(memory_id order by r), array_agg(impact order by r)
from (
  select p.layer_id, p.layer_kind, p.lexeme, p.memory_id, p.impact,
         row_number() over (partition by p.layer_id, p.layer_kind, p.lexeme order by p.impact desc, p.memory_id) - 1 as r
  from public.memory_postings p
) x
group by layer_id, layer_kind, lexeme, r / {block};
create index on blocks_scratch.{name} (layer_id, lexeme, block) include (layer_kind);

-- A question's lists as the lexical leg reads them (the per_term postings of highest impact of each of its
-- lexemes in the layer), from the real postings: an index-only scan per lexeme. Totals only, so that the
-- client's time is the read's and not the rows' transfer.
-- name: blocks_postings_read
with terms as (select unnest(tsvector_to_array(to_tsvector('english', %(question)s))) as lexeme),
listed as (
  select h.memory_id, sum(h.impact) as impact
  from terms t cross join lateral (
    select p.memory_id, p.impact from public.memory_postings p
    where p.layer_id = %(layer)s and p.lexeme = t.lexeme and p.layer_kind = 'p'
    order by p.impact desc limit %(per_term)s) h
  group by h.memory_id)
select sum(impact), count(*) from listed;

-- The same lists from blocks in impact order: each list's first blocks, sliced at per_term.
-- name: blocks_read
with terms as (select unnest(tsvector_to_array(to_tsvector('english', %(question)s))) as lexeme),
listed as (
  select u.memory_id, sum(u.impact) as impact
  from terms t
  join blocks_scratch.{name} b
    on b.layer_id = %(layer)s and b.lexeme = t.lexeme and b.layer_kind = 'p'
       and b.block < (%(per_term)s + {block} - 1) / {block}
  cross join lateral unnest(b.memory_ids, b.impacts) with ordinality u(memory_id, impact, position)
  where b.block * {block} + u.position <= %(per_term)s
  group by u.memory_id)
select sum(impact), count(*) from listed;

-- Rows and bytes of the real postings and of each block table: heap with TOAST, and indexes (rows as vacuum
-- counted them, exact after its full pass over a table nobody else writes).
-- name: blocks_sizes
select c.relname, c.reltuples::bigint, pg_table_size(c.oid), pg_indexes_size(c.oid)
from pg_class c
where c.oid = 'public.memory_postings'::regclass
   or (c.relnamespace = 'blocks_scratch'::regnamespace and c.relkind = 'r')
order by c.oid = 'public.memory_postings'::regclass desc, c.relname;

-- The same lists from the same blocks, the arrays sliced at per_term and unnested in the select list (a
-- set-returning function there streams its rows; in FROM it fills a tuplestore first).
-- name: blocks_read_sliced
with terms as (select unnest(tsvector_to_array(to_tsvector('english', %(question)s))) as lexeme),
listed as (
  select x.memory_id, sum(x.impact) as impact
  from (
    select unnest(b.memory_ids[1:%(per_term)s - b.block * {block}]) as memory_id,
           unnest(b.impacts[1:%(per_term)s - b.block * {block}]) as impact
    from terms t
    join blocks_scratch.{name} b
      on b.layer_id = %(layer)s and b.lexeme = t.lexeme and b.layer_kind = 'p'
         and b.block < (%(per_term)s + {block} - 1) / {block}
  ) x
  group by x.memory_id)
select sum(impact), count(*) from listed;

-- The blocks readable by a layer's members as its postings are (21_recall_postings.sql's policy), for the
-- lexical leg that reads them as the member (blocks.py --hybrid).
-- name: blocks_member_reads
grant usage on schema blocks_scratch to authenticated;
grant select on blocks_scratch.{name} to authenticated;
alter table blocks_scratch.{name} enable row level security;
create policy "Blocks are visible to their memories' audience" on blocks_scratch.{name}
  for select to authenticated using (
    (layer_kind = 'u' and layer_id = (select auth.uid()))
    or (layer_kind = 'p' and layer_id = any (array(select public.caller_project_ids())))
    or (layer_kind = 't' and layer_id = any (array(select public.caller_team_ids())))
  );
