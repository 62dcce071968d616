-- Ingest spine: one row per answer (source of truth), one row per claim, and
-- per-minute aggregates that ClickHouse maintains itself through materialized views.

CREATE TABLE IF NOT EXISTS events
(
    event_id String,
    trace_id String,
    observed_at DateTime64(3, 'UTC'),
    ingested_at DateTime64(3, 'UTC') DEFAULT now64(3),
    route LowCardinality(String),
    tenant String,
    query_text String,
    query_type LowCardinality(String),
    stakes LowCardinality(String),
    answerable Int8,                        -- 1 answerable, 0 unanswerable, -1 unknown
    answer_text String,
    action LowCardinality(String),
    versions Map(String, String),
    first_failed_stage LowCardinality(String),
    evidence String,                        -- JSON array, as received
    signals String,                         -- JSON object, as received
    attributes Map(String, String),
    claim_ids Array(String),
    claim_texts Array(String),
    claim_types Array(LowCardinality(String)),
    verdicts Array(LowCardinality(String)),
    scores Array(Nullable(Float32)),
    chunk_ids Array(String),
    source_ids Array(String),
    spans Array(String),
    labelers Array(String)
)
ENGINE = ReplacingMergeTree(ingested_at)
ORDER BY event_id
SETTINGS non_replicated_deduplication_window = 10000;

CREATE TABLE IF NOT EXISTS claims
(
    event_id String,
    claim_idx UInt16,
    claim_id String,
    trace_id String,
    route LowCardinality(String),
    observed_at DateTime64(3, 'UTC'),
    verdict LowCardinality(String),
    claim_type LowCardinality(String),
    text String,
    score Nullable(Float32),
    chunk_id String,
    source_id String,
    span String,
    labeler String,
    versions Map(String, String),
    query_text String,
    query_type LowCardinality(String),
    stakes LowCardinality(String),
    answer_text String,
    action LowCardinality(String),
    first_failed_stage LowCardinality(String),
    signals String
)
ENGINE = ReplacingMergeTree
ORDER BY (route, observed_at, event_id, claim_idx)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS claims_mv TO claims AS
SELECT event_id, idx - 1 AS claim_idx, claim_ids[idx] AS claim_id, trace_id, route, observed_at,
       verdicts[idx] AS verdict, claim_types[idx] AS claim_type, claim_texts[idx] AS text, scores[idx] AS score,
       chunk_ids[idx] AS chunk_id, source_ids[idx] AS source_id, spans[idx] AS span, labelers[idx] AS labeler,
       versions, query_text, query_type, stakes, substring(answer_text, 1, 2000) AS answer_text, action,
       first_failed_stage, signals
FROM events
ARRAY JOIN arrayEnumerate(verdicts) AS idx;

-- dim '' is the whole route; other dims slice it ('query_type', 'stakes', 'version.<key>').
-- The *_sq and failed_claims sums let intervals resample answers, not claims.
CREATE TABLE IF NOT EXISTS rate_minute
(
    dim LowCardinality(String),
    value String,
    route LowCardinality(String),
    minute DateTime('UTC'),
    events SimpleAggregateFunction(sum, Int64),
    claims SimpleAggregateFunction(sum, Int64),
    failed SimpleAggregateFunction(sum, Int64),
    claims_sq SimpleAggregateFunction(sum, Int64),
    failed_sq SimpleAggregateFunction(sum, Int64),
    failed_claims SimpleAggregateFunction(sum, Int64),
    supported SimpleAggregateFunction(sum, Int64),
    unsupported SimpleAggregateFunction(sum, Int64),
    contradicted SimpleAggregateFunction(sum, Int64),
    overreach SimpleAggregateFunction(sum, Int64),
    stale SimpleAggregateFunction(sum, Int64),
    no_source SimpleAggregateFunction(sum, Int64),
    trivial SimpleAggregateFunction(sum, Int64),
    served SimpleAggregateFunction(sum, Int64),
    served_unsafe SimpleAggregateFunction(sum, Int64),
    abstained SimpleAggregateFunction(sum, Int64),
    answerable SimpleAggregateFunction(sum, Int64),
    answerable_abstained SimpleAggregateFunction(sum, Int64),
    unanswerable SimpleAggregateFunction(sum, Int64),
    unanswerable_abstained SimpleAggregateFunction(sum, Int64)
)
ENGINE = AggregatingMergeTree
ORDER BY (dim, value, route, minute)
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS rate_minute_mv TO rate_minute AS
SELECT slice.1 AS dim, slice.2 AS value, route, toStartOfMinute(observed_at) AS minute,
       toInt64(1) AS events,
       toInt64(n_claims) AS claims,
       toInt64(n_failed) AS failed,
       toInt64(n_claims * n_claims) AS claims_sq,
       toInt64(n_failed * n_failed) AS failed_sq,
       toInt64(n_failed * n_claims) AS failed_claims,
       toInt64(countEqual(verdicts, 'supported')) AS supported,
       toInt64(countEqual(verdicts, 'unsupported')) AS unsupported,
       toInt64(countEqual(verdicts, 'contradicted')) AS contradicted,
       toInt64(countEqual(verdicts, 'overreach')) AS overreach,
       toInt64(countEqual(verdicts, 'stale')) AS stale,
       toInt64(countEqual(verdicts, 'no_source')) AS no_source,
       toInt64(countEqual(verdicts, 'trivial')) AS trivial,
       toInt64(action = 'served') AS served,
       toInt64(action = 'served' AND n_failed > 0) AS served_unsafe,
       toInt64(action = 'abstained') AS abstained,
       toInt64(answerable = 1) AS answerable,
       toInt64(answerable = 1 AND action = 'abstained') AS answerable_abstained,
       toInt64(answerable = 0) AS unanswerable,
       toInt64(answerable = 0 AND action = 'abstained') AS unanswerable_abstained
FROM
(
    SELECT *,
           arrayCount(v -> v != 'trivial', verdicts) AS n_claims,
           arrayCount(v -> v IN ('unsupported', 'contradicted', 'overreach', 'stale', 'no_source'), verdicts) AS n_failed
    FROM events
)
ARRAY JOIN arrayConcat(
    [('', ''), ('query_type', query_type), ('stakes', stakes)],
    arrayMap((k, v) -> ('version.' || k, v), mapKeys(versions), mapValues(versions))
) AS slice;

-- Invalid input, one row per Kafka message; the Kafka DLQ topic holds the full bytes.
CREATE TABLE IF NOT EXISTS dlq
(
    topic String,
    partition Int32,
    offset Int64,
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
ORDER BY (topic, partition, offset);
