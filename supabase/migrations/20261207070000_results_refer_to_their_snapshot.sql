-- A verdict and a recall outcome each describe one recall snapshot, which already refers to its run and
-- its probe: one foreign key to the snapshot replaces the two, so each row written checks and locks one
-- row instead of two (the probe's, locked again by every result row of a run), and a verdict or outcome
-- for a recall never taken is refused. Deleting a probe or a run still removes them, through the
-- snapshot's own cascade. The probe_id indexes served only the foreign keys to the probes
-- (docs/decisions/0045). Added NOT VALID, then validated: the check of the rows already recorded does
-- not block writes.

alter table roi.verdicts
  drop constraint verdicts_run_id_fkey,
  drop constraint verdicts_probe_id_fkey,
  add constraint verdicts_run_id_probe_id_fkey foreign key (run_id, probe_id)
    references roi.recalls (run_id, probe_id) on delete cascade not valid;
alter table roi.verdicts validate constraint verdicts_run_id_probe_id_fkey;

alter table roi.recall_outcomes
  drop constraint recall_outcomes_run_id_fkey,
  drop constraint recall_outcomes_probe_id_fkey,
  add constraint recall_outcomes_run_id_probe_id_fkey foreign key (run_id, probe_id)
    references roi.recalls (run_id, probe_id) on delete cascade not valid;
alter table roi.recall_outcomes validate constraint recall_outcomes_run_id_probe_id_fkey;

drop index roi.verdicts_probe_idx;
drop index roi.recall_outcomes_probe_idx;
