-- Issue 33: a changed embedding model is detected and recall uses only vectors of the query's model.
-- The CLI's recall and import already refuse to compare vectors of two models; the benchmark did not:
-- roi.start_run passed each question's vectors to the recall, which compared them with whatever model
-- wrote the memories'. Now a semantic leg is left out of a run (null vectors, null model on the run, a
-- hint in benchmark_memory()'s answer to run `zm-roi embed`) when a live memory the caller sees holds a
-- vector of that leg from another model; a probe whose question another model embedded passes null
-- for that leg. The check is one EXISTS per leg and run, read from a partial index of each leg's
-- vectors by layer and model, so it reads only the caller's rows of other models.

create index memories_embedding_model_idx on public.memories
  ((case scope when 'personal' then author_id when 'project' then project_id else team_id end), embedding_model)
  where invalidated_at is null and embedding is not null;
create index memories_embedding_minilm_model_idx on public.memories
  ((case scope when 'personal' then author_id when 'project' then project_id else team_id end), embedding_minilm_model)
  where invalidated_at is null and embedding_minilm is not null;

-- Recall every active probe as the caller under its pin, through the configured recall, snapshot
-- what surfaced, and either record strict verdicts at once (deterministic) or queue one judgment per
-- probe (LLM). The run records which recall produced it and its questions' embedding model. Only
-- vectors of the question's model are compared (see the schema file, 32_roi_runs.sql).
create or replace function roi.start_run(mode text) returns jsonb
  language plpgsql volatile security invoker set search_path = ''
as $$
declare
  new_run uuid;
  run_started timestamptz;
  probe_total integer;
  question_model text;
  question_minilm_model text;
  legs smallint := (select s.recall_embeddings from roi.settings s);
  first_leg boolean;
  minilm_leg boolean;
  layers uuid[];
  left_out text;
  judged integer;
begin
  select count(*), mode() within group (order by p.question_embedding_model),
         mode() within group (order by p.question_embedding_minilm_model)
  into probe_total, question_model, question_minilm_model
  from roi.probes p where p.owner_id = (select auth.uid()) and p.state = 'active';
  -- The layers the caller reads (the memories' read policy's), each read as a range of the index
  -- by layer and model: `<`, `>` and null, not `is distinct from`, which no index serves.
  layers := array[(select auth.uid())] || array(select public.caller_project_ids())
            || array(select public.caller_team_ids());
  first_leg := legs > 0 and question_model is not null and not exists (
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model < question_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model > question_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding is not null and m.embedding_model is null);
  minilm_leg := legs > 1 and question_minilm_model is not null and not exists (
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model < question_minilm_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model > question_minilm_model
    union all
    select from public.memories m
    where (case m.scope when 'personal' then m.author_id when 'project' then m.project_id else m.team_id end) = any (layers)
      and m.invalidated_at is null and m.embedding_minilm is not null and m.embedding_minilm_model is null);
  left_out := concat_ws(' and ',
    case when legs > 0 and question_model is not null and not first_leg then question_model end,
    case when legs > 1 and question_minilm_model is not null and not minilm_leg then question_minilm_model end);
  -- clock_timestamp(), not now(): runs started in one transaction still order by when they began.
  insert into roi.runs (owner_id, mode, probe_count, started_at, recall_function, embedding_model,
                        embedding_minilm_model)
  values ((select auth.uid()), mode, probe_total, clock_timestamp(),
          (select s.recall_function from roi.settings s),
          case when first_leg then question_model end,
          case when minilm_leg then question_minilm_model end)
  returning id, started_at into new_run, run_started;
  if mode <> 'deterministic' then
    insert into roi.pending_runs (run_id, owner_id, started_at) values (new_run, (select auth.uid()), run_started);
  end if;

  insert into roi.recalls (run_id, probe_id, owner_id, surfaced_ids, surfaced)
  select new_run, p.id, p.owner_id,
         coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}'),
         coalesce(jsonb_agg(jsonb_build_object(
           'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
           'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
           filter (where r.memory_id is not null), '[]')
  from roi.probes p
  left join lateral roi.configured_recall(p.question, p.pin_project_id, p.pin_team_id, 10,
                                          p.source_scope = 'personal',
                                          case when first_leg and p.question_embedding_model = question_model
                                               then p.question_embedding end,
                                          case when minilm_leg and p.question_embedding_minilm_model = question_minilm_model
                                               then p.question_embedding_minilm end) r on true
  where p.owner_id = (select auth.uid()) and p.state = 'active'
  group by p.id, p.owner_id;

  update roi.probes p set runs_served = p.runs_served + 1
  where p.owner_id = (select auth.uid()) and p.state = 'active';

  if mode = 'deterministic' then
    insert into roi.verdicts (run_id, probe_id, owner_id, memory_id, with_memory, without_memory, judged_by)
    select rc.run_id, rc.probe_id, rc.owner_id, p.memory_id, p.memory_id = any (rc.surfaced_ids), false,
           'deterministic'
    from roi.recalls rc join roi.probes p on p.id = rc.probe_id
    where rc.run_id = new_run;
    get diagnostics judged = row_count;
    -- Every probe of the run has its verdict: the run is complete (roi.close_run_if_done's test,
    -- without its lock, its recount or a judging queue to clear, none of which a run nobody else
    -- can see yet needs).
    if judged >= probe_total then
      insert into roi.run_closures (run_id, owner_id, reason) values (new_run, (select auth.uid()), 'complete');
    else
      perform roi.close_run_if_done(new_run);
    end if;
  else
    insert into roi.work (kind, run_id, probe_id, owner_id)
    select 'judge', rc.run_id, rc.probe_id, rc.owner_id from roi.recalls rc where rc.run_id = new_run;
    perform pg_notify('roi_work', 'judge');
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total)
    || case when left_out <> '' then jsonb_build_object('hint', format(
         'Semantic recall by %s was left out of this run: some of your memories hold vectors of another '
         'embedding model than the questions'', and vectors of two models cannot be compared. Run `zm-roi '
         'embed` to re-embed them.', left_out)) else '{}' end;
end
$$;
