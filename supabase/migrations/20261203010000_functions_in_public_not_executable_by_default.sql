-- Nothing new in `public` is executable by the API roles unless a grant says so (supabase/schemas/,
-- the memory core's first rule). An embedded database that ran `zm-roi db up` more than once before
-- the baseline had that rule undone by the compat layer, which granted the defaults again on every
-- start; such a database moves onto the baseline all the same, and this puts the rule back. Elsewhere
-- it changes nothing.
alter default privileges in schema public revoke execute on functions from public, anon, authenticated;
