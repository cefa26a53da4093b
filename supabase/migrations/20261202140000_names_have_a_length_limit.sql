-- Project and team names get a limit a user can read (200 characters), checked before the unique
-- index refuses a long name with "index row size exceeds btree version 4 maximum 2704" (a 3,000-
-- character name did; 100,000 repeated characters passed, because they compress). The CLI refuses
-- the same limit first (zm_roi/names.py); these hold it for every other path. Emails: Supabase Auth's
-- varchar(255), and locally sql/supabase_compat.sql's check.

-- ============================================================================================
-- Constraints
-- ============================================================================================
alter table public.teams
  add constraint teams_name_at_most_200_characters check (char_length(name) <= 200);

alter table public.projects
  add constraint projects_name_at_most_200_characters check (char_length(name) <= 200);
