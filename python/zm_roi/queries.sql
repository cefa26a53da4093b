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

-- name: insert_memory
insert into public.memories
  (author_id, scope, project_id, team_id, kind, title, body, created_at, invalidated_at, embedding,
   embedding_model)
values
  (%(author_id)s, %(scope)s, %(project_id)s, %(team_id)s, %(kind)s, %(title)s, %(body)s,
   coalesce(%(created_at)s, now()), %(invalidated_at)s, %(embedding)s::extensions.vector, %(embedding_model)s);

-- name: user_id_by_email
select id from auth.users where email = %(email)s;

-- name: act_as_user
select set_config('role', %(role)s, true),
       set_config('request.jwt.claims', %(claims)s, true),
       set_config('request.method', 'POST', true),
       set_config('request.path', %(path)s, true);

-- name: recall
select memory_id, kind, scope, title, body, score
from roi.configured_recall(%(query)s, %(project_id)s, %(team_id)s, %(match_count)s, false,
                           %(embedding)s::extensions.vector);

-- name: project_id_by_name
select id from public.projects where name = %(name)s;

-- name: set_extractor
update roi.settings set extractor = %(extractor)s returning extractor;

-- name: get_extractor
select extractor from roi.settings;

-- name: configure_recall
select roi.configure_recall(%(name)s);

-- name: get_recall_function
select recall_function from roi.settings;

-- Embeddings (zm_roi.backfill, connected as roi_embedder, or the importer as the importing operator).

-- name: memories_to_embed
select id, author_id, title, body from public.memories
where invalidated_at is null and embedding_model is distinct from %(model)s
order by id limit %(batch)s
for update skip locked;

-- name: store_memory_embedding
update public.memories set embedding = %(embedding)s::extensions.vector, embedding_model = %(model)s
where id = %(id)s;

-- name: questions_to_embed
select id, owner_id, question from roi.probes
where state = 'active' and question_embedding_model is distinct from %(model)s
order by id limit %(batch)s
for update skip locked;

-- name: store_question_embedding
update roi.probes set question_embedding = %(embedding)s::extensions.vector, question_embedding_model = %(model)s
where id = %(id)s;

-- name: record_embedding_usage
insert into public.usage_events (owner_id, purpose, model, probe_id, input_tokens)
values (%(owner_id)s, 'embedding', %(model)s, %(probe_id)s, %(input_tokens)s);

-- name: user_exists
select exists (select from auth.users where id = %(user_id)s);

-- name: benchmark_memory
select public.benchmark_memory();

-- The two views as JSON, so the local transport hands back exactly what PostgREST would send.
-- name: benchmark_tile
select to_jsonb(t) from public.roi_benchmark_tile t;

-- name: benchmark_runs
select coalesce(jsonb_agg(to_jsonb(r) order by r.started_at desc), '[]'::jsonb)
from public.roi_benchmark_runs r;

-- The worker (connected as roi_worker): the verbs of supabase/migrations/*_roi_worker.sql.

-- name: worker_listen
listen roi_work;

-- name: claim_judgment
select run_id, probe_id, owner_id, attempt, question, source_kind, source_title, source_body, surfaced
from roi.claim_judgment();

-- name: claim_generation
select probe_id, owner_id, attempt, source_kind, source_title, source_body
from roi.claim_generation();

-- name: owner_provider_key
select roi.owner_provider_key(%(owner_id)s, %(provider)s, %(passphrase)s);

-- name: record_usage
select roi.record_usage(%(owner_id)s, %(purpose)s, %(model)s, %(run_id)s, %(probe_id)s,
                        %(input_tokens)s, %(output_tokens)s, %(byok)s);

-- name: record_question
select roi.record_question(%(probe_id)s, %(question)s);

-- name: record_question_embedded
select roi.record_question(%(probe_id)s, %(question)s, %(embedding)s::extensions.vector, %(embedding_model)s);

-- name: release_generation
select roi.release_generation(%(probe_id)s, %(attempt)s, %(failure)s);

-- name: record_verdict
select roi.record_verdict(%(run_id)s, %(probe_id)s, %(with_memory)s, %(without_memory)s,
                          %(confidence)s::real, %(reason)s);

-- name: release_judgment
select roi.release_judgment(%(run_id)s, %(probe_id)s, %(attempt)s, %(failure)s);

-- name: store_provider_key
select roi.store_provider_key(%(owner_id)s, %(provider)s, %(api_key)s, %(passphrase)s);
