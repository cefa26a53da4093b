-- Results are append-only, TRUNCATE included (20261201010100). Two result tables came after that
-- migration and refuse update and delete row by row but not TRUNCATE: the text-free recall
-- outcomes (20261201040100) and the closed-book spot-check results (same). They get the same
-- statement-level trigger; pgTAP now finds result tables by their append-only row trigger, so a
-- future one without the TRUNCATE trigger fails the suite.

-- ============================================================================================
-- Triggers
-- ============================================================================================
create trigger recall_outcomes_refuse_truncate before truncate on roi.recall_outcomes
  for each statement execute function roi.forbid_result_truncate();
create trigger closed_book_results_refuse_truncate before truncate on roi.closed_book_results
  for each statement execute function roi.forbid_result_truncate();
