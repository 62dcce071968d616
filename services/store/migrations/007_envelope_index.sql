-- A batch envelope's bad events are dead-lettered one by one: one row per (message, index in the
-- envelope), -1 for a whole message (a single event or a malformed envelope). The index joins the
-- sorting key, so ReplacingMergeTree keeps every bad event of a message and still collapses
-- redeliveries. ClickHouse cannot add a defaulted column to a sorting key, so the table is rebuilt.
CREATE TABLE IF NOT EXISTS dlq_007
(
    topic String,
    partition Int32,
    offset Int64,
    envelope_index Int32 DEFAULT -1,
    received_at DateTime64(3, 'UTC') DEFAULT now64(3),
    rule LowCardinality(String),
    reason String,
    problems String,
    event_id String,
    route String,
    size UInt32,
    sample String                           -- first 2 KiB, base64
)
ENGINE = ReplacingMergeTree
ORDER BY (topic, partition, offset, envelope_index);

INSERT INTO dlq_007 (topic, partition, offset, envelope_index, received_at, rule, reason, problems, event_id, route, size, sample)
SELECT topic, partition, offset, -1, received_at, rule, reason, problems, event_id, route, size, sample FROM dlq;

RENAME TABLE dlq TO dlq_before_007, dlq_007 TO dlq;

DROP TABLE dlq_before_007;
