-- Every query the Python side runs, by name (see queries.py). The logic itself lives in
-- supabase/migrations; these are the few statements that drive it.

-- name: ensure_user
insert into auth.users (email) values (%(email)s)
on conflict (email) do update set email = excluded.email
returning id;

-- name: ensure_team
insert into public.teams (name) values (%(name)s)
on conflict (name) do update set name = excluded.name
returning id;

-- name: ensure_project
insert into public.projects (name, team_id) values (%(name)s, %(team_id)s)
on conflict (name) do update set team_id = coalesce(excluded.team_id, public.projects.team_id)
returning id;

-- name: add_team_member
insert into public.team_members (team_id, user_id) values (%(team_id)s, %(user_id)s)
on conflict do nothing;

-- name: add_project_member
insert into public.project_members (project_id, user_id) values (%(project_id)s, %(user_id)s)
on conflict do nothing;

-- Import: names are looked up exactly; creating one is a separate, announced step.
-- name: create_user
insert into auth.users (email) values (%(email)s) returning id;

-- name: create_project
insert into public.projects (name) values (%(name)s) returning id;

-- name: create_team
insert into public.teams (name) values (%(name)s) returning id;

-- name: team_id_by_name
select id from public.teams where name = %(name)s;

-- name: project_names
select name from public.projects;

-- name: team_names
select name from public.teams;

-- name: is_project_member
select exists (select from public.project_members where project_id = %(project_id)s and user_id = %(user_id)s);

-- name: is_team_member
select exists (select from public.team_members where team_id = %(team_id)s and user_id = %(user_id)s);

-- Imports run one at a time per layer (a session lock held while the import writes there), so a
-- memory identical to one already in the layer is found below and not written again, even by
-- concurrent or resumed imports of the same file. Keyed by layer kind and id.
-- name: lock_import_layer
select pg_advisory_lock(hashtextextended('zm-roi import into ' || %(scope)s::text || ' ' || %(layer_id)s::text, 0));

-- name: try_lock_import_layer
select pg_try_advisory_lock(hashtextextended('zm-roi import into ' || %(scope)s::text || ' ' || %(layer_id)s::text, 0));

-- The same until the open transaction ends (an import that commits once, at its end).
-- name: lock_import_layer_xact
select pg_advisory_xact_lock(hashtextextended('zm-roi import into ' || %(scope)s::text || ' ' || %(layer_id)s::text, 0));

-- name: unlock_import_layer
select pg_advisory_unlock(hashtextextended('zm-roi import into ' || %(scope)s::text || ' ' || %(layer_id)s::text, 0));

-- Finding or creating the user, project or team of an import is one short transaction at a time
-- (a transaction lock), so parallel first imports of a new user or place create it once.
-- name: lock_import_setup
select pg_advisory_xact_lock(hashtextextended('zm-roi import: users, projects and teams', 0));

-- What a layer holds already, as (kind, SHA-256 of title, of body): a memory identical to one of them
-- (same scope and owner/project/team, kind, title and body) is not inserted again. Invalidated ones
-- count too: importing a file twice adds nothing.
-- name: memories_in_layer
select m.id, m.kind, sha256(convert_to(m.title, 'UTF8')), sha256(convert_to(m.body, 'UTF8'))
from public.memories m
where m.scope = %(scope)s::text
  and case %(scope)s::text
        when 'personal' then m.author_id = %(layer_id)s::uuid
        when 'project' then m.project_id = %(layer_id)s::uuid
        else m.team_id = %(layer_id)s::uuid
      end;

-- A batch of an import's memories (parallel arrays, one element per memory), in one statement.
-- name: insert_memories
insert into public.memories
  (author_id, scope, project_id, team_id, kind, title, body, created_at, invalidated_at)
select %(author_id)s::uuid, l.scope, l.project_id, l.team_id, l.kind, l.title, l.body,
       coalesce(l.created_at, now()), l.invalidated_at
from unnest(%(scope)s::text[], %(project_id)s::uuid[], %(team_id)s::uuid[], %(kind)s::text[],
            %(title)s::text[], %(body)s::text[], %(created_at)s::timestamptz[],
            %(invalidated_at)s::timestamptz[])
     as l (scope, project_id, team_id, kind, title, body, created_at, invalidated_at)
returning id;

-- Emails compare case-insensitively, as Supabase Auth treats them.
-- name: user_id_by_email
select id from auth.users where lower(email) = lower(btrim(%(email)s)) order by created_at limit 1;

-- name: act_as_user
select set_config('role', %(role)s, true),
       set_config('request.jwt.claims', %(claims)s, true),
       set_config('request.method', 'POST', true),
       set_config('request.path', %(path)s, true);

-- After a statement run as a user on a superuser connection: its own role again, same transaction.
-- name: back_to_login_role
reset role;

-- name: recall
select memory_id, kind, scope, title, body, score
from roi.configured_recall(%(query)s, %(project_id)s, %(team_id)s, %(match_count)s, false,
                           %(embedding)s::extensions.vector);

-- name: project_id_by_name
select id from public.projects where name = %(name)s;

-- The local login roles' passwords (prepare_database): the statement, quoted by format(); no row when
-- the role does not exist yet.
-- name: login_password_statement
select format('alter role %%I with login password %%L', rolname, %(password)s::text)
from pg_roles where rolname = %(role)s;

-- name: set_extractor
update roi.settings set extractor = %(extractor)s returning extractor;

-- name: get_extractor
select extractor from roi.settings;

-- name: get_recall_function
select recall_function from roi.settings;

-- The demo measures a recall function for one transaction: it puts the setting back before committing.
-- name: restore_recall_function
update roi.settings set recall_function = %(recall_function)s;

-- Run as the token's user (after act_as_user): RLS lets a user see their own auth.users row only.
-- name: caller_exists
select exists (select from auth.users where id = (select auth.uid()));

-- name: has_benchmark_schema
select to_regclass('roi.settings') is not null;

-- name: has_pg_cron
select to_regclass('cron.job_run_details') is not null;

-- The scheduled upkeep and its latest run (`zm-roi db status`).
-- name: upkeep_job
select j.active, d.status, d.return_message, d.start_time
from cron.job j
left join lateral (
  select d.status, d.return_message, d.start_time from cron.job_run_details d
  where d.jobid = j.jobid order by d.start_time desc nulls last limit 1
) d on true
where j.jobname = 'zm-roi-upkeep';

-- name: configure_recall
select roi.configure_recall(%(name)s);

-- Embeddings (zm_roi.backfill, connected as roi_embedder, or the importer as the importing operator).

-- name: memories_to_embed
select id, author_id, title, body from public.memories
where invalidated_at is null and embedding_model is distinct from %(model)s
order by id limit %(batch)s
for update skip locked;

-- name: count_memories_to_embed
select count(*) from public.memories where invalidated_at is null and embedding_model is distinct from %(model)s;

-- The same, among the memories an import wrote or found already there (their ids).
-- name: memories_to_embed_among
select id, author_id, title, body from public.memories
where id = any(%(ids)s::uuid[]) and invalidated_at is null and embedding_model is distinct from %(model)s
order by id limit %(batch)s
for update skip locked;

-- name: count_memories_to_embed_among
select count(*) from public.memories
where id = any(%(ids)s::uuid[]) and invalidated_at is null and embedding_model is distinct from %(model)s;

-- name: store_memory_embedding
update public.memories set embedding = %(embedding)s::extensions.vector, embedding_model = %(model)s
where id = %(id)s;

-- Questions are the worker's to embed: the backfill only queues them (roi_embedder reads no question).
-- name: queue_question_embeddings
select roi.queue_question_embeddings(%(model)s);

-- name: record_embedding_usage
insert into public.usage_events (owner_id, purpose, model, input_tokens)
values (%(owner_id)s, 'embedding', %(model)s, %(input_tokens)s);

-- name: benchmark_memory
select public.benchmark_memory();

-- The views as JSON, so the local transport hands back exactly what PostgREST would send.
-- name: benchmark_tile
select to_jsonb(t) from public.roi_benchmark_tile t;

-- name: benchmark_runs
select coalesce(jsonb_agg(to_jsonb(r) order by r.started_at desc), '[]'::jsonb)
from public.roi_benchmark_runs r;

-- name: benchmark_breakdown
select coalesce(jsonb_agg(to_jsonb(b) order by b.run_id, b.dimension, b.value), '[]'::jsonb)
from public.roi_benchmark_breakdown b;

-- The worker (connected as roi_worker): the verbs of supabase/migrations/*_roi_worker.sql.

-- name: worker_listen
listen roi_work;

-- What the worker will find at start: the mode, and rows already queued that need a model (every
-- kind but embed_question, which the embedding door serves without a provider key).
-- name: worker_queue_state
select s.extractor, (select count(*) from roi.work w where w.kind <> 'embed_question') as queued
from roi.settings s;

-- name: claim_work
select work_id, kind, attempt, owner_id, run_id, probe_id, question, source_kind, source_title, source_body,
       surfaced
from roi.claim_work();

-- name: release_work
select roi.release_work(%(work_id)s, %(attempt)s, %(failure)s);

-- name: owner_provider_key
select roi.owner_provider_key(%(owner_id)s, %(provider)s, %(passphrase)s);

-- name: record_usage
select roi.record_usage(%(owner_id)s, %(purpose)s, %(model)s, %(run_id)s, %(probe_id)s,
                        %(input_tokens)s, %(output_tokens)s, %(byok)s, %(cost_usd)s::numeric);

-- name: record_question
select roi.record_question(%(probe_id)s, %(question)s, %(origin)s, %(generator)s);

-- name: record_question_embedded
select roi.record_question(%(probe_id)s, %(question)s, %(embedding)s::extensions.vector, %(embedding_model)s,
                           %(origin)s, %(generator)s);

-- name: record_verdict
select roi.record_verdict(%(run_id)s, %(probe_id)s, %(with_memory)s, %(without_memory)s,
                          %(confidence)s::real, %(reason)s, %(judge_fingerprint)s);

-- name: record_closed_book
select roi.record_closed_book(%(run_id)s, %(probe_id)s, %(correct)s);

-- name: record_judge_check
select roi.record_judge_check(%(run_id)s, %(probe_id)s, %(kind)s, %(with_memory)s, %(without_memory)s);

-- name: record_question_embedding
select roi.record_question_embedding(%(probe_id)s, %(embedding)s::extensions.vector, %(embedding_model)s);

-- name: store_provider_key
select roi.store_provider_key(%(owner_id)s, %(provider)s, %(api_key)s, %(passphrase)s);

-- ============================================================================================
-- The bench's queries (python/zm_roi/bench/sql.py reads them as bench_NAME). The corpus generator
-- itself is sql/bench/corpus.sql.
-- ============================================================================================
-- name: bench_deactivate_cron
update cron.job set active = false;

-- name: bench_reported_settings
select name, current_setting(name) from pg_settings where name = any (%(names)s) order by name;

-- name: bench_memories_secondary_indexes
select indexrelid::regclass::text as name, pg_get_indexdef(indexrelid) as definition
from pg_index where indrelid = 'public.memories'::regclass and not indisprimary
order by 1;

-- name: bench_build_population
select bench.build_population(%(seed)s);

-- `make bench OWNERS=n`: n users, with teams and projects in the default proportions (1 team per
-- 20 users, 1 project per 2), so memberships per user stay as in the default corpus.
-- name: bench_build_population_for_owners
select bench.build_population(%(seed)s, users => %(owners)s, teams => greatest(%(owners)s / 20, 1),
                              projects => greatest(%(owners)s / 2, 1));

-- name: bench_add_memories
select bench.add_memories(%(chunk)s, %(count)s);

-- Mark every owner with a pool dirty, as a write that touched everyone would (the bulk load skips
-- the triggers, and the refill cycles below empty every pool by hand).
-- name: bench_mark_every_pool_dirty
insert into roi.dirty_layers (layer, layer_id, can_retire)
select distinct 'personal', p.owner_id, true from roi.probes p
on conflict do nothing;

-- name: bench_corpus_shape
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

-- name: bench_recall_samples_project
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

-- name: bench_recall_samples_team
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

-- name: bench_recall_samples_personal
select m.id as memory_id, m.author_id as user_id, null::uuid as project_id, null::uuid as team_id,
       true as personal_only, roi.template_question(m.kind, m.title, m.body) as question,
       (select count(*) from public.memories x
        where x.scope = 'personal' and x.invalidated_at is null and x.author_id = m.author_id) as layer_rows
from public.memories m
where m.scope = 'personal' and m.invalidated_at is null and m.kind <> 'episode'
order by md5(m.id::text || %(seed)s::text) limit %(n)s;

-- name: bench_recall
select memory_id, kind, scope, title, body, score
from public.recall(%(question)s, %(project_id)s, %(team_id)s, 10, %(personal_only)s);

-- name: bench_round_trip
select 1;

-- name: bench_bench_owners
select u.user_id from bench.user_roster u order by md5(u.user_id::text || %(seed)s::text) limit %(n)s;

-- name: bench_all_owners
select u.user_id from bench.user_roster u order by u.n;

-- name: bench_benchmark_memory
select public.benchmark_memory();

-- What the owner's next run will recall (read as the bench's superuser, outside any run).
-- name: bench_active_probes
select p.id, p.memory_id, p.question, p.pin_project_id as project_id, p.pin_team_id as team_id,
       p.source_scope = 'personal' as personal_only
from roi.probes p where p.owner_id = %(owner)s and p.state = 'active'
order by p.id;

-- ============================================================================================
-- The peer design: the same run driven by a client loop over the connection (bench only).
-- ============================================================================================

-- name: bench_peer_begin
select pg_try_advisory_xact_lock(roi.owner_lock_key(%(owner)s)) as locked,
       roi.open_gate(), roi.retire_unreachable_probes() as retired, roi.top_up_pool() as added;

-- name: bench_peer_open_run
select (roi.open_run()).id;

-- name: bench_peer_start_run
with run as (
  insert into roi.runs (owner_id, mode, probe_count, started_at)
  values (%(owner)s, 'deterministic', %(probes)s, clock_timestamp())
  returning id, owner_id, started_at
)
insert into roi.pending_runs (run_id, owner_id, started_at)
select id, owner_id, started_at from run
returning run_id;

-- name: bench_peer_probes
select p.id, p.memory_id, p.question, p.pin_project_id as project_id, p.pin_team_id as team_id,
       p.source_scope = 'personal' as personal_only
from roi.probes p where p.owner_id = %(owner)s and p.state = 'active'
order by p.id;

-- name: bench_peer_record_recall
insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
values (%(run_id)s, %(probe_id)s, %(owner)s, %(surfaced_ids)s, %(surfaced)s);

-- name: bench_peer_record_verdict
insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
values (%(run_id)s, %(probe_id)s, %(owner)s, %(memory_id)s, %(with_memory)s, false, 'deterministic');

-- name: bench_peer_finish
select roi.close_run_if_done(%(run_id)s) as closed, roi.rotate_completed_runs(null) as rotated,
       roi.top_up_pool() as added, roi.close_gate();

-- name: bench_peer_count_served
update roi.probes p set runs_served = p.runs_served + 1
where p.owner_id = %(owner)s and p.state = 'active';

-- ============================================================================================
-- Upkeep
-- ============================================================================================

-- name: bench_upkeep
select roi.upkeep();

-- name: bench_upkeep_owner
select roi.upkeep_owner(%(owner)s);

-- Empty every pool (as rotation would, all at once) so the next cycle must refill them; then mark
-- every owner dirty, which is what makes upkeep visit every owner with a pool.
-- name: bench_retire_all_probes
update roi.probes set state = 'retired', retired_reason = 'rotated', retired_at = now()
where state in ('pending', 'active');

-- Retire the `k` longest-serving active probes of every owner, as one rotation per owner would.
-- name: bench_retire_some_probes
with ranked as (
  select p.id, row_number() over (partition by p.owner_id order by p.runs_served desc, p.activated_at, p.id) as r
  from roi.probes p where p.state = 'active'
)
update roi.probes p set state = 'retired', retired_reason = 'rotated', retired_at = now()
from ranked where ranked.id = p.id and ranked.r <= %(k)s;

-- Projects to write into, one per write, each with a member to write as, the number of its members
-- with a pool that is not full (the owners a cycle after an addition should visit) and with a pool
-- at all (after an invalidation).
-- name: bench_write_targets
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
-- name: bench_write_project_memory
insert into public.memories (author_id, scope, project_id, kind, title, body)
values (%(author)s, 'project', %(project_id)s, 'decision', %(title)s,
        'A decision written while the bench measures upkeep, so the next cycle has something to do.');

-- An invalidation, written as the author of the project's newest live memory of theirs (the caller
-- switched to them first): it can retire probes, so every member with a pool is visited.
-- name: bench_invalidate_project_memory
update public.memories set invalidated_at = now()
where id = (select m.id from public.memories m
            where m.project_id = %(project_id)s and m.author_id = %(author)s and m.invalidated_at is null
            order by m.created_at desc limit 1);

-- The distinct owners with a pool that is not full among the members of these projects.
-- name: bench_pool_owners_of_projects
select count(distinct pm.user_id) from public.project_members pm
where pm.project_id = any (%(projects)s) and exists (select from roi.probes p where p.owner_id = pm.user_id)
  and (select count(*) from roi.probes p where p.owner_id = pm.user_id and p.state in ('pending', 'active'))
      < (select s.pool_target from roi.settings s);

-- The distinct owners with a pool, full or not, among the members of these projects.
-- name: bench_pool_owners_of_projects_any
select count(distinct pm.user_id) from public.project_members pm
where pm.project_id = any (%(projects)s) and exists (select from roi.probes p where p.owner_id = pm.user_id);

-- name: bench_pool_summary
select count(distinct owner_id) as owners, count(*) filter (where state = 'active') as active,
       count(*) filter (where state = 'pending') as pending
from roi.probes;

-- ============================================================================================
-- Worker (issue 4): present once the verbs exist.
-- ============================================================================================

-- ============================================================================================
-- EXPLAIN of what recall() runs inside: auto_explain logs nested statements to this client.
-- ============================================================================================

-- name: bench_auto_explain_on
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

-- name: bench_seed_judgments
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
insert into roi.work (kind, run_id, probe_id, owner_id)
select 'judge', r.id, p.id, p.owner_id from new_probes p join new_runs r on r.owner_id = p.owner_id;

-- name: bench_queued_judgments
select count(*) from roi.work where kind = 'judge';

-- name: bench_drain_span_ms
select extract(epoch from max(v.recorded_at) - min(v.recorded_at)) * 1000, count(*)
from roi.verdicts v where v.judged_by = 'llm' and v.recorded_at >= %(since)s;

-- ============================================================================================
-- Model latency with one worker process (issue 13): a 1-second model, 20 questions, 20 judgments.
-- ============================================================================================

-- name: bench_latency_owner
insert into auth.users (email) values ('latency-owner@bench.test') returning id;

-- name: bench_latency_memories
insert into public.memories (author_id, scope, kind, title, body)
select %(owner)s, 'personal', (array['decision', 'gotcha', 'convention'])[1 + i %% 3],
       format('Latency fact %%s for the cache of service %%s', i, i),
       format('Entries for service %%s expire after %%s minutes since incident %%s.', i, i + 5, i * 7)
from generate_series(1, %(count)s) i;

-- name: bench_get_extractor
select extractor from roi.settings;

-- name: bench_set_extractor
update roi.settings set extractor = %(extractor)s;

-- name: bench_set_judge_checks
-- Returns the settings it replaced, for the bench to put back.
update roi.settings s set withheld_source_checks = %(withheld)s, order_checks = %(order)s
from (select withheld_source_checks, order_checks from roi.settings) before
returning before.withheld_source_checks, before.order_checks;

-- name: bench_active_probes_of
select count(*) from roi.probes where owner_id = %(owner)s and state = 'active';

-- name: bench_run_closed
select exists (select from roi.run_closures where run_id = %(run_id)s);

-- Worker lanes that are connected and idle after looking for work: the worker is ready.
-- name: bench_idle_worker_lanes
select count(*) from pg_stat_activity
where usename = 'roi_worker' and state = 'idle' and query like '%%claim_work%%';
-- The bundled hybrid recall, same sample, with a query vector (random unit, as the corpus's).
-- name: bench_recall_hybrid
select memory_id, kind, scope, title, body, score
from public.recall(%(question)s, %(project_id)s, %(team_id)s, 10, %(personal_only)s, %(embedding)s::extensions.vector);


-- Recall quality (python/zm_roi/bench/recall_quality.py), run as the evaluation user.

-- name: bench_quality_memory_ids
select m.id, p.name as project, m.title, m.body
from public.memories m join public.projects p on p.id = m.project_id
where m.author_id = %(user_id)s;

-- name: bench_quality_lexical_leg
select memory_id, score from public.recall_lexical(%(question)s, %(project_id)s, null, %(count)s);

-- The lexical leg as main ranked it before the title was weighted like the body (ts_rank's default
-- weights: title 1.0, body 0.4), over the same pinned layer, for the side-by-side rows of the report.
-- name: bench_quality_lexical_leg_title_weighted
select m.id, ts_rank(m.search, public.recall_query(%(question)s), 1) as score
from public.memories m
where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null
  and m.search @@ public.recall_query(%(question)s)
order by score desc, m.created_at desc, m.id
limit %(count)s;

-- The semantic leg alone, as the hybrid recall computes it: exact distances over the pinned layer.
-- name: bench_quality_semantic_leg
select m.id, 1 - (m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector) as similarity
from public.memories m
where m.scope = 'project' and m.project_id = %(project_id)s and m.invalidated_at is null and m.embedding is not null
order by m.embedding operator(extensions.<=>) %(embedding)s::extensions.vector, m.created_at desc, m.id
limit %(count)s;

-- name: bench_quality_hybrid
select memory_id from public.recall(%(question)s, %(project_id)s, null, 10, false, %(embedding)s::extensions.vector);

-- name: bench_quality_templates
select m.id, p.name as project, roi.template_question(m.kind, m.title, m.body) as question
from public.memories m join public.projects p on p.id = m.project_id
where m.author_id = %(user_id)s order by m.id;

-- Pinned recall against the layer's size, on real text (python/zm_roi/bench/layers.py).

-- name: bench_layers_project_id
select id from public.projects where name = %(name)s;

-- name: bench_layers_user_id
select id from auth.users where email = %(email)s;

-- name: bench_layers_copy
copy public.memories (author_id, project_id, kind, title, body, embedding, embedding_model, scope)
from stdin;

-- name: bench_layers_template_question
select roi.template_question(%(kind)s, %(title)s, %(body)s);

-- Who the layer curve's recalls run as: the member's role and identity, so RLS applies.
-- name: bench_layers_caller
select current_user || ' ' || coalesce(auth.uid()::text, 'no identity');

-- name: bench_layers_titles
select id, title from public.memories where project_id = %(project_id)s;

-- name: bench_layers_lexical
select memory_id from public.recall_lexical(%(question)s, %(project_id)s, null, 10);

-- name: bench_layers_hybrid
select memory_id from public.recall(%(question)s, %(project_id)s, null, 10, false, %(embedding)s::extensions.vector);
