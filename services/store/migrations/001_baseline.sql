-- The schema of claimwatch 0.1.0, in one piece. Later migrations (002_*.sql, ...) go on top of it; a store made
-- before this baseline is refused on start (services/store/migrate.py says how to start fresh).
--
-- The ingest spine: one row per answer (the source of truth), one row per claim, and per-minute aggregates that
-- ClickHouse maintains itself through materialized views.

-- Merge settings of the text tables, measured on 100,000-150,000 simulated answers (issue 25, bench/storage.py):
-- merge_max_block_size 1024 and vertical merges bound a merge's memory (a row carries the question, the answer and
-- every claim's text; the embedded store's peak over idle fell from 471 MB to 193 MB); merge_selector_base 20
-- merges wider and less often (merges read 0.91 M rows instead of 2.73 M, about 34 CPU µs a claim instead of 48;
-- services/store/clickhouse-compression.xml keeps merged parts in ZSTD); an inserted part up to 64 MiB is written
-- compact, one file instead of a 1 MiB buffer per column (an insert held 65 MiB instead of 180).
-- TTLs are on event time, so a backfill expires by when its answers happened (services/store/retention.py brings
-- them in line with settings.retention on start).
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
    labelers Array(String),
    sampling_rate Float64 DEFAULT 1         -- verified with this probability: the answer stands for 1/rate answers
)
ENGINE = ReplacingMergeTree(ingested_at)
ORDER BY event_id
TTL toDateTime(observed_at) + toIntervalDay(30)
SETTINGS non_replicated_deduplication_window = 10000, merge_max_block_size = 1024,
         vertical_merge_algorithm_min_rows_to_activate = 1, vertical_merge_algorithm_min_columns_to_activate = 1,
         merge_selector_base = 20, min_bytes_for_wide_part = 67108864;

-- A claim references its answer (event_id) and copies none of its text: readers that need the question, the
-- answer or the signals join events (services/store/issues.py, with_answer_text).
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
    query_type LowCardinality(String),
    stakes LowCardinality(String),
    action LowCardinality(String),
    first_failed_stage LowCardinality(String)
)
ENGINE = ReplacingMergeTree
ORDER BY (route, observed_at, event_id, claim_idx)
TTL toDateTime(observed_at) + toIntervalDay(30)
SETTINGS non_replicated_deduplication_window = 10000, merge_max_block_size = 1024,
         vertical_merge_algorithm_min_rows_to_activate = 1, vertical_merge_algorithm_min_columns_to_activate = 1,
         merge_selector_base = 20, min_bytes_for_wide_part = 67108864;

CREATE MATERIALIZED VIEW IF NOT EXISTS claims_mv TO claims AS
SELECT event_id, idx - 1 AS claim_idx, claim_ids[idx] AS claim_id, trace_id, route, observed_at,
       verdicts[idx] AS verdict, claim_types[idx] AS claim_type, claim_texts[idx] AS text, scores[idx] AS score,
       chunk_ids[idx] AS chunk_id, source_ids[idx] AS source_id, spans[idx] AS span, labelers[idx] AS labeler,
       versions, query_type, stakes, action, first_failed_stage
FROM events
ARRAY JOIN arrayEnumerate(verdicts) AS idx;

-- The worker's intake. Validated events go in as JSON, one line each (the values in the model's field order, which
-- the columns and tuples below follow: services/ingest/records.py's intake_line), and this view builds the events
-- row from them inside ClickHouse, outside the worker's GIL. Nothing is kept here (Null engine); events, and the
-- views on events, receive the rows as from any other insert, and a retried insert with the same deduplication
-- token is a no-op in each of them. evidence and signals arrive as JSON and are kept as their text
-- (input_format_json_read_*_as_strings).
CREATE TABLE IF NOT EXISTS events_intake
(
    event_id String,
    trace_id String,
    observed_at DateTime64(3, 'UTC'),
    route String,
    tenant String,
    query Tuple(text String, query_type String, stakes String, answerable Nullable(Bool)),
    answer Tuple(text String, action String),
    versions Map(String, String),
    evidence String,
    claims Array(Tuple(claim_id String, text String, claim_type String, verdict String, score Nullable(Float32),
                       chunk_id String, source_id String, span String, labeler String)),
    first_failed_stage String,
    signals String,
    attributes Map(String, String),
    sampling Tuple(rate Float64)
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS events_intake_mv TO events AS
SELECT event_id, trace_id, observed_at, route, tenant, query.text AS query_text, query.query_type AS query_type,
       query.stakes AS stakes, ifNull(toInt8(query.answerable), -1) AS answerable, answer.text AS answer_text,
       answer.action AS action, versions, first_failed_stage, if(evidence = '', '[]', evidence) AS evidence,
       if(signals = '', '{}', signals) AS signals, attributes,
       arrayMap((c, i) -> if(c.claim_id = '', concat('c', toString(i)), c.claim_id), claims,
                arrayEnumerate(claims)) AS claim_ids,
       claims.text AS claim_texts, claims.claim_type AS claim_types, claims.verdict AS verdicts,
       claims.score AS scores, claims.chunk_id AS chunk_ids, claims.source_id AS source_ids, claims.span AS spans,
       claims.labeler AS labelers, sampling.rate AS sampling_rate
FROM events_intake;

-- Where the idempotent writer looks for an answer it may have stored already. A redelivered answer is the same
-- answer: same route, same event time; ordered by those, a batch's check reads only the minutes its answers fall
-- in (ordered by event_id, a batch's random ids touched every granule: 110 ms a batch at 400,000 answers).
CREATE TABLE IF NOT EXISTS event_keys
(
    route LowCardinality(String),
    observed_at DateTime64(3, 'UTC'),
    event_id String
)
ENGINE = ReplacingMergeTree
ORDER BY (route, observed_at, event_id)
TTL toDateTime(observed_at) + toIntervalDay(30)  -- as events' (retention.raw_days brings both in line on start)
SETTINGS non_replicated_deduplication_window = 10000, merge_selector_base = 20;

CREATE MATERIALIZED VIEW IF NOT EXISTS event_keys_mv TO event_keys AS
SELECT route, observed_at, event_id FROM events;

-- Minute aggregates. dim '' is the whole route; other dims slice it ('query_type', 'stakes', 'version.<key>', and
-- 'mix': query type x stakes, which drift detection standardises over to split a rise into a mix effect and a rate
-- effect, services/alerts). The *_sq and failed_claims sums let intervals resample answers, not claims. The w*
-- sums weight each answer by 1 / its sampling rate (issue 24): the ratio of weighted failed to weighted claims,
-- its answer-clustered interval, the effective sample size, and the weighted shares.
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
    unanswerable_abstained SimpleAggregateFunction(sum, Int64),
    sampled SimpleAggregateFunction(sum, Int64),
    w_events SimpleAggregateFunction(sum, Float64),
    w2_events SimpleAggregateFunction(sum, Float64),
    w_claims SimpleAggregateFunction(sum, Float64),
    w_failed SimpleAggregateFunction(sum, Float64),
    w2_claims SimpleAggregateFunction(sum, Float64),
    w2_claims_sq SimpleAggregateFunction(sum, Float64),
    w2_failed_sq SimpleAggregateFunction(sum, Float64),
    w2_failed_claims SimpleAggregateFunction(sum, Float64),
    w_served SimpleAggregateFunction(sum, Float64),
    w_served_unsafe SimpleAggregateFunction(sum, Float64),
    w_abstained SimpleAggregateFunction(sum, Float64),
    w_answerable SimpleAggregateFunction(sum, Float64),
    w_answerable_abstained SimpleAggregateFunction(sum, Float64),
    w_unanswerable SimpleAggregateFunction(sum, Float64),
    w_unanswerable_abstained SimpleAggregateFunction(sum, Float64),
    w_supported SimpleAggregateFunction(sum, Float64),
    w_unsupported SimpleAggregateFunction(sum, Float64),
    w_contradicted SimpleAggregateFunction(sum, Float64),
    w_overreach SimpleAggregateFunction(sum, Float64),
    w_stale SimpleAggregateFunction(sum, Float64),
    w_no_source SimpleAggregateFunction(sum, Float64)
)
ENGINE = AggregatingMergeTree
ORDER BY (dim, value, route, minute)
TTL minute + toIntervalDay(400)
SETTINGS non_replicated_deduplication_window = 10000, merge_selector_base = 20;

-- The view carries only the columns the sums need, and sums each insert block by (dim, value, route, minute)
-- before it writes, so a batch adds one row per bucket. `claimwatch repair` reads this view's SELECT
-- (services/store/repair.py), and services/contract/model.py's failed verdicts are the list spelled out here.
CREATE MATERIALIZED VIEW IF NOT EXISTS rate_minute_mv TO rate_minute AS
SELECT slice.1 AS dim, slice.2 AS value, route, toStartOfMinute(observed_at) AS minute,
       toInt64(count()) AS events,
       toInt64(sum(n_claims)) AS claims,
       toInt64(sum(n_failed)) AS failed,
       toInt64(sum(n_claims * n_claims)) AS claims_sq,
       toInt64(sum(n_failed * n_failed)) AS failed_sq,
       toInt64(sum(n_failed * n_claims)) AS failed_claims,
       toInt64(sum(countEqual(verdicts, 'supported'))) AS supported,
       toInt64(sum(countEqual(verdicts, 'unsupported'))) AS unsupported,
       toInt64(sum(countEqual(verdicts, 'contradicted'))) AS contradicted,
       toInt64(sum(countEqual(verdicts, 'overreach'))) AS overreach,
       toInt64(sum(countEqual(verdicts, 'stale'))) AS stale,
       toInt64(sum(countEqual(verdicts, 'no_source'))) AS no_source,
       toInt64(sum(countEqual(verdicts, 'trivial'))) AS trivial,
       toInt64(countIf(action = 'served')) AS served,
       toInt64(countIf(action = 'served' AND n_failed > 0)) AS served_unsafe,
       toInt64(countIf(action = 'abstained')) AS abstained,
       toInt64(countIf(is_answerable = 1)) AS answerable,
       toInt64(countIf(is_answerable = 1 AND action = 'abstained')) AS answerable_abstained,
       toInt64(countIf(is_answerable = 0)) AS unanswerable,
       toInt64(countIf(is_answerable = 0 AND action = 'abstained')) AS unanswerable_abstained,
       toInt64(countIf(sampling_rate < 1)) AS sampled,
       sum(w) AS w_events,
       sum(w * w) AS w2_events,
       sum(w * n_claims) AS w_claims,
       sum(w * n_failed) AS w_failed,
       sum(w * w * n_claims) AS w2_claims,
       sum(w * w * n_claims * n_claims) AS w2_claims_sq,
       sum(w * w * n_failed * n_failed) AS w2_failed_sq,
       sum(w * w * n_failed * n_claims) AS w2_failed_claims,
       sumIf(w, action = 'served') AS w_served,
       sumIf(w, action = 'served' AND n_failed > 0) AS w_served_unsafe,
       sumIf(w, action = 'abstained') AS w_abstained,
       sumIf(w, is_answerable = 1) AS w_answerable,
       sumIf(w, is_answerable = 1 AND action = 'abstained') AS w_answerable_abstained,
       sumIf(w, is_answerable = 0) AS w_unanswerable,
       sumIf(w, is_answerable = 0 AND action = 'abstained') AS w_unanswerable_abstained,
       sum(w * countEqual(verdicts, 'supported')) AS w_supported,
       sum(w * countEqual(verdicts, 'unsupported')) AS w_unsupported,
       sum(w * countEqual(verdicts, 'contradicted')) AS w_contradicted,
       sum(w * countEqual(verdicts, 'overreach')) AS w_overreach,
       sum(w * countEqual(verdicts, 'stale')) AS w_stale,
       sum(w * countEqual(verdicts, 'no_source')) AS w_no_source
FROM
(
    SELECT route, observed_at, verdicts, action, answerable AS is_answerable, sampling_rate, query_type, stakes, versions,
           arrayCount(v -> v != 'trivial', verdicts) AS n_claims,
           arrayCount(v -> v IN ('unsupported', 'contradicted', 'overreach', 'stale', 'no_source'), verdicts) AS n_failed,
           1 / sampling_rate AS w
    FROM events
)
ARRAY JOIN arrayConcat(
    [('', ''), ('query_type', query_type), ('stakes', stakes),
     ('mix', concat('query_type=', if(query_type = '', '-', query_type), ' stakes=', if(stakes = '', '-', stakes)))],
    arrayMap((k, v) -> ('version.' || k, v), mapKeys(versions), mapValues(versions))
) AS slice
GROUP BY dim, value, route, minute;

-- The whole-route and mix rows again, ordered by minute: the evaluator reads every route's minutes minute by
-- minute, and rate_minute (ordered by route) made one minute of 10,000 routes read every route's granules. Its
-- TTL follows rate_minute's (services/store/retention.py).
CREATE TABLE IF NOT EXISTS rate_minute_by_time AS rate_minute
ENGINE = AggregatingMergeTree
ORDER BY (minute, dim, value, route)
TTL minute + toIntervalDay(400)
SETTINGS merge_selector_base = 20;

CREATE MATERIALIZED VIEW IF NOT EXISTS rate_minute_by_time_mv TO rate_minute_by_time AS
SELECT * FROM rate_minute WHERE dim IN ('', 'mix');

-- Invalid input: one row per bad event (envelope_index: its index in a batch envelope, -1 for a whole message);
-- the Kafka DLQ topic holds the full bytes. A dead letter is never overwritten: epoch is the topic's incarnation
-- (a restarted in-memory broker counts offsets from 0 again under a new topic id) and record the message's
-- fingerprint (its broker timestamp, key and bytes: services/ingest/ingestor.py RawMessage.fingerprint), so a
-- redelivery collapses into its row and another record at the same offset keeps its own. event_time: the event's
-- own observed_at where it has a usable one, else when it arrived; dead letters count per route and minute of it.
CREATE TABLE IF NOT EXISTS dlq
(
    topic String,
    partition Int32,
    offset Int64,
    envelope_index Int32 DEFAULT -1,
    epoch String,
    record UInt64,
    received_at DateTime64(3, 'UTC') DEFAULT now64(3),
    event_time DateTime64(3, 'UTC') DEFAULT received_at,
    rule LowCardinality(String),
    reason String,
    problems String,
    event_id String,
    route String,
    size UInt32,
    sample String                           -- first 2 KiB, base64
)
ENGINE = ReplacingMergeTree
ORDER BY (topic, partition, offset, envelope_index, epoch, record)
TTL toDateTime(received_at) + toIntervalDay(30);

-- Alerts: one row version per change; the newest (by updated_at) wins. State is derived from the timestamps,
-- never stored as a flag of its own. Acks are apart (alert_acks): only people write them, and the evaluator's
-- copy of an open alert, saved every minute, must not hide one.
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

-- The newest ack of an alert wins (a re-ack changes the note).
CREATE TABLE IF NOT EXISTS alert_acks
(
    alert_id String,
    acked_at DateTime64(3, 'UTC'),
    acked_by String,
    ack_note String
)
ENGINE = ReplacingMergeTree(acked_at)
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

-- The evaluator's state per route (services/alerts, evaluator state). Each route has a snapshot of its detectors
-- (slot 0, written about once an hour, staggered across routes) and the inputs the evaluator fed them since
-- (slot 1 + minute % 60, a ring: a route's row for a minute replaces the one an hour older); its open alerts have
-- slot 61. A restart loads each route's snapshot and replays its inputs, so it resumes exactly. The row of route ''
-- holds where the evaluator got to. One evaluation pass writes its rows in one insert, and `run` names the
-- evaluation they belong to (a fresh start begins another). The newest write of a key wins. (One value for the
-- fleet passed ClickHouse's 1 GiB string limit past about 1,500 routes.)
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
-- /api/rates compare with it). history_hours: while learning, the whole hours of history it has; NULL once learned.
CREATE TABLE IF NOT EXISTS route_expectations
(
    route String,
    minute DateTime('UTC'),
    expected Nullable(Float64),
    basis String,
    learning UInt8,
    history_hours Nullable(UInt32),
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY route;

-- The notification log (services/store/notifications.py), as Alertmanager keeps its nflog. A notification is logged
-- once per receiver and key before it is sent; its outcome is a newer row of the same (receiver, key) without the
-- body. A worker reloads what is still pending when it starts. Kept 7 days from when it was logged.
CREATE TABLE IF NOT EXISTS notification_log
(
    receiver LowCardinality(String),        -- alertmanager, webhook, issue_webhook
    key String,                             -- what it tells: alert/<alert_id>/<state>, issue/<delivery>
    state LowCardinality(String),           -- pending, delivered, failed (given up), dropped (shed from a full queue)
    url String,
    body String,                            -- the pending row's: the bytes to send
    headers Map(String, String),
    attempts UInt16,
    error String,                           -- the last failed attempt's
    created_at DateTime64(3, 'UTC'),        -- when it was logged
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (receiver, key)
TTL toDateTime(created_at) + INTERVAL 7 DAY;

-- Each receiver's run of failed attempts, for the ops page of any process (the dispatcher runs in the leader).
CREATE TABLE IF NOT EXISTS notification_receivers
(
    receiver LowCardinality(String),
    failing_since Nullable(DateTime64(3, 'UTC')),
    last_error String,
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY receiver;

-- Named issues (one row version per run or triage action; newest updated_at wins). The name is a title quoting the
-- most representative claim, the subtitle its keywords, dominant verdict, route, stage and versions
-- (clustering/naming.py). Triage that people set: the assignee, the condition it is archived until (JSON, '' when
-- not archived), its ticket's URL, and the versions current when it was resolved "in the next version".
-- neighbours: the most linked issues (issue id -> link ratio of their claims' nearest neighbours, written by the
-- tracker at each re-clustering), the evidence a suggested merge needs beside the centroids.
CREATE TABLE IF NOT EXISTS issues
(
    issue_id String,
    name String,
    subtitle String DEFAULT '',
    keywords Array(String),
    config_name LowCardinality(String),
    first_seen DateTime64(3, 'UTC'),
    last_seen DateTime64(3, 'UTC'),
    state LowCardinality(String),
    size UInt64,
    hourly_counts Map(String, UInt64),
    routes Map(String, UInt64),
    centroid Array(Float32),
    member_sample Array(String),
    sample_hash_cap UInt64,
    exemplar_ids Array(String),
    triaged UInt8,
    merged_into String,
    split_from String,
    history String,
    updated_at DateTime64(6, 'UTC'),
    assignee String DEFAULT '',
    archive String DEFAULT '',
    ticket_url String DEFAULT '',
    resolved_in Map(String, String) DEFAULT map(),
    neighbours Map(String, Float32) DEFAULT map()
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY issue_id;

-- claim_key is event_id:claim_idx; the newest assignment of a claim wins.
CREATE TABLE IF NOT EXISTS issue_members
(
    claim_key String,
    issue_id String,
    probability Float32,
    source LowCardinality(String),          -- 'batch' or 'online'
    config_name LowCardinality(String),
    x Float32,                              -- 2-D map position (batch runs)
    y Float32,
    observed_at DateTime64(3, 'UTC'),
    assigned_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(assigned_at)
ORDER BY claim_key;

CREATE TABLE IF NOT EXISTS embedding_cache
(
    model LowCardinality(String),
    key String,                             -- sha256 of the normalised text
    vector Array(Float32)
)
ENGINE = ReplacingMergeTree
ORDER BY (model, key);

-- Eval set, golden-set shape: items promoted from traces, their gold evidence spans, claim labels
-- (verifier and human), what each run did on each item, and an append-only history of state changes.

-- Mutable: one row per (item_id, version); read the current state with FINAL or argMax(..., version).
CREATE TABLE IF NOT EXISTS eval_items
(
    item_id String,
    query String,
    query_type LowCardinality(String),
    answerable Int8,                        -- 1 answerable, 0 unanswerable, -1 unknown (as in events)
    stakes LowCardinality(String),
    gold_answer Nullable(String),
    source_corpus_ver String,
    origin_issue_id String,
    origin_trace_id String,
    origin_event_id String,
    origin_route LowCardinality(String),
    state LowCardinality(String),           -- proposed | approved | rejected
    proposed_by String,
    proposed_at DateTime64(3, 'UTC'),
    reviewed_by String,
    reviewed_at Nullable(DateTime64(3, 'UTC')),
    review_reason String,
    embedding Array(Float32),               -- unit vector of the query, for near-duplicate checks
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY item_id;

CREATE TABLE IF NOT EXISTS gold_spans
(
    item_id String,
    span_idx UInt16,
    source_id String,
    span_text String,
    required UInt8
)
ENGINE = ReplacingMergeTree
ORDER BY (item_id, span_idx);

-- A later label by the same labeler on the same claim of the same run replaces the earlier one.
CREATE TABLE IF NOT EXISTS claim_labels
(
    run_id String,                          -- 'origin' = the production answer the item was promoted from
    item_id String,
    claim_idx UInt16,
    claim_text String,
    claim_type LowCardinality(String),
    verdict LowCardinality(String),
    supporting_span String,
    source_id String,
    labeler String,                         -- 'human:ID' or 'verifier:NAME'
    labeled_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(labeled_at)
ORDER BY (item_id, run_id, claim_idx, labeler);

-- What a run did on an item: needed for the abstention pair (an abstention has no claims to label).
CREATE TABLE IF NOT EXISTS eval_results
(
    run_id String,
    item_id String,
    action LowCardinality(String),          -- served | abstained | revised | blocked | review
    answer_text String,
    produced_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(produced_at)
ORDER BY (run_id, item_id);

CREATE TABLE IF NOT EXISTS eval_item_history
(
    item_id String,
    action LowCardinality(String),          -- proposed | approved | rejected | exported
    by String,
    reason String,
    at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (item_id, at);

-- Human review of claims: the queue of sampled claims, slot reservations and the labels.
-- claim_key is event_id:claim_idx, as in issue_members.

-- One row per queued claim. weight = 1 / the chance its stratum's claims had of being sampled that day,
-- so labels of oversampled strata (rare verdicts) do not bias the verifier's error rates.
CREATE TABLE IF NOT EXISTS review_queue
(
    claim_key String,
    event_id String,
    claim_idx UInt16,
    route LowCardinality(String),
    verdict LowCardinality(String),
    issue_id String,
    verifier_version String,
    origin LowCardinality(String),          -- production | eval
    stratum String,
    weight Float64,
    reviewers UInt8,
    observed_at DateTime64(3, 'UTC'),
    queued_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(queued_at)
ORDER BY claim_key;

-- Append-only. Several reviewers may race for one slot: each inserts, then reads back; the earliest
-- write (server time, then token) wins, so every reader agrees on the winner without a lock.
CREATE TABLE IF NOT EXISTS review_reservations
(
    token String,
    claim_key String,
    slot_no UInt8,
    reviewer String,
    reserved_at DateTime64(3, 'UTC'),
    expires_at DateTime64(3, 'UTC'),
    written_at DateTime64(6, 'UTC') DEFAULT now64(6)
)
ENGINE = MergeTree
ORDER BY (claim_key, slot_no, written_at, token);

-- A reviewer's label on a claim (role 'reviewer'), or the adjudicator's, which settles the claim.
CREATE TABLE IF NOT EXISTS review_labels
(
    claim_key String,
    slot_no UInt8,
    reviewer String,
    role LowCardinality(String),            -- reviewer | adjudicator
    label LowCardinality(String),
    span String,
    chunk_id String,
    guide_version String,
    blind UInt8 DEFAULT 1,                  -- 0: made while the claim's verdict was shown to its reviewer
    labeled_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(labeled_at)
ORDER BY (claim_key, role, reviewer);

-- The calibrated rate per route as the worker's leader computed it (services/review/calibration.py), one row
-- per route each time it samples for review: what Grafana shows beside the raw rate (it cannot bootstrap in SQL).
CREATE TABLE IF NOT EXISTS calibrated_rates
(
    computed_at DateTime64(3, 'UTC'),
    route LowCardinality(String),
    window_start DateTime64(3, 'UTC'),
    window_end DateTime64(3, 'UTC'),
    raw Nullable(Float64),
    rate Nullable(Float64),
    lower Nullable(Float64),
    upper Nullable(Float64),
    sensitivity Nullable(Float64),
    specificity Nullable(Float64),
    labels UInt32,
    pooled UInt8,
    stale UInt8,
    reasons String,
    verifier_version String
)
ENGINE = MergeTree
ORDER BY (route, computed_at);

-- Blind review that is blind: a read that shows a claim's verdict (issue members, exemplars, traces) while a
-- reviewer holds the claim unlabelled marks that reservation exposed (services/store/exposure.py). A label made
-- on an exposed reservation is kept with blind = 0: it fills no slot and counts in no agreement.
CREATE TABLE IF NOT EXISTS review_exposures
(
    token String,
    claim_key String,
    via LowCardinality(String),
    shown_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = MergeTree
ORDER BY (token, shown_at);

