-- Every query the bench runs, by name (see python/zm_roi/bench/sql.py). The corpus generator
-- itself is sql/bench/corpus.sql.

-- name: deactivate_cron
update cron.job set active = false;

-- name: reported_settings
select name, current_setting(name) from pg_settings where name = any (%(names)s) order by name;

-- name: memories_secondary_indexes
select indexrelid::regclass::text as name, pg_get_indexdef(indexrelid) as definition
from pg_index where indrelid = 'public.memories'::regclass and not indisprimary
order by 1;

-- name: build_population
select bench.build_population(%(seed)s);

-- name: add_memories
select bench.add_memories(%(chunk)s, %(count)s);

-- name: move_memory_epoch
select nextval('roi.memory_epoch');

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
  pg_size_pretty(pg_indexes_size('public.memories')) as indexes_size,
  pg_size_pretty(pg_relation_size('public.memories_search_idx')) as gin_size;

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

-- The bundled hybrid recall, same sample, with a query vector (random unit, as the corpus's).
-- name: recall_hybrid
select memory_id, kind, scope, title, body, score
from public.recall(%(question)s, %(project_id)s, %(team_id)s, 10, %(personal_only)s, %(embedding)s::extensions.vector);

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
-- The peer design: the same run driven by a client loop over the connection (bench only).
-- ============================================================================================

-- name: peer_begin
select pg_try_advisory_xact_lock(hashtextextended('roi.benchmark:' || %(owner)s::text, 0)) as locked,
       roi.open_gate(), roi.retire_unreachable_probes() as retired, roi.top_up_pool() as added;

-- name: peer_open_run
select (roi.open_run()).id;

-- name: peer_start_run
with run as (
  insert into roi.runs (owner_id, mode, probe_count, started_at)
  values (%(owner)s, 'deterministic', %(probes)s, clock_timestamp())
  returning id, owner_id, started_at
)
insert into roi.pending_runs (run_id, owner_id, started_at)
select id, owner_id, started_at from run
returning run_id;

-- name: peer_probes
select p.id, p.memory_id, p.question, p.pin_project_id as project_id, p.pin_team_id as team_id,
       p.source_scope = 'personal' as personal_only
from roi.probes p where p.owner_id = %(owner)s and p.state = 'active'
order by p.id;

-- name: peer_record_recall
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
values (%(run_id)s, %(probe_id)s, %(owner)s, %(surfaced_ids)s, %(surfaced)s);

-- name: peer_record_verdict
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
values (%(run_id)s, %(probe_id)s, %(owner)s, %(memory_id)s, %(with_memory)s, false, 'deterministic');

-- name: peer_finish
select roi.close_run_if_done(%(run_id)s) as closed, roi.rotate_pool(%(run_id)s) as rotated,
       roi.top_up_pool() as added, roi.close_gate();

-- name: peer_count_served
update roi.probes p set runs_served = p.runs_served + 1
where p.owner_id = %(owner)s and p.state = 'active';

-- ============================================================================================
-- Upkeep
-- ============================================================================================

-- name: upkeep
select roi.upkeep();

-- name: upkeep_owner
select roi.upkeep_owner(%(owner)s);

-- Empty every pool (as rotation would, all at once) so the next cycle must refill them; then move
-- the epoch, which is what makes upkeep visit every owner with a pool.
-- name: retire_all_probes
update roi.probes set state = 'retired', retired_reason = 'rotated', retired_at = now(), lease_until = null
where state in ('pending', 'active');

-- Retire the `k` longest-serving active probes of every owner, as one rotation per owner would.
-- name: retire_some_probes
with ranked as (
  select p.id, row_number() over (partition by p.owner_id order by p.runs_served desc, p.activated_at, p.id) as r
  from roi.probes p where p.state = 'active'
)
update roi.probes p set state = 'retired', retired_reason = 'rotated', retired_at = now()
from ranked where ranked.id = p.id and ranked.r <= %(k)s;

-- name: pool_summary
select count(distinct owner_id) as owners, count(*) filter (where state = 'active') as active,
       count(*) filter (where state = 'pending') as pending
from roi.probes;

-- ============================================================================================
-- Worker (issue 4): present once the verbs exist.
-- ============================================================================================

-- name: worker_verbs
select array_agg(p.proname::text order by p.proname)
from pg_proc p join pg_namespace n on n.oid = p.pronamespace
where n.nspname = 'roi' and p.proname in ('claim_judgment', 'record_verdict');

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
                          question, state, activated_at)
  select r.owner_id, gen_random_uuid(), 'decision', 'personal', 'Bench decision ' || g,
         'The body of bench decision ' || g || ': we chose the second option for its lower cost.',
         'Which option did bench decision ' || g || ' choose?', 'active', now()
  from new_runs r, generate_series(1, %(per_run)s) g
  returning id, owner_id
), snapshots as (
  insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
  select r.id, p.id, p.owner_id, '{}', '[]' from new_probes p join new_runs r on r.owner_id = p.owner_id
)
insert into roi.judgments (run_id, probe_id, owner_id)
select r.id, p.id, p.owner_id from new_probes p join new_runs r on r.owner_id = p.owner_id;

-- name: queued_judgments
select count(*) from roi.judgments;

-- name: drain_span_ms
select extract(epoch from max(v.recorded_at) - min(v.recorded_at)) * 1000, count(*)
from roi.verdicts v where v.judged_by = 'llm' and v.recorded_at >= %(since)s;

-- Recall quality (python/zm_roi/bench/recall_quality.py), run as the evaluation user.

-- name: quality_memory_ids
select m.id, p.name as project, m.title, m.body
from public.memories m join public.projects p on p.id = m.project_id
where m.author_id = %(user_id)s;

-- name: quality_lexical_leg
select memory_id, score from public.recall_lexical(%(question)s, %(project_id)s, null, %(count)s);

-- The semantic leg alone, as the hybrid recall computes it: exact distances over the pinned layer.
-- name: quality_semantic_leg
select m.id, 1 - (m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector) as similarity
from public.memories m
where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null and m.embedding is not null
order by m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector, m.created_at desc, m.id
limit %(count)s;

-- name: quality_hybrid
select memory_id from public.recall(%(question)s, %(project_id)s, null, 10, false, %(embedding)s::extensions.vector);

-- name: quality_templates
select m.id, p.name as project, roi.template_question(m.kind, m.title, m.body) as question
from public.memories m join public.projects p on p.id = m.project_id
where m.author_id = %(user_id)s order by m.id;
