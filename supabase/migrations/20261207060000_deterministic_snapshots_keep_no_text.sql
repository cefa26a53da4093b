-- A deterministic run's judge reads the ids of what surfaced, never the text: its recall snapshots keep
-- the ids in rank order and no text (`surfaced` null), so a call no longer copies ~110 kB of memory
-- text into roi.recalls that nobody reads, nor writes it to the WAL (docs/decisions/0045). An LLM run's
-- snapshots keep the text its judge reads, as before; recorded snapshots are not touched.

alter table roi.recalls alter column surfaced drop not null;

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
  bundled boolean := roi.checked_recall_function()
    = 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)'::regprocedure;
  snapshots roi.recalls[];
  surfaced_sources uuid[];
  keeps_text boolean := mode <> 'deterministic';
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
  -- Two statements, one per kind of recall function, each with a plan of its own (one statement
  -- for both was planned afresh on every call, ~0.2 ms). `keeps_text` filters the text's aggregate
  -- too: one inside CASE is computed all the same.
  if bundled then
    select coalesce(array_agg(row(null, x.probe_id, x.owner_id, x.surfaced_ids, x.surfaced, now())::roi.recalls), '{}'),
           coalesce(array_agg(x.memory_id) filter (where x.memory_id = any (x.surfaced_ids)), '{}')
    into snapshots, surfaced_sources
    from (
      select p.id as probe_id, p.owner_id, p.memory_id,
             coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}') as surfaced_ids,
             case when keeps_text then coalesce(jsonb_agg(jsonb_build_object(
               'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
               'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
               filter (where keeps_text and r.memory_id is not null), '[]') end as surfaced
      from roi.probes p
      left join lateral public.recall(p.question, p.pin_project_id, p.pin_team_id, 10, p.source_scope = 'personal',
                           case when first_leg and p.question_embedding_model = question_model
                                then p.question_embedding end,
                           case when minilm_leg and p.question_embedding_minilm_model = question_minilm_model
                                then p.question_embedding_minilm end)
        with ordinality as r (memory_id, kind, scope, title, body, score, rank) on true
      where p.owner_id = (select auth.uid()) and p.state = 'active'
      group by p.id, p.owner_id, p.memory_id
    ) x;
  else
    select coalesce(array_agg(row(null, x.probe_id, x.owner_id, x.surfaced_ids, x.surfaced, now())::roi.recalls), '{}'),
           coalesce(array_agg(x.memory_id) filter (where x.memory_id = any (x.surfaced_ids)), '{}')
    into snapshots, surfaced_sources
    from (
      select p.id as probe_id, p.owner_id, p.memory_id,
             coalesce(array_agg(r.memory_id order by r.rank) filter (where r.memory_id is not null), '{}') as surfaced_ids,
             case when keeps_text then coalesce(jsonb_agg(jsonb_build_object(
               'rank', r.rank, 'memory_id', r.memory_id, 'kind', r.kind, 'scope', r.scope,
               'title', r.title, 'body', r.body, 'score', r.score) order by r.rank)
               filter (where keeps_text and r.memory_id is not null), '[]') end as surfaced
      from roi.probes p
      left join lateral roi.configured_recall(p.question, p.pin_project_id, p.pin_team_id, 10, p.source_scope = 'personal',
                                      case when first_leg and p.question_embedding_model = question_model
                                           then p.question_embedding end,
                                      case when minilm_leg and p.question_embedding_minilm_model = question_minilm_model
                                           then p.question_embedding_minilm end) r on true
      where p.owner_id = (select auth.uid()) and p.state = 'active'
      group by p.id, p.owner_id, p.memory_id
    ) x;
  end if;
  -- A source the bundled recall returned is live and visible to the caller (its contract); another
  -- function's results prove nothing, and every source is read.
  if roi.retire_unreachable_probes(array['active'], case when bundled then surfaced_sources else '{}' end) > 0 then
    return null;
  end if;

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
  select new_run, n.probe_id, n.owner_id, n.surfaced_ids, n.surfaced from unnest(snapshots) n;

  perform roi.note_recall_outcomes(new_run);

  if mode = 'deterministic' then
    judged := roi.write_verdicts(new_run, null, 'deterministic');
    -- Every probe of the run has its verdict: the run is complete (roi.close_run_if_done's test,
    -- without its lock, its recount or a judging queue to clear, none of which a run nobody else
    -- can see yet needs).
    if judged >= probe_total then
      insert into roi.run_closures (run_id, owner_id, reason) values (new_run, (select auth.uid()), 'complete');
    else
      perform roi.close_run_if_done(new_run);
    end if;
  else
    -- One judgment per recall, then the run's checks of the judge.
    perform roi.enqueue('judge', (select auth.uid()),
                        array(select rc.probe_id from roi.recalls rc where rc.run_id = new_run), new_run);
    perform roi.queue_judge_checks(new_run);
  end if;
  return jsonb_build_object('status', 'started', 'run_id', new_run, 'probes', probe_total)
    || case when left_out <> '' then jsonb_build_object('hint', format(
         'Semantic recall by %s was left out of this run: some of your memories hold vectors of another '
         'embedding model than the questions'', and vectors of two models cannot be compared. Run `zm-roi '
         'embed` to re-embed them.', left_out)) else '{}' end;
end
$$;
