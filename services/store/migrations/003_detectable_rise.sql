-- The smallest rise a route detects within an hour, where its volume makes that more than its threshold (issue 55):
-- the overview, `claimwatch rates` and the route page say it beside the expected rate. NULL: the threshold itself.
ALTER TABLE route_expectations ADD COLUMN IF NOT EXISTS detectable_rise Nullable(Float64);
