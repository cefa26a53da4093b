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
                           %(embedding)s::extensions.vector, %(embedding_minilm)s::extensions.vector);

-- Vectors of another model than the one in force, per leg (`embedding`, `embedding_minilm`; a leg not
-- in force is passed null and finds nothing), with how many live memories hold them, in a recall's read
-- set: run as the caller (RLS decides what they see), narrowed to the pin as public.recall narrows it.
-- A leg listed here is left out of that recall: its stored vectors cannot be compared with the query's.
-- name: stale_embedding_models_in_read_set
select leg, model, count(*) from (
  select 'embedding' as leg, m.embedding_model as model, m.scope, m.author_id, m.project_id, m.team_id
  from public.memories m where m.invalidated_at is null and m.embedding_model <> %(embedding)s
  union all
  select 'embedding_minilm', m.embedding_minilm_model, m.scope, m.author_id, m.project_id, m.team_id
  from public.memories m where m.invalidated_at is null and m.embedding_minilm_model <> %(embedding_minilm)s
) s
where (%(project_id)s::uuid is null and %(team_id)s::uuid is null)
   or (s.scope = 'personal' and s.author_id = (select auth.uid()))
   or s.project_id = %(project_id)s::uuid or s.team_id = %(team_id)s::uuid
group by 1, 2 order by 1, 2;

-- The same for one layer an import wrote into (scope, and its id: the author for personal memories).
-- name: stale_embedding_models_in_layer
select leg, model, count(*) from (
  select 'embedding' as leg, m.embedding_model as model, m.scope, m.author_id, m.project_id, m.team_id
  from public.memories m where m.invalidated_at is null and m.embedding_model <> %(embedding)s
  union all
  select 'embedding_minilm', m.embedding_minilm_model, m.scope, m.author_id, m.project_id, m.team_id
  from public.memories m where m.invalidated_at is null and m.embedding_minilm_model <> %(embedding_minilm)s
) s
where (%(scope)s = 'personal' and s.scope = 'personal' and s.author_id = %(layer_id)s::uuid)
   or (%(scope)s = 'project' and s.project_id = %(layer_id)s::uuid)
   or (%(scope)s = 'team' and s.team_id = %(layer_id)s::uuid)
group by 1, 2 order by 1, 2;

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

-- name: set_spending_caps
update roi.settings
set max_run_cost_usd = case when %(set_run)s then %(max_run)s::numeric else max_run_cost_usd end,
    max_owner_cost_usd_per_month
      = case when %(set_owner)s then %(max_owner)s::numeric else max_owner_cost_usd_per_month end;

-- name: get_spending_caps
select max_run_cost_usd, max_owner_cost_usd_per_month from roi.settings;

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
update public.memories set embedding = %(embedding)s::extensions.halfvec, embedding_model = %(model)s
where id = %(id)s;

-- The same four and the store for the second leg's column (MiniLM).
-- name: memories_to_embed_minilm
select id, author_id, title, body from public.memories
where invalidated_at is null and embedding_minilm_model is distinct from %(model)s
order by id limit %(batch)s
for update skip locked;

-- name: count_memories_to_embed_minilm
select count(*) from public.memories
where invalidated_at is null and embedding_minilm_model is distinct from %(model)s;

-- name: memories_to_embed_among_minilm
select id, author_id, title, body from public.memories
where id = any(%(ids)s::uuid[]) and invalidated_at is null and embedding_minilm_model is distinct from %(model)s
order by id limit %(batch)s
for update skip locked;

-- name: count_memories_to_embed_among_minilm
select count(*) from public.memories
where id = any(%(ids)s::uuid[]) and invalidated_at is null and embedding_minilm_model is distinct from %(model)s;

-- name: store_memory_embedding_minilm
update public.memories set embedding_minilm = %(embedding)s::extensions.halfvec, embedding_minilm_model = %(model)s
where id = %(id)s;

-- Questions are the worker's to embed: the backfill only queues them (roi_embedder reads no question).
-- name: queue_question_embeddings
select roi.queue_question_embeddings(%(model)s, %(minilm_model)s);

-- name: record_embedding_usage
insert into public.usage_events (owner_id, purpose, model, input_tokens)
values (%(owner_id)s, 'embedding', %(model)s, %(input_tokens)s);

-- name: benchmark_memory
select public.benchmark_memory();

-- name: benchmark_schedule
select public.benchmark_schedule(%(frequency)s);

-- The views as JSON, so the local transport hands back exactly what PostgREST would send.
-- name: benchmark_tile
select to_jsonb(t) from public.roi_benchmark_tile t;

-- name: benchmark_runs
select coalesce(jsonb_agg(to_jsonb(r) order by r.started_at desc), '[]'::jsonb)
from public.roi_benchmark_runs r;

-- name: benchmark_breakdown
select coalesce(jsonb_agg(to_jsonb(b) order by b.run_id, b.dimension, b.value), '[]'::jsonb)
from public.roi_benchmark_breakdown b;

-- The CI gate's pairing of a run with its previous comparable run (zm-roi gate).
-- name: benchmark_comparison
select public.roi_benchmark_comparison(%(run_id)s::uuid);

-- The worker (connected as roi_worker): the verbs of supabase/migrations/*_roi_worker.sql.

-- name: worker_listen
listen roi_work;

-- The kinds of work, from their one list (roi.work_kinds): the worker's handlers must be these.
-- name: work_kinds
select coalesce(array_agg(k.kind order by k.kind), '{}') as kinds from roi.work_kinds k;

-- What the worker will find at start: the mode, and rows already queued that need a model (every
-- kind but embed_question, which the embedding door serves without a provider key).
-- name: worker_queue_state
select s.extractor, (select count(*) from roi.work w where w.kind <> 'embed_question') as queued
from roi.settings s;

-- name: claim_work
select work_id, kind, attempt, owner_id, run_id, probe_id, question, source_kind, source_title, source_body,
       surfaced, lease_seconds
from roi.claim_work();

-- A question's length limits, from the check constraint on roi.probes (their one home).
-- name: question_length_bounds
select min_chars, max_chars from roi.question_length_bounds();

-- name: release_work
select roi.release_work(%(work_id)s, %(attempt)s, %(failure)s);

-- name: owner_provider_key
select roi.owner_provider_key(%(owner_id)s, %(provider)s, %(passphrase)s);

-- Whether the spending caps allow the next model call (null) or which one it would cross.
-- name: budget_refusal
select roi.budget_refusal(%(owner_id)s, %(run_id)s, %(estimate)s::numeric, %(byok)s);

-- name: abort_run_for_budget
select roi.abort_run_for_budget(%(run_id)s);

-- name: defer_work
select roi.defer_work(%(work_id)s, %(attempt)s, %(why)s);

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

-- name: record_question_embedding_minilm
select roi.record_question_embedding_minilm(%(probe_id)s, %(embedding)s::extensions.vector, %(embedding_model)s);

-- name: store_provider_key
select roi.store_provider_key(%(owner_id)s, %(provider)s, %(api_key)s, %(passphrase)s);

-- judge-check --record: one calibration row, counts only (the operator's connection: no client role
-- may insert one).
-- name: record_judge_calibration
insert into roi.judge_calibrations (
  check_id, judge_fingerprint, model, case_count,
  with_memory_tp, with_memory_fp, with_memory_tn, with_memory_fn,
  without_memory_tp, without_memory_fp, without_memory_tn, without_memory_fn,
  exclusive_tp, exclusive_fp, exclusive_tn, exclusive_fn)
values (
  %(check_id)s, %(judge_fingerprint)s, %(model)s, %(case_count)s,
  %(with_memory_tp)s, %(with_memory_fp)s, %(with_memory_tn)s, %(with_memory_fn)s,
  %(without_memory_tp)s, %(without_memory_fp)s, %(without_memory_tn)s, %(without_memory_fn)s,
  %(exclusive_tp)s, %(exclusive_fp)s, %(exclusive_tn)s, %(exclusive_fn)s)
returning id, recorded_at;

-- name: data_directory
select current_setting('data_directory');

-- name: worker_queue_waiting
select count(*) filter (where w.lease_until >= now()) as leased,
       count(*) filter (where w.run_after > now() and (w.lease_until is null or w.lease_until < now())) as waiting,
       min(w.run_after) filter (where w.run_after > now() and (w.lease_until is null or w.lease_until < now()))
         as next_due,
       extract(epoch from min(w.run_after) filter (where w.run_after > now()
         and (w.lease_until is null or w.lease_until < now())) - now())::float8 as due_in_seconds
from roi.work w;

-- Every definition in schemas public and roi as (kind, name, definition), what pg_dump would show
-- apart from data: a database moved onto the baseline must read the same as one built from it
-- (zm_roi.baseline). Grants are sorted (their order records the order of GRANT statements only);
-- columns are numbered among the live ones (an old history leaves dropped columns behind). Default
-- privileges are left out: an embedded database's were granted again by every `zm-roi db up` of the
-- old compat layer, and the first migration after the baseline sets them back.
-- name: schema_outline
with ns as (select oid, nspname from pg_namespace where nspname in ('public', 'roi')),
own as (  -- objects that belong to an extension are the extension's, not ours
  select objid from pg_depend where deptype = 'e'
)
select 'schema', n.nspname, array(select unnest(n.nspacl)::text order by 1)::text
from pg_namespace n where n.nspname in ('public', 'roi')
union all
select 'relation', ns.nspname || '.' || c.relname,
       concat_ws(' | ', c.relkind, c.relpersistence, c.relrowsecurity, c.relforcerowsecurity, c.reloptions::text,
                 array(select unnest(c.relacl)::text order by 1)::text,
                 case when c.relkind in ('v', 'm') then pg_get_viewdef(c.oid) end,
                 obj_description(c.oid, 'pg_class'))
from pg_class c join ns on ns.oid = c.relnamespace
where c.relkind in ('r', 'p', 'v', 'm', 'S', 'f') and c.oid not in (select objid from own)
union all
select 'column', ns.nspname || '.' || c.relname || '.' || a.attname,
       concat_ws(' | ', row_number() over (partition by c.oid order by a.attnum), format_type(a.atttypid, a.atttypmod),
                 a.attnotnull, a.attidentity, a.attgenerated, a.attstorage, pg_get_expr(d.adbin, d.adrelid),
                 array(select unnest(a.attacl)::text order by 1)::text, col_description(c.oid, a.attnum))
from pg_attribute a
join pg_class c on c.oid = a.attrelid join ns on ns.oid = c.relnamespace
left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
where a.attnum > 0 and not a.attisdropped and c.relkind in ('r', 'p', 'v', 'm', 'f')
  and c.oid not in (select objid from own)
union all
select 'index', ns.nspname || '.' || i.relname, pg_get_indexdef(i.oid)
from pg_index x join pg_class i on i.oid = x.indexrelid join ns on ns.oid = i.relnamespace
union all
select 'constraint', ns.nspname || '.' || c.relname || '.' || k.conname, pg_get_constraintdef(k.oid)
from pg_constraint k join pg_class c on c.oid = k.conrelid join ns on ns.oid = c.relnamespace
union all
select 'trigger', ns.nspname || '.' || c.relname || '.' || t.tgname, pg_get_triggerdef(t.oid)
from pg_trigger t join pg_class c on c.oid = t.tgrelid join ns on ns.oid = c.relnamespace
where not t.tgisinternal
union all
select 'policy', ns.nspname || '.' || c.relname || '.' || p.polname,
       concat_ws(' | ', p.polcmd, p.polpermissive,
                 array(select r.rolname from unnest(p.polroles) role_id left join pg_roles r on r.oid = role_id
                       order by 1)::text,
                 pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
from pg_policy p join pg_class c on c.oid = p.polrelid join ns on ns.oid = c.relnamespace
union all
select 'function', ns.nspname || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       concat_ws(' | ', pg_get_functiondef(p.oid), array(select unnest(p.proacl)::text order by 1)::text,
                 obj_description(p.oid, 'pg_proc'))
from pg_proc p join ns on ns.oid = p.pronamespace
where p.oid not in (select objid from own)
order by 1, 2;
