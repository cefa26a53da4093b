-- Who can read probe question text (and the source snapshot it was written from), enumerated from
-- the catalog: every role in pg_roles is tried, so a role added later is covered without editing this
-- file. Only roi_worker (for the probes it has work on) and the owner inside benchmark_memory()'s
-- gate may; roi_embedder, which embeds memories, reads none.
begin;
select plan(6);

select tests.create_user('reader@questions.test');
insert into public.memories (id, author_id, scope, kind, title, body) values
  ('00000000-0000-0000-0000-0000000c0001', tests.user_id('reader@questions.test'), 'personal', 'decision',
   'Sentinel source', 'the sentinel body');
-- An active templated question without an embedding: it waits as embed_question work for the worker.
insert into roi.probes (owner_id, memory_id, source_kind, source_scope, source_title, source_body, question, state,
                        activated_at)
values (tests.user_id('reader@questions.test'), '00000000-0000-0000-0000-0000000c0001', 'decision', 'personal',
        'Sentinel source', 'the sentinel body', 'What did we decide about the sentinel?', 'active', now());

-- Every role but the superusers (they bypass everything), each trying the text columns in turn.
create function pg_temp.question_readers() returns setof text
  language plpgsql
as $$
declare
  r record;
  seen integer;
begin
  for r in select rolname from pg_catalog.pg_roles where not rolsuper order by rolname loop
    execute format('set local role %I', r.rolname);
    begin
      select count(*) into seen from roi.probes p
      where p.question like '%sentinel%' or p.source_title like 'Sentinel%' or p.source_body like '%sentinel%';
      if seen > 0 then
        return next r.rolname::text;
      end if;
    exception when insufficient_privilege then
      null;
    end;
    reset role;
  end loop;
end
$$;

-- 1 issue first: the check can see a reader (here the superuser-owned test reads as itself).
select ok((select count(*) from roi.probes where question like '%sentinel%') = 1, 'the question exists to be read');

select results_eq($$select * from pg_temp.question_readers()$$, $$values ('roi_worker'::text)$$,
  'with the gate closed, only roi_worker reads it, for the embedding it has to make');

select set_config('request.jwt.claims',
  jsonb_build_object('sub', tests.user_id('reader@questions.test'), 'role', 'authenticated')::text, true);
select roi.open_gate();
select results_eq($$select * from pg_temp.question_readers()$$, $$values ('authenticated'::text), ('roi_worker')$$,
  'inside benchmark_memory()''s gate the owner reads it too; no other role, whatever its grants');
select roi.close_gate();

delete from roi.work where probe_id in (select id from roi.probes where question like '%sentinel%');
select is_empty($$select * from pg_temp.question_readers()$$,
  'once its work is done, not even roi_worker reads it');

-- The privileges behind it, also from the catalog: who holds SELECT on a text column at all.
select is(
  array(select distinct r.rolname::text from pg_catalog.pg_roles r
        cross join (values ('question'), ('source_title'), ('source_body')) c (col)
        where not r.rolsuper and r.rolname <> 'pg_read_all_data'
          and has_column_privilege(r.oid, 'roi.probes', c.col, 'select')
        order by 1),
  array['authenticated', 'roi_worker'],
  'only authenticated (behind the gate''s policy) and roi_worker hold SELECT on question text columns');
select is((select count(*)::int from pg_catalog.pg_auth_members m
           join pg_catalog.pg_roles g on g.oid = m.roleid and g.rolname = 'pg_read_all_data'
           join pg_catalog.pg_roles r on r.oid = m.member and not r.rolsuper), 0,
  'and no role reads everything through pg_read_all_data');

select * from finish();
rollback;
