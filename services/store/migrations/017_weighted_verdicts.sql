-- Weighted verdict shares (issue 24). A sampled answer stands for 1 / sampling.rate answers in every figure,
-- so the per-verdict shares the route page and the alert's driving verdict read carry each verdict's weighted
-- claims too (Σ w·count). Rows stored before are unweighted, and are given their counts.
ALTER TABLE rate_minute
    ADD COLUMN IF NOT EXISTS w_supported SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_unsupported SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_contradicted SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_overreach SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_stale SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_no_source SimpleAggregateFunction(sum, Float64);

ALTER TABLE rate_minute UPDATE w_supported = supported, w_unsupported = unsupported, w_contradicted = contradicted, w_overreach = overreach, w_stale = stale, w_no_source = no_source
    WHERE w_events != 0 AND w_supported + w_unsupported + w_contradicted + w_overreach + w_stale + w_no_source = 0
    SETTINGS mutations_sync = 2;

-- The view is 014's with the six sums added.
DROP VIEW IF EXISTS rate_minute_mv;

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
