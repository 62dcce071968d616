-- The alert evaluator's state per route (issue 49). It was one checkpoint value holding every route's detectors
-- (about 320 KB pickled a route, whatever its history), and past about 1,500 routes that value passed ClickHouse's
-- 1 GiB JSON string limit: every evaluation failed and alerting went blind.
--
-- Now each route has a snapshot of its detectors (slot 0, written about once an hour, staggered across routes) and
-- the inputs the evaluator fed them since (slot 1 + minute % 60, a ring: a route's row for a minute replaces the
-- one an hour older). A restart loads each route's snapshot and replays its inputs, so it resumes exactly. The
-- row of route '' holds where the evaluator got to. One evaluation pass writes its rows in one insert, and `run`
-- names the evaluation they belong to (a fresh start begins another). The newest write of a key wins.
CREATE TABLE IF NOT EXISTS alert_route_state
(
    route String,
    slot UInt16,
    minute DateTime('UTC'),
    run String,
    body String CODEC(ZSTD(1)),
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (route, slot);

-- What the evaluator expects of each route's rate now (the overview, `claimwatch rates`, the route page and
-- /api/rates compare with it), a row per route instead of one value for the fleet.
CREATE TABLE IF NOT EXISTS route_expectations
(
    route String,
    minute DateTime('UTC'),
    expected Nullable(Float64),
    basis String,
    learning UInt8,
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY route;

-- The two old checkpoints: the evaluator no longer reads them (its detectors relearn from the stored history once).
ALTER TABLE checkpoints DELETE WHERE name IN ('alert-evaluator/v4', 'route-expectations/v1');

-- The evaluator reads every route's whole-route and mix buckets minute by minute. rate_minute is ordered by route,
-- so one minute of 10,000 routes read every route's granules (3 s a minute with a day of history, growing with
-- it). This copy of those two dims is ordered by minute; rate_minute's rows fill it through the view below
-- (ingest, repairs). Its TTL follows rate_minute's (services/store/retention.py).
CREATE TABLE IF NOT EXISTS rate_minute_by_time AS rate_minute
ENGINE = AggregatingMergeTree
ORDER BY (minute, dim, value, route)
TTL minute + toIntervalDay(400)
SETTINGS merge_selector_base = 20;

CREATE MATERIALIZED VIEW IF NOT EXISTS rate_minute_by_time_mv TO rate_minute_by_time AS
SELECT * FROM rate_minute WHERE dim IN ('', 'mix');

INSERT INTO rate_minute_by_time SELECT * FROM rate_minute WHERE dim IN ('', 'mix');
