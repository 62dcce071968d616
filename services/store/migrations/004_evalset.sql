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
