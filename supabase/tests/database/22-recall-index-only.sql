-- 20261201060000_recall_index_only: recall reads each layer from a covering index, except memories
-- whose search vector is too large for a b-tree entry, which have their own small index and arm.
-- Every size can be written (no "index row size exceeds" error at the bound or far beyond it), and
-- recall still returns exactly the live matches of the caller's layers, whichever index holds them.
begin;
select plan(11);

select tests.create_user('reader@cover.test');
select tests.create_user('stranger@cover.test');
insert into public.teams (id, name) values ('00000000-0000-0000-0000-0000000c0e01', 'cover-team');
insert into public.projects (id, name) values
  ('00000000-0000-0000-0000-0000000c0b01', 'cover-project'),
  ('00000000-0000-0000-0000-0000000c0b02', 'cover-foreign');
insert into public.team_members values ('00000000-0000-0000-0000-0000000c0e01', tests.user_id('reader@cover.test'));
insert into public.project_members values
  ('00000000-0000-0000-0000-0000000c0b01', tests.user_id('reader@cover.test')),
  ('00000000-0000-0000-0000-0000000c0b02', tests.user_id('stranger@cover.test'));

-- `words(n)`: n distinct words, so the search vector grows by one lexeme per word.
create function pg_temp.words(n integer) returns text language sql immutable
as $$ select string_agg('zq' || i, ' ') from generate_series(1, n) i $$;

-- Project memories from 120 to 180 distinct words: the search vectors cross the covering indexes'
-- bound (2,400 bytes by the recall's measure) in single steps. Then one of ~10,000 words per layer.
select lives_ok(
  $$insert into public.memories (author_id, scope, project_id, team_id, kind, title, body)
    select tests.user_id('reader@cover.test'), 'project', '00000000-0000-0000-0000-0000000c0b01', null,
           'decision', 'quasar step ' || n, pg_temp.words(n)
    from generate_series(120, 180) n;
    insert into public.memories (author_id, scope, project_id, team_id, kind, title, body)
    select case when layer = 'foreign' then tests.user_id('stranger@cover.test')
                else tests.user_id('reader@cover.test') end,
           case when layer in ('personal', 'team') then layer else 'project' end,
           case layer when 'project' then '00000000-0000-0000-0000-0000000c0b01'::uuid
                      when 'foreign' then '00000000-0000-0000-0000-0000000c0b02'::uuid end,
           case when layer = 'team' then '00000000-0000-0000-0000-0000000c0e01'::uuid end,
           'gotcha', 'quasar nebula ' || layer, 'quasar nebula ' || pg_temp.words(10000)
    from unnest(array['personal', 'project', 'team', 'foreign']) layer;
    insert into public.memories (author_id, scope, project_id, team_id, kind, title, body)
    select tests.user_id('reader@cover.test'), 'personal', null, null, 'convention', 'quasar habit', 'short';$$,
  'search vectors of every size can be written: up to the bound, just past it, and far beyond it');

select ok(
  (select count(*) filter (where octet_length(search::text) + 4 * length(search) <= 2400) > 0
      and count(*) filter (where octet_length(search::text) + 4 * length(search) > 2400) > 1
   from public.memories where title like 'quasar step %'),
  'the project''s memories fall on both sides of the covering indexes'' bound');

select tests.authenticate_as('reader@cover.test');
select set_eq(
  $$select memory_id from public.recall('quasar', project_id => '00000000-0000-0000-0000-0000000c0b01', match_count => 100)$$,
  $$select id from public.memories m where m.invalidated_at is null and m.search @@ public.recall_query('quasar')
      and (m.project_id = '00000000-0000-0000-0000-0000000c0b01' or m.scope = 'personal')$$,
  'a project pin returns the project''s and the caller''s personal matches of every size');
select set_eq(
  $$select memory_id from public.recall('quasar', team_id => '00000000-0000-0000-0000-0000000c0e01', match_count => 100)$$,
  $$select id from public.memories m where m.invalidated_at is null and m.search @@ public.recall_query('quasar')
      and (m.team_id = '00000000-0000-0000-0000-0000000c0e01' or m.scope = 'personal')$$,
  'a team pin returns the team''s and the caller''s personal matches of every size');
select set_eq(
  $$select memory_id from public.recall('quasar', match_count => 100)$$,
  $$select id from public.memories m where m.invalidated_at is null and m.search @@ public.recall_query('quasar')$$,
  'unpinned recall returns exactly the live matches RLS lets the caller see, of every size');
select set_eq(
  $$select title from public.recall('quasar', personal_only => true)$$,
  array['quasar habit', 'quasar nebula personal'],
  'the personal pin returns the personal layer alone, oversized memory included');
select is_empty(
  $$select 1 from public.recall('quasar nebula', project_id => '00000000-0000-0000-0000-0000000c0b02', match_count => 100)
    where scope <> 'personal'$$,
  'pinning a project the caller is not in returns nothing from it, oversized or not');
select ok(
  (select count(*) filter (where octet_length(m.search::text) + 4 * length(m.search) <= 2400) > 0
      and count(*) filter (where octet_length(m.search::text) + 4 * length(m.search) > 2400) > 0
   from public.recall('nebula zq125', project_id => '00000000-0000-0000-0000-0000000c0b01', match_count => 5) r
   join public.memories m on m.id = r.memory_id),
  'the best five of a question mix memories from the covering and the oversized indexes');
select tests.clear_authentication();

-- Edits move a memory between the covering and the oversized index; invalidation takes it out.
update public.memories set body = 'pulsar ' || pg_temp.words(10000) where title = 'quasar step 120';
update public.memories set body = 'pulsar' where title = 'quasar step 180';
update public.memories set invalidated_at = now() where title = 'quasar nebula team';
select tests.authenticate_as('reader@cover.test');
select set_eq(
  $$select title from public.recall('pulsar', project_id => '00000000-0000-0000-0000-0000000c0b01')$$,
  array['quasar step 120', 'quasar step 180'],
  'a memory edited past the bound, and one edited back under it, are recalled by their new text');
select is_empty(
  $$select 1 from public.recall('quasar nebula', team_id => '00000000-0000-0000-0000-0000000c0e01') where title = 'quasar nebula team'$$,
  'an invalidated oversized memory never surfaces');
select tests.clear_authentication();

-- The ranking is ts_rank's, across the covering and oversized arms alike.
select tests.authenticate_as('reader@cover.test');
select is(
  (select array_agg(memory_id) from public.recall('nebula zq125', project_id => '00000000-0000-0000-0000-0000000c0b01', match_count => 5)),
  (select array_agg(id) from (
     select m.id from public.memories m
     where m.invalidated_at is null and m.search @@ public.recall_query('nebula zq125')
       and (m.project_id = '00000000-0000-0000-0000-0000000c0b01' or m.scope = 'personal')
     order by ts_rank(m.search, public.recall_query('nebula zq125'), 1) desc, m.created_at desc, m.id
     limit 5) best),
  'best ts_rank first, then newest, over both arms');
select tests.clear_authentication();

select * from finish();
rollback;
