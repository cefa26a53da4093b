-- public.recall(): the pins of the contract (project + personal, team + personal, neither =
-- everything visible), invalidation, ranking (the title weighted like the body) and hostile query text.
begin;
select plan(15);

select tests.create_user('alice@recall.test');
select tests.create_user('dave@recall.test');
insert into public.teams (id, name) values ('00000000-0000-0000-0000-00000000c0a1', 'recall-core');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-00000000c0b1', 'recall-atlas'),
  ('00000000-0000-0000-0000-00000000c0b2', 'recall-hermes'),
  ('00000000-0000-0000-0000-00000000c0b3', 'recall-secret');
insert into public.team_members values ('00000000-0000-0000-0000-00000000c0a1', tests.user_id('alice@recall.test'));
insert into public.project_members values
  ('00000000-0000-0000-0000-00000000c0b1', tests.user_id('alice@recall.test')),
  ('00000000-0000-0000-0000-00000000c0b2', tests.user_id('alice@recall.test')),
  ('00000000-0000-0000-0000-00000000c0b3', tests.user_id('dave@recall.test'));
insert into public.memories (author_id, scope, project_id, team_id, kind, title, body, invalidated_at) values
  (tests.user_id('alice@recall.test'), 'personal', null, null, 'gotcha', 'personal deploy note', 'I deploy after lunch', null),
  (tests.user_id('alice@recall.test'), 'project', '00000000-0000-0000-0000-00000000c0b1', null, 'decision', 'atlas deploy strategy', 'blue green deploy', null),
  (tests.user_id('alice@recall.test'), 'project', '00000000-0000-0000-0000-00000000c0b1', null, 'decision', 'atlas old deploy', 'rsync deploy', now()),
  (tests.user_id('alice@recall.test'), 'project', '00000000-0000-0000-0000-00000000c0b2', null, 'decision', 'hermes deploy strategy', 'canary deploy', null),
  (tests.user_id('alice@recall.test'), 'team', null, '00000000-0000-0000-0000-00000000c0a1', 'convention', 'core deploy approvals', 'two reviewers per deploy', null),
  (tests.user_id('dave@recall.test'), 'project', '00000000-0000-0000-0000-00000000c0b3', null, 'decision', 'secret deploy', 'dave only deploy', null),
  (tests.user_id('dave@recall.test'), 'personal', null, null, 'decision', 'dave personal deploy', 'dave only deploy', null);
-- The same three words, 'zephyr' in the title of one and in the body of the other (the newer).
insert into public.memories (author_id, scope, project_id, kind, title, body, created_at) values
  (tests.user_id('alice@recall.test'), 'project', '00000000-0000-0000-0000-00000000c0b2', 'decision', 'zephyr',
   'quartz lattice', '2026-01-01'),
  (tests.user_id('alice@recall.test'), 'project', '00000000-0000-0000-0000-00000000c0b2', 'decision', 'quartz',
   'zephyr lattice', '2026-01-02');

select tests.authenticate_as('alice@recall.test');

select results_eq(
  $$select title from public.recall('deploy', project_id => '00000000-0000-0000-0000-00000000c0b1') order by title$$,
  array['atlas deploy strategy', 'personal deploy note'],
  'a project pin reads that project plus the caller''s personal layer');
select results_eq(
  $$select title from public.recall('deploy', team_id => '00000000-0000-0000-0000-00000000c0a1') order by title$$,
  array['core deploy approvals', 'personal deploy note'],
  'a team pin reads that team plus the caller''s personal layer');
select results_eq(
  $$select title from public.recall('deploy') order by title$$,
  array['atlas deploy strategy', 'core deploy approvals', 'hermes deploy strategy', 'personal deploy note'],
  'no pin reads everything the caller can see');
select results_eq(
  $$select title from public.recall('deploy', personal_only => true)$$,
  array['personal deploy note'],
  'the personal pin reads the caller''s personal layer alone');
select is_empty(
  $$select 1 from public.recall('rsync deploy') where title = 'atlas old deploy'$$,
  'an invalidated memory never surfaces');
select results_eq(
  $$select title from public.recall('deploy', project_id => '00000000-0000-0000-0000-00000000c0b3')$$,
  array['personal deploy note'],
  'pinning to a project the caller is not in yields only their personal layer');
select is_empty(
  $$select 1 from public.recall('dave only deploy') where title like '%dave%' or title like 'secret%'$$,
  'another user''s personal and project memories never surface');
select is(
  (select title from public.recall('canary deploy strategy') limit 1), 'hermes deploy strategy',
  'the best match comes first');
select ok(
  (select bool_and(score > 0) from public.recall('deploy')), 'every result carries a positive score');
select is((select count(*)::int from public.recall('deploy', match_count => 2)), 2, 'match_count limits the results');
select results_eq(
  $$select count(*)::int, count(distinct score)::int
    from public.recall_lexical('zephyr', '00000000-0000-0000-0000-00000000c0b2')$$,
  $$values (2, 1)$$,
  'the lexical recall weights a title word like a body word: the two memories score the same');
select is(
  (select title from public.recall('zephyr', '00000000-0000-0000-0000-00000000c0b2',
                                   query_embedding => array_fill(0.05::real, array[384])::extensions.vector)
   limit 1),
  'quartz',
  'the hybrid recall''s lexical leg weights the title like the body too: on a tie the newer memory comes first');
select lives_ok(
  $$select * from public.recall(E'\' " \\ & | ! : * ( ) < -> % <-> !! &&')$$,
  'full-text metacharacters in the question are plain text, not syntax');
select is_empty($$select * from public.recall('')$$, 'an empty question recalls nothing');
select is_empty($$select * from public.recall(null)$$, 'a null question recalls nothing');

select * from finish();
rollback;
