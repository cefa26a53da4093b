-- Whether the configured recall takes the query embedding is recorded once, where recall_function is
-- written (zm-roi configure, or an operator's direct update), and every run follows that record.
begin;
select plan(5);

select is((select recall_takes_embedding from roi.settings), true, 'the bundled hybrid recall takes the embedding');
select roi.configure_recall('public.recall_lexical');
select is((select recall_takes_embedding from roi.settings), false,
  'configuring the lexical recall records that it takes none');
update roi.settings set recall_function = 'public.recall(text,uuid,uuid,integer,boolean,extensions.vector)';
select is((select recall_takes_embedding from roi.settings), true, 'a direct update records it too');

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
