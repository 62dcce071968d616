-- The worker's intake (issue 25). Validated events go in as JSON, one line each (the values in the model's
-- field order, which the columns and tuples below follow: services/ingest/records.py's intake_line), and
-- this view builds the events row from them inside ClickHouse, outside the worker's GIL: the Python side
-- only encodes the decoded structs (msgspec), instead of building two dozen Arrow columns. Nothing is kept
-- here (Null engine); events, and the views on events, receive the rows as from any other insert, and a
-- retried insert with the same deduplication token is a no-op in each of them.
-- evidence and signals arrive as JSON and are kept as their text (input_format_json_read_*_as_strings).
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
