-- The question gate and the owner's lock key in PL/pgSQL (docs/decisions/0042-the-gate-planned-once.md).
-- Every policy on a question-bearing table reads roi.inside_benchmark() once a statement, about 30 times a
-- benchmark_memory() call; as a SQL function with `set search_path` it was never inlined, so each of those
-- statements parsed and planned its body again. PL/pgSQL keeps it prepared for the session. open_gate,
-- close_gate and owner_lock_key run once a call (twice an owner in upkeep) and follow the same rule. Same
-- results, same signatures: `create or replace` keeps the policies and grants that refer to them.

create or replace function roi.inside_benchmark() returns boolean
  language plpgsql stable security invoker set search_path = ''
as $$
begin
  return coalesce(current_setting('roi.inside_benchmark', true), '') = 'on';
end
$$;

create or replace function roi.open_gate() returns void
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  perform set_config('roi.inside_benchmark', 'on', true);
end
$$;

create or replace function roi.close_gate() returns void
  language plpgsql volatile security invoker set search_path = ''
as $$
begin
  perform set_config('roi.inside_benchmark', '', true);
end
$$;

create or replace function roi.owner_lock_key(owner uuid) returns bigint
  language plpgsql immutable security invoker set search_path = ''
as $$
begin
  return hashtextextended('roi.benchmark:' || owner::text, 0);
end
$$;
