-- `zm-roi judge-check` meters each call it makes as a usage event of its own purpose, attributed to
-- the operator's account (not to any owner whose corpus is measured), so the deployment's token totals
-- show what calibrating the judge cost.
alter table public.usage_events drop constraint usage_events_purpose_check;
alter table public.usage_events add constraint usage_events_purpose_check
  check (purpose in ('probe_generation', 'judgment', 'closed_book_answer', 'closed_book_grade', 'embedding',
                     'judge_check'));
