-- 20261201190000_recall_reads_impact_ordered_postings: recall's lexical candidates come from
-- public.memory_postings. Row-level security reads a posting as it reads its memory (another user's
-- postings and memories never surface, through recall or a direct select), the triggers keep the
-- postings current as the writer (insert, edit, invalidation, delete), the impacts sum to ts_rank,
-- a forged posting cannot pull a memory into a pin it is not in, and the write policies hold each
-- writer to their own memories' postings (a posting carries no author: the policies ask its memory).
-- Rows of every layer kind (personal, project, team), an outsider and a colleague. The read policy is
-- opened once (a savepoint) to show the cross-user check sees the break.
begin;
select plan(41);

select tests.create_user('author@postings.test') as author_id \gset
select tests.create_user('outsider@postings.test') as outsider_id \gset
select tests.create_user('colleague@postings.test') as colleague_id \gset
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000f0b01', 'postings-atlas'),
  ('00000000-0000-0000-0000-0000000f0b02', 'postings-foreign'),
  ('00000000-0000-0000-0000-0000000f0b03', 'postings-side');
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000f0b01', tests.user_id('author@postings.test')),
  ('00000000-0000-0000-0000-0000000f0b03', tests.user_id('author@postings.test')),
  ('00000000-0000-0000-0000-0000000f0b02', tests.user_id('outsider@postings.test')),
  ('00000000-0000-0000-0000-0000000f0b01', tests.user_id('colleague@postings.test'));
insert into public.teams (id, name) values ('00000000-0000-0000-0000-0000000f0b11', 'postings-team');
insert into public.team_members values
  ('00000000-0000-0000-0000-0000000f0b11', tests.user_id('author@postings.test')),
  ('00000000-0000-0000-0000-0000000f0b11', tests.user_id('colleague@postings.test'));

-- Written as their authors through the Data API's role: the triggers post them as the writer.
select tests.authenticate_as('author@postings.test');
select lives_ok(
  $$insert into public.memories (scope, project_id, kind, title, body) values
      ('project', '00000000-0000-0000-0000-0000000f0b01', 'decision',
       'Zephyr queue drain', 'We drain the zephyr queue before every deploy.'),
      ('personal', null, 'gotcha',
       'Zephyr laptop', 'The zephyr client needs the VPN.'),
      ('project', '00000000-0000-0000-0000-0000000f0b03', 'convention',
       'Zephyr side note', 'The side project never deploys zephyr.')$$,
  'an author writes memories with the Data API''s role, postings included');
insert into public.memories (scope, team_id, kind, title, body) values
  ('team', '00000000-0000-0000-0000-0000000f0b11', 'convention',
   'Pager rota', 'The team rotates the pager weekly.');
select tests.clear_authentication();
select tests.authenticate_as('outsider@postings.test');
insert into public.memories (scope, project_id, kind, title, body) values
  ('project', '00000000-0000-0000-0000-0000000f0b02', 'decision',
   'Zephyr zephyr', 'Zephyr zephyr zephyr queue drain deploy.'),
  ('personal', null, 'decision',
   'Zephyr secret', 'Zephyr queue drain deploy, outsider only.');
select tests.clear_authentication();
-- Each writer's memories, read here as the superuser: a posting names only its memory.
select array_agg(id)::text as author_memories from public.memories where author_id = :'author_id' \gset
select array_agg(id)::text as outsider_memories from public.memories where author_id = :'outsider_id' \gset
select id as team_memory from public.memories where title = 'Pager rota' \gset
select id as personal_memory from public.memories where title = 'Zephyr laptop' \gset

select is(
  (select array_agg(distinct p.layer_kind::text order by p.layer_kind::text) from public.memory_postings p
   where p.memory_id = any (:'author_memories'::uuid[])),
  array['p', 't', 'u'], 'the author''s memories are posted in layers of every kind: project, team, personal');
select is(
  (select count(*)::integer from public.memory_postings p join public.memories m on m.id = p.memory_id
   where m.title = 'Zephyr queue drain'),
  (select length(search) from public.memories where title = 'Zephyr queue drain'),
  'a new memory has one posting per lexeme of its search vector');
select ok(
  (select abs(sum(p.impact) / 3 - ts_rank('{0.1, 0.2, 0.4, 0.4}', m.search, public.recall_query('zephyr queue deploy'), 1)) < 1e-6
   from public.memory_postings p join public.memories m on m.id = p.memory_id
   where m.title = 'Zephyr queue drain' and p.lexeme in ('zephyr', 'queue', 'deploy')
   group by m.search),
  'the impacts of a question''s lexemes sum to its ts_rank times their number');

-- ---------------------------------------------------------------------------------------------
-- Another user's postings and memories never surface.
-- ---------------------------------------------------------------------------------------------
select tests.authenticate_as('author@postings.test');
select is(
  (select count(*)::integer from public.memory_postings where memory_id = any (:'outsider_memories'::uuid[])),
  0, 'the author reads none of the outsider''s postings');
select ok(
  (select count(*) from public.memory_postings where memory_id = any (:'author_memories'::uuid[])) > 0,
  'the author reads their own postings (the check above can see rows)');
select is_empty(
  $$select 1 from public.recall_lexical('zephyr queue drain deploy', match_count => 100) r
    join public.memories m on m.id = r.memory_id where m.author_id <> auth.uid()$$,
  'unpinned lexical recall returns none of the outsider''s memories, though they hold every word');
select is_empty(
  $$select 1 from public.recall('zephyr queue drain deploy', match_count => 100,
                                query_embedding => array_fill(0.05::real, array[384])::extensions.vector) r
    join public.memories m on m.id = r.memory_id where m.author_id <> auth.uid()$$,
  'unpinned hybrid recall returns none of them either');
select is_empty(
  $$select 1 from public.recall_lexical('zephyr', project_id => '00000000-0000-0000-0000-0000000f0b02') where scope <> 'personal'$$,
  'pinning the outsider''s project returns nothing of it');
select set_eq(
  $$select title from public.recall_lexical('zephyr', project_id => '00000000-0000-0000-0000-0000000f0b01')$$,
  array['Zephyr queue drain', 'Zephyr laptop'],
  'a project pin returns the project''s and the caller''s personal matches, through the postings');
select throws_ok(
  $$insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
    select id, '00000000-0000-0000-0000-0000000f0b02', 1, 'p', 'zephyr'
    from public.memories where title = 'Zephyr queue drain'$$,
  '42501', null, 'no one posts into a layer they are not in');

-- The author cannot post their side project's memory into their other project: a posting sits in its
-- memory's own layer.
select throws_ok(
  $$insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
    select id, '00000000-0000-0000-0000-0000000f0b01', 1, 'p', 'nimbus'
    from public.memories where title = 'Zephyr side note'$$,
  '42501', null, 'an author posts a memory only in its own layer, not in another layer of theirs');
-- Such a posting forged anyway (by the table's owner) cannot pull the memory into the atlas pin: the
-- ranking re-checks the memory's layer.
select tests.clear_authentication();
insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
select id, '00000000-0000-0000-0000-0000000f0b01', 1, 'p', 'nimbus'
from public.memories where title = 'Zephyr side note';
select tests.authenticate_as('author@postings.test');
select is_empty(
  $$select 1 from public.recall_lexical('zephyr nimbus', project_id => '00000000-0000-0000-0000-0000000f0b01')
    where title = 'Zephyr side note'$$,
  'a forged posting does not pull another layer''s memory into the pin');
select tests.clear_authentication();

select tests.authenticate_as('outsider@postings.test');
delete from public.memory_postings where memory_id = any (:'author_memories'::uuid[]);
select is(
  (select count(*)::integer from public.memory_postings
   where memory_id = any (array[:'team_memory', :'personal_memory']::uuid[])),
  0, 'the outsider reads none of the author''s team or personal postings');
select tests.clear_authentication();
select ok(
  (select count(*) from public.memory_postings where memory_id = any (:'author_memories'::uuid[])) > 0,
  'the outsider deletes none of the author''s postings');

-- A colleague in the author's project reads the project's postings (the same audience as its memories),
-- but deletes none of the author's and posts none in the author's name: the delete and insert policies
-- hold them to their own (the outsider above cannot even see them, so only a colleague tests these).
select tests.authenticate_as('colleague@postings.test');
select ok(
  (select count(*) from public.memory_postings
   where memory_id = any (:'author_memories'::uuid[]) and layer_id = '00000000-0000-0000-0000-0000000f0b01') > 0,
  'a colleague reads the author''s postings in their shared project');
select ok(
  (select count(*) from public.memory_postings where memory_id = :'team_memory') > 0,
  'a colleague reads the author''s postings in their shared team');
select is(
  (select count(*)::integer from public.memory_postings where memory_id = :'personal_memory'),
  0, 'a colleague reads none of the author''s personal postings');
select is(
  (select count(*)::integer from public.memory_postings where memory_id = any (:'author_memories'::uuid[])
     and layer_kind = 'u'),
  0, 'nor any personal posting of the author''s at all');
delete from public.memory_postings where memory_id = any (:'author_memories'::uuid[]);
select throws_ok(
  $$insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
    select id, '00000000-0000-0000-0000-0000000f0b01', 1, 'p', 'forged'
    from public.memories where title = 'Zephyr queue drain'$$,
  '42501', null, 'a colleague cannot post for the author''s project memory');
select throws_ok(
  $$insert into public.memory_postings (memory_id, layer_id, impact, layer_kind, lexeme)
    select id, '00000000-0000-0000-0000-0000000f0b11', 1, 't', 'forged'
    from public.memories where title = 'Pager rota'$$,
  '42501', null, 'a colleague cannot post for the author''s team memory');
select tests.clear_authentication();
select is(
  (select count(*)::integer from public.memory_postings where memory_id = :'team_memory'),
  (select length(search) from public.memories where title = 'Pager rota'),
  'the colleague''s delete took none of the author''s team postings');
select is(
  (select count(*)::integer from public.memory_postings p join public.memories m on m.id = p.memory_id
   where m.title = 'Zephyr queue drain'),
  (select length(search) from public.memories where title = 'Zephyr queue drain'),
  'the colleague''s delete took none of the author''s postings');

-- ---------------------------------------------------------------------------------------------
-- The read policy opened once: the outsider then reads the author's postings, and the check says so.
-- ---------------------------------------------------------------------------------------------
savepoint opened;
create policy "Broken: postings for everyone" on public.memory_postings for select to authenticated using (true);
select tests.authenticate_as('outsider@postings.test');
select count(*) as broken_reads from public.memory_postings where memory_id = any (:'author_memories'::uuid[]) \gset
select tests.clear_authentication();
rollback to savepoint opened;
select ok(:broken_reads > 0, 'with the read policy opened, the outsider would read the author''s postings');
select tests.authenticate_as('outsider@postings.test');
select is(
  (select count(*)::integer from public.memory_postings where memory_id = any (:'author_memories'::uuid[])),
  0, 'with the policy restored, the outsider reads none of them');
select tests.clear_authentication();

-- ---------------------------------------------------------------------------------------------
-- The postings follow every write: an edit, an invalidation, a delete.
-- ---------------------------------------------------------------------------------------------
select tests.authenticate_as('author@postings.test');
update public.memories set body = 'We drain the nimbus queue before every deploy.' where title = 'Zephyr queue drain';
select is(
  (select array_agg(p.lexeme order by p.lexeme) from public.memory_postings p join public.memories m on m.id = p.memory_id
   where m.title = 'Zephyr queue drain' and p.lexeme in ('zephyr', 'nimbus')),
  array['nimbus', 'zephyr'], 'an edited body posts its new words (zephyr stays: it is in the title)');
update public.memories set title = 'Queue drain' where title = 'Zephyr queue drain';
select is(
  (select array_agg(p.lexeme order by p.lexeme) from public.memory_postings p join public.memories m on m.id = p.memory_id
   where m.title = 'Queue drain' and p.lexeme in ('zephyr', 'nimbus')),
  array['nimbus'], 'an edited title withdraws the words it lost');
select set_eq(
  $$select title from public.recall_lexical('nimbus', project_id => '00000000-0000-0000-0000-0000000f0b01')$$,
  array['Queue drain'], 'recall finds the memory by its new words');
update public.memories set invalidated_at = now() where title = 'Queue drain';
select is(
  (select count(*)::integer from public.memory_postings p join public.memories m on m.id = p.memory_id
   where m.title = 'Queue drain'),
  0, 'an invalidated memory has no postings');
update public.memories set invalidated_at = null where title = 'Queue drain';
select ok(
  (select count(*) from public.memory_postings p join public.memories m on m.id = p.memory_id
   where m.title = 'Queue drain') > 0,
  'a memory made live again is posted again');
create temporary table gone on commit drop as select id from public.memories where title = 'Zephyr laptop';
delete from public.memories where title = 'Zephyr laptop';
select tests.clear_authentication();
select is(
  (select count(*)::integer from public.memory_postings where memory_id in (select id from gone)),
  0, 'a deleted memory''s postings go with it');

-- A memory's postings are found by one index keyed on memory_id alone, which b-tree deduplication
-- stores as one key and a list of heap pointers: the foreign key's cascade and the repost trigger's
-- delete read it (no primary key: docs/decisions/0027-compact-postings.md).
select is(
  (select array_agg(i.indexrelid::regclass::text order by 1) from pg_index i
   where i.indrelid = 'public.memory_postings'::regclass
     and i.indnatts = 1 and i.indkey[0] = (select attnum from pg_attribute
                                          where attrelid = 'public.memory_postings'::regclass and attname = 'memory_id')),
  array['memory_postings_memory_idx'],
  'one index finds a memory''s postings, keyed on memory_id alone (so it deduplicates)');
select is_empty(
  $$select i.indexrelid::regclass from pg_index i
    where i.indrelid = 'public.memory_postings'::regclass and i.indisunique$$,
  'no unique index on the postings (one posting per lexeme of a memory is the search vector''s rule)');
-- Deleting a user takes their memories and, through the memories' cascade, every posting of them.
select ok(
  (select count(*) from public.memory_postings where memory_id = any (:'outsider_memories'::uuid[])) > 0,
  '(sensitivity) the outsider has postings before their account is deleted');
delete from auth.users where id = :'outsider_id';
select is(
  (select count(*)::integer from public.memory_postings where memory_id = any (:'outsider_memories'::uuid[])),
  0, 'a deleted user''s postings go with their memories');

-- One home for ts_rank's weights: roi.lexical_weights(), which recall ranks by and the postings'
-- impacts are computed with. No other function writes the numbers; replaced (in this rolled-back
-- transaction) by weights that favour the title, new postings and recall's scores both follow it.
select is_empty(
  $$select p.oid::regprocedure from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname in ('public', 'roi') and p.proname <> 'lexical_weights' and p.prosrc ~ '0\.1, ?0\.2, ?0\.4'$$,
  'no function but roi.lexical_weights() writes ts_rank''s weights');
select is_empty(
  $$select p.proname from pg_proc p
    where p.oid in ('roi.recall_lexical_leg'::regproc, 'public.recall_lexical'::regproc,
                    'roi.post_new_memories'::regproc, 'roi.repost_memory'::regproc)
      and p.prosrc not like '%roi.lexical_weights()%'$$,
  'both recalls'' lexical ranking and both posting triggers call roi.lexical_weights()');
create or replace function roi.lexical_weights() returns real[]
  language sql immutable security invoker set search_path = ''
as $$
  select '{0.1, 0.2, 0.4, 1.0}'::real[]
$$;
select tests.authenticate_as('author@postings.test');
insert into public.memories (scope, kind, title, body) values
  ('personal', 'decision', 'Quokka title words', 'The quokka body has other words entirely.');
select tests.clear_authentication();
select is_empty(
  $$select p.lexeme from public.memory_postings p join public.memories m on m.id = p.memory_id
    where m.title = 'Quokka title words'
      and abs(p.impact - ts_rank('{0.1, 0.2, 0.4, 1.0}', m.search, quote_literal(p.lexeme)::tsquery, 1)) > 1e-6$$,
  'a new memory''s postings are ts_rank by the weights roi.lexical_weights() now holds');
select ok(
  (select abs(p.impact - ts_rank('{0.1, 0.2, 0.4, 0.4}', m.search, 'quokka'::tsquery, 1)) > 1e-3
   from public.memory_postings p join public.memories m on m.id = p.memory_id
   where m.title = 'Quokka title words' and p.lexeme = 'quokka'),
  '(sensitivity) the title word''s impact differs from what the former weights give');
select tests.authenticate_as('author@postings.test');
select is(
  (select r.score from public.recall_lexical('quokka title words') r where r.title = 'Quokka title words'),
  (select ts_rank('{0.1, 0.2, 0.4, 1.0}', m.search, public.recall_query('quokka title words'), 1)::real
   from public.memories m where m.title = 'Quokka title words'),
  'recall scores by the weights roi.lexical_weights() now holds');
select is(
  (select r.memory_id from public.recall_lexical('quokka title words') r limit 1),
  (select p.memory_id from public.memory_postings p join public.memories m on m.id = p.memory_id
   where p.lexeme = 'quokka' order by p.impact desc limit 1),
  'recall''s first result is the memory the postings rank first');
select tests.clear_authentication();

select * from finish();
rollback;
