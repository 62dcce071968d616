-- Sampled verification (issue 24): an answer verified with probability sampling.rate stands for 1/rate
-- answers of the traffic. events keeps the rate; rate_minute keeps the weighted sums every population
-- estimate needs (the ratio of weighted failed to weighted claims, its answer-clustered interval, the
-- effective sample size, and the weighted unsafe-serve and abstention shares). With every rate 1 each w* sum equals its unweighted one, which is what
-- rows stored before this migration are given.
ALTER TABLE events ADD COLUMN IF NOT EXISTS sampling_rate Float64 DEFAULT 1;

ALTER TABLE rate_minute
    ADD COLUMN IF NOT EXISTS sampled SimpleAggregateFunction(sum, Int64),
    ADD COLUMN IF NOT EXISTS w_events SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w2_events SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_claims SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_failed SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w2_claims SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w2_claims_sq SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w2_failed_sq SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w2_failed_claims SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_served SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_served_unsafe SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_abstained SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_answerable SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_answerable_abstained SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_unanswerable SimpleAggregateFunction(sum, Float64),
    ADD COLUMN IF NOT EXISTS w_unanswerable_abstained SimpleAggregateFunction(sum, Float64);

ALTER TABLE rate_minute UPDATE w_events = events, w2_events = events, w_claims = claims, w_failed = failed,
    w2_claims = claims, w2_claims_sq = claims_sq, w2_failed_sq = failed_sq, w2_failed_claims = failed_claims,
    w_served = served, w_served_unsafe = served_unsafe, w_abstained = abstained, w_answerable = answerable,
    w_answerable_abstained = answerable_abstained, w_unanswerable = unanswerable,
    w_unanswerable_abstained = unanswerable_abstained
    WHERE w_events = 0 AND events != 0 SETTINGS mutations_sync = 2;

DROP VIEW IF EXISTS rate_minute_mv;

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
       toInt64(answerable = 0 AND action = 'abstained') AS unanswerable_abstained,
       toInt64(sampling_rate < 1) AS sampled,
       w AS w_events,
       w * w AS w2_events,
       w * n_claims AS w_claims,
       w * n_failed AS w_failed,
       w * w * n_claims AS w2_claims,
       w * w * n_claims * n_claims AS w2_claims_sq,
       w * w * n_failed * n_failed AS w2_failed_sq,
       w * w * n_failed * n_claims AS w2_failed_claims,
       w * (action = 'served') AS w_served,
       w * (action = 'served' AND n_failed > 0) AS w_served_unsafe,
       w * (action = 'abstained') AS w_abstained,
       w * (answerable = 1) AS w_answerable,
       w * (answerable = 1 AND action = 'abstained') AS w_answerable_abstained,
       w * (answerable = 0) AS w_unanswerable,
       w * (answerable = 0 AND action = 'abstained') AS w_unanswerable_abstained
FROM
(
    SELECT *,
           arrayCount(v -> v != 'trivial', verdicts) AS n_claims,
           arrayCount(v -> v IN ('unsupported', 'contradicted', 'overreach', 'stale', 'no_source'), verdicts) AS n_failed,
           1 / sampling_rate AS w
    FROM events
)
ARRAY JOIN arrayConcat(
    [('', ''), ('query_type', query_type), ('stakes', stakes),
     ('mix', concat('query_type=', if(query_type = '', '-', query_type), ' stakes=', if(stakes = '', '-', stakes)))],
    arrayMap((k, v) -> ('version.' || k, v), mapKeys(versions), mapValues(versions))
) AS slice;
