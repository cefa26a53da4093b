-- Who sees what in the memory substrate: two members of a project and a team, an outsider with a
-- project of their own, and an anonymous request. Every table, every role.
begin;
select plan(34);

-- Cast: alice and bob share project "atlas" and team "core"; carol has project "zephyr" alone.
select tests.create_user('alice@iso.test');
select tests.create_user('bob@iso.test');
select tests.create_user('carol@iso.test');
insert into public.teams (id, name) values ('00000000-0000-0000-0000-0000000000a1', 'core');
insert into public.projects (id, name, team_id) values
  ('00000000-0000-0000-0000-0000000000b1', 'atlas', '00000000-0000-0000-0000-0000000000a1'),
  ('00000000-0000-0000-0000-0000000000b2', 'zephyr', null);
insert into public.team_members (team_id, user_id)
  select '00000000-0000-0000-0000-0000000000a1', tests.user_id(e) from unnest(array['alice@iso.test', 'bob@iso.test']) e;
insert into public.project_members (project_id, user_id) values
  ('00000000-0000-0000-0000-0000000000b1', tests.user_id('alice@iso.test')),
  ('00000000-0000-0000-0000-0000000000b1', tests.user_id('bob@iso.test')),
  ('00000000-0000-0000-0000-0000000000b2', tests.user_id('carol@iso.test'));
insert into public.memories (author_id, scope, project_id, team_id, kind, title, body) values
  (tests.user_id('alice@iso.test'), 'personal', null, null, 'gotcha', 'alice personal', 'only alice'),
  (tests.user_id('bob@iso.test'), 'personal', null, null, 'gotcha', 'bob personal', 'only bob'),
  (tests.user_id('alice@iso.test'), 'project', '00000000-0000-0000-0000-0000000000b1', null, 'decision', 'atlas decision', 'atlas members'),
  (tests.user_id('bob@iso.test'), 'team', null, '00000000-0000-0000-0000-0000000000a1', 'convention', 'core convention', 'core members'),
  (tests.user_id('carol@iso.test'), 'project', '00000000-0000-0000-0000-0000000000b2', null, 'decision', 'zephyr decision', 'zephyr only');
insert into public.usage_events (owner_id, purpose, model, input_tokens, output_tokens) values
  (tests.user_id('alice@iso.test'), 'judgment', 'm', 10, 2),
  (tests.user_id('carol@iso.test'), 'judgment', 'm', 10, 2);

-- Alice, a member.
select tests.authenticate_as('alice@iso.test');
select results_eq($$select title from public.memories order by title$$,
  array['alice personal', 'atlas decision', 'core convention'],
  'alice sees her personal memories, her project''s and her team''s, nothing else');
select results_eq($$select name from public.teams$$, array['core'], 'alice sees only her team');
select results_eq($$select name from public.projects$$, array['atlas'], 'alice sees only her project');
select is((select count(*)::int from public.team_members), 1, 'alice sees only her own team membership');
select is((select count(*)::int from public.project_members), 1, 'alice sees only her own project membership');
select is((select count(*)::int from public.usage_events), 1, 'alice sees only her own usage events');
select throws_ok(
  $$insert into public.memories (scope, project_id, kind, title, body)
    values ('project', '00000000-0000-0000-0000-0000000000b2', 'decision', 'intrusion', 'x')$$,
  '42501', null, 'alice cannot write into a project she is not a member of');
select throws_ok(
  $$insert into public.memories (author_id, scope, kind, title, body)
    values (tests.user_id('bob@iso.test'), 'personal', 'gotcha', 'forged', 'x')$$,
  '42501', null, 'alice cannot write a memory in bob''s name');
select lives_ok(
  $$insert into public.memories (scope, project_id, kind, title, body)
    values ('project', '00000000-0000-0000-0000-0000000000b1', 'gotcha', 'alice adds to atlas', 'ok')$$,
  'alice can write into her own project');
select is_empty($$update public.memories set title = 'hijacked' where title = 'core convention' returning id$$,
  'alice cannot update a memory bob wrote');
select is_empty($$delete from public.memories where title = 'bob personal' returning id$$,
  'alice cannot delete bob''s personal memory');
select throws_ok($$insert into public.teams (name) values ('rogue')$$, '42501', null,
  'alice cannot create teams through the API');
select throws_ok($$insert into public.project_members (project_id, user_id)
  values ('00000000-0000-0000-0000-0000000000b2', auth.uid())$$, '42501', null,
  'alice cannot add herself to another project');
select throws_ok($$insert into public.usage_events (owner_id, purpose, model) values (auth.uid(), 'judgment', 'm')$$,
  '42501', null, 'alice cannot forge usage events');

-- Bob, the other member.
select tests.clear_authentication();
select tests.authenticate_as('bob@iso.test');
select results_eq($$select title from public.memories order by title$$,
  array['alice adds to atlas', 'atlas decision', 'bob personal', 'core convention'],
  'bob sees the shared memories and his own personal one, not alice''s');
select is((select count(*)::int from public.usage_events), 0, 'bob sees no usage events of others');
select is((select count(*)::int from public.project_members), 1, 'bob sees only his own project membership');

-- Carol, the outsider.
select tests.clear_authentication();
select tests.authenticate_as('carol@iso.test');
select results_eq($$select title from public.memories$$, array['zephyr decision'],
  'carol sees only her own project');
select is_empty($$select 1 from public.teams$$, 'carol sees no team');
select results_eq($$select name from public.projects$$, array['zephyr'], 'carol sees only zephyr');
select is_empty($$select 1 from public.team_members$$, 'carol sees no team membership');
select is((select count(*)::int from public.project_members), 1, 'carol sees only her own project membership');
select is((select count(*)::int from public.usage_events), 1, 'carol sees only her own usage event');
select is_empty($$select title from public.recall('atlas decision core convention') where title <> 'zephyr decision'$$,
  'recall gives carol nothing of atlas or core');

-- An anonymous request reads nothing at all.
select tests.clear_authentication();
select tests.authenticate_as_anon();
select throws_ok($$select 1 from public.memories$$, '42501', null, 'anon cannot read memories');
select throws_ok($$select 1 from public.teams$$, '42501', null, 'anon cannot read teams');
select throws_ok($$select 1 from public.team_members$$, '42501', null, 'anon cannot read team members');
select throws_ok($$select 1 from public.projects$$, '42501', null, 'anon cannot read projects');
select throws_ok($$select 1 from public.project_members$$, '42501', null, 'anon cannot read project members');
select throws_ok($$select 1 from public.usage_events$$, '42501', null, 'anon cannot read usage events');
select throws_ok($$select * from public.recall('atlas')$$, '42501', null, 'anon cannot call recall');

-- Membership ends, visibility ends: bob leaves atlas and stops seeing it at once.
select tests.clear_authentication();
delete from public.project_members where user_id = tests.user_id('bob@iso.test');
select tests.authenticate_as('bob@iso.test');
select results_eq($$select title from public.memories order by title$$,
  array['bob personal', 'core convention'], 'bob no longer sees atlas once removed from it');
select is_empty($$select * from public.recall('atlas decision')$$, 'nor does recall surface it');
select tests.clear_authentication();
select is((select count(*)::int from public.memories where title in ('alice personal', 'bob personal',
  'atlas decision', 'core convention', 'zephyr decision', 'alice adds to atlas')), 6,
  'nothing was lost: the superuser still sees all six memories');

select * from finish();
rollback;
