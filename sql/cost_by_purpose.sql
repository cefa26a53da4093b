-- What the user's model calls cost, per calendar month (UTC), purpose and model: tokens, US dollars
-- by litellm's local price map (null for a model it has no price for), and how many calls went on
-- the user's own provider key (byok), which the deployment's totals leave out.
-- Run it in Studio's SQL editor as the role `authenticated`, impersonating the user.
select date_trunc('month', e.created_at at time zone 'UTC') as month,
       e.purpose,
       e.model,
       count(*) as calls,
       sum(e.input_tokens) as input_tokens,
       sum(e.output_tokens) as output_tokens,
       sum(e.cost_usd) as cost_usd,
       count(*) filter (where e.byok) as own_key_calls
from public.usage_events e
group by 1, e.purpose, e.model
order by 1 desc, cost_usd desc nulls last, e.purpose, e.model;
