-- roi.judge_calibrations (20261202100000) is a result table: recorded once per judge-check, never
-- rewritten, superseded only by a newer row. It carries both append-only triggers; this puts it on the
-- one list of result tables (20261202130000) that supabase/tests/database/23-result-tables.sql holds
-- every listed table to.

-- ============================================================================================
-- Views
-- ============================================================================================
create or replace view roi.result_tables with (security_invoker = true) as
select t.table_name
from (values ('roi.runs'), ('roi.recalls'), ('roi.verdicts'), ('roi.run_closures'), ('roi.rotations'),
             ('roi.recall_outcomes'), ('roi.closed_book_results'), ('roi.run_judges'),
             ('roi.judge_check_results'), ('roi.verdict_notes'), ('roi.judge_calibrations')) t (table_name);
