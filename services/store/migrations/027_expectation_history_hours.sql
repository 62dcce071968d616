-- While a route's expectation is learning, how many whole hours of history it has: every surface says
-- "learning (5 h of history)" (services/alerts/expectations.py expected_text). NULL once it has learned, and in
-- rows written before this column existed.
ALTER TABLE route_expectations ADD COLUMN IF NOT EXISTS history_hours Nullable(UInt32) AFTER learning;
