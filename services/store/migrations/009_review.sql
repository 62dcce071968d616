-- Human review of claims (issue 16): the queue of sampled claims, slot reservations and the labels.
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
