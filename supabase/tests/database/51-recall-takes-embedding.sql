-- How many query embeddings the configured recall takes is recorded once, where recall_function is
-- written (zm-roi configure, or an operator's direct update), and every run follows that record.
begin;
select plan(7);

select is((select recall_embeddings from roi.settings), 2::smallint,
  'the bundled recall takes both embeddings (its three legs)');
select roi.configure_recall('public.recall_lexical');
select is((select recall_embeddings from roi.settings), 0::smallint,
  'configuring the lexical recall records that it takes none');
create function public.one_embedding_recall(query text, project_id uuid, team_id uuid, match_count integer,
  personal_only boolean, query_embedding extensions.vector)
  returns table (memory_id uuid, kind text, scope text, title text, body text, score real)
  language sql stable security invoker set search_path = ''
as $$ select * from public.recall(query, project_id, team_id, match_count, personal_only, query_embedding) $$;
grant execute on function public.one_embedding_recall(text, uuid, uuid, integer, boolean, extensions.vector)
  to authenticated;
select is(roi.configure_recall('public.one_embedding_recall'),
  'public.one_embedding_recall(text,uuid,uuid,integer,boolean,extensions.vector)',
  'a recall with today''s six arguments is still accepted');
select is((select recall_embeddings from roi.settings), 1::smallint, 'and records that it takes one embedding');
update roi.settings set recall_function = 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector,extensions.vector)';
select is((select recall_embeddings from roi.settings), 2::smallint, 'a direct update records it too');

-- A run follows the record: the lexical recall is called without the embedding, and the run says
-- its questions' embedding model played no part.
update roi.settings set extractor = 'deterministic';
select roi.configure_recall('public.recall_lexical');
select tests.create_user('flag@recall.test');
insert into public.memories (author_id, scope, kind, title, body)
values (tests.user_id('flag@recall.test'), 'personal', 'decision', 'Flag fact', 'flag body');
select tests.authenticate_as('flag@recall.test');
select is(public.benchmark_memory() ->> 'status', 'started', 'a run through the lexical recall starts');
select results_eq($$select recall_function, embedding_model from public.roi_benchmark_runs$$,
  $$values ('public.recall_lexical(text,uuid,uuid,integer,boolean)', null::text)$$,
  'and records no embedding model');
select tests.clear_authentication();

select * from finish();
rollback;
