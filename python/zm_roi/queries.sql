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
  (author_id, scope, project_id, team_id, kind, title, body, created_at, invalidated_at)
values
  (%(author_id)s, %(scope)s, %(project_id)s, %(team_id)s, %(kind)s, %(title)s, %(body)s,
   coalesce(%(created_at)s, now()), %(invalidated_at)s);

-- name: user_id_by_email
select id from auth.users where email = %(email)s;

-- name: act_as_user
select set_config('role', %(role)s, true),
       set_config('request.jwt.claims', %(claims)s, true),
       set_config('request.method', 'POST', true),
       set_config('request.path', %(path)s, true);

-- name: recall
select memory_id, kind, scope, title, body, score
from public.recall(%(query)s, %(project_id)s, %(team_id)s, %(match_count)s);

-- name: project_id_by_name
select id from public.projects where name = %(name)s;

-- name: set_extractor
update roi.settings set extractor = %(extractor)s returning extractor;

-- name: get_extractor
select extractor from roi.settings;

-- name: user_exists
select exists (select from auth.users where id = %(user_id)s);

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
                        %(input_tokens)s, %(output_tokens)s, %(byok)s, %(cost_usd)s::numeric);

-- name: record_question
select roi.record_question(%(probe_id)s, %(question)s);

-- name: release_generation
select roi.release_generation(%(probe_id)s, %(attempt)s, %(failure)s);

-- name: record_verdict
select roi.record_verdict(%(run_id)s, %(probe_id)s, %(with_memory)s, %(without_memory)s,
                          %(confidence)s::real, %(reason)s);

-- name: release_judgment
select roi.release_judgment(%(run_id)s, %(probe_id)s, %(attempt)s, %(failure)s);

-- name: claim_closed_book
select run_id, probe_id, owner_id, attempt, question, source_kind, source_title, source_body
from roi.claim_closed_book();

-- name: record_closed_book
select roi.record_closed_book(%(run_id)s, %(probe_id)s, %(correct)s);

-- name: release_closed_book
select roi.release_closed_book(%(run_id)s, %(probe_id)s, %(attempt)s, %(failure)s);

-- name: store_provider_key
select roi.store_provider_key(%(owner_id)s, %(provider)s, %(api_key)s, %(passphrase)s);
