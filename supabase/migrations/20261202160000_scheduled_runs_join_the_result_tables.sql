-- roi.scheduled_runs (20261202120000) records, once, which runs a schedule started: a result table.
-- It carries both append-only triggers; this puts it on the one list of result tables that
-- supabase/tests/database/23-result-tables.sql holds every listed table to.

-- ============================================================================================
-- Views
-- ============================================================================================
create or replace view roi.result_tables with (security_invoker = true) as
select t.table_name
from (values ('roi.runs'), ('roi.recalls'), ('roi.verdicts'), ('roi.run_closures'), ('roi.rotations'),
             ('roi.recall_outcomes'), ('roi.closed_book_results'), ('roi.run_judges'),
             ('roi.judge_check_results'), ('roi.verdict_notes'), ('roi.judge_calibrations'),
             ('roi.scheduled_runs')) t (table_name);
