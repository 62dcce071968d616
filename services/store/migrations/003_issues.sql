-- Named issues (one row version per run or triage action; newest updated_at wins),
-- the claim -> issue assignments (batch runs and online), and the embedding cache.
CREATE TABLE IF NOT EXISTS issues
(
    issue_id String,
    name String,
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
    updated_at DateTime64(6, 'UTC')
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
