-- The one list of result tables (issue 33, item 2): rows recorded once and never rewritten, declared
-- in one place rather than found by the append-only trigger a test must check. Each listed table
-- carries both append-only triggers and no role but its owner may update, delete or truncate it; a
-- table carrying either trigger is listed (supabase/tests/database/23-result-tables.sql).

-- ============================================================================================
-- Views
-- ============================================================================================
create view roi.result_tables with (security_invoker = true) as
select t.table_name
from (values ('roi.runs'), ('roi.recalls'), ('roi.verdicts'), ('roi.run_closures'), ('roi.rotations'),
             ('roi.recall_outcomes'), ('roi.closed_book_results'), ('roi.run_judges'),
             ('roi.judge_check_results'), ('roi.verdict_notes')) t (table_name);
