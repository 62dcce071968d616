-- Where the idempotent writer looks for an answer it may have stored already (issue 25). It used to ask
-- `events`, which is ordered by event_id: a batch's thousands of random ids touch every granule, so each
-- batch read the whole event_id column and the check grew with the table (28 ms a batch at 100,000 answers,
-- 110 ms at 400,000). A redelivered answer is the same answer: same route, same event time. Ordered by
-- those, a batch's check reads only the minutes its answers fall in.
CREATE TABLE IF NOT EXISTS event_keys
(
    route LowCardinality(String),
    observed_at DateTime64(3, 'UTC'),
    event_id String
)
ENGINE = ReplacingMergeTree
ORDER BY (route, observed_at, event_id)
TTL toDateTime(observed_at) + toIntervalDay(30)  -- as events' (retention.raw_days brings both in line on start)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS event_keys_mv TO event_keys AS
SELECT route, observed_at, event_id FROM events;

INSERT INTO event_keys SELECT route, observed_at, event_id FROM events;
