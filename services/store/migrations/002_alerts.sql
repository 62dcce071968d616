-- Alerts: one row version per change; the newest (by updated_at) wins. State is
-- derived from the timestamps, never stored as a flag of its own.
CREATE TABLE IF NOT EXISTS alerts
(
    alert_id String,
    route LowCardinality(String),
    kind LowCardinality(String),
    severity LowCardinality(String),
    labels Map(String, String),
    window_minutes UInt32,
    pending_since DateTime64(3, 'UTC'),
    starts_at Nullable(DateTime64(3, 'UTC')),
    ends_at Nullable(DateTime64(3, 'UTC')),
    acked_at Nullable(DateTime64(3, 'UTC')),
    acked_by String,
    ack_note String,
    rate Nullable(Float64),
    baseline Nullable(Float64),
    delta Nullable(Float64),
    claims UInt64,
    onset Nullable(DateTime64(3, 'UTC')),
    driving_verdict String,
    body String,                            -- the full alert as JSON (intervals, suspect changes)
    updated_at DateTime64(6, 'UTC'),
    state String ALIAS multiIf(ends_at IS NOT NULL, 'resolved', starts_at IS NOT NULL, 'firing', 'pending')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY alert_id;

-- Each transition once: (alert_id, state) is unique however often it is re-evaluated.
CREATE TABLE IF NOT EXISTS alert_transitions
(
    alert_id String,
    state LowCardinality(String),
    route LowCardinality(String),
    kind LowCardinality(String),
    at DateTime64(3, 'UTC'),
    record String
)
ENGINE = ReplacingMergeTree
ORDER BY (alert_id, state);

CREATE TABLE IF NOT EXISTS silences
(
    silence_id String,
    body String,                            -- matchers, window, who and why, as JSON
    ends_at DateTime64(3, 'UTC'),
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY silence_id;

-- Where the leader-only evaluator got to, in event time.
CREATE TABLE IF NOT EXISTS checkpoints
(
    name String,
    value String,
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY name;
