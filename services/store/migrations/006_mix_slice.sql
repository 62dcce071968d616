-- The mix slice (query type x stakes), which drift detection standardises over: an alert splits a
-- rise into a mix effect (more hard questions) and a rate effect (worse on the same questions);
-- see services/alerts/baseline.py. Minutes stored before this migration have no mix slice.
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
       toInt64(answerable = 0 AND action = 'abstained') AS unanswerable_abstained
FROM
(
    SELECT *,
           arrayCount(v -> v != 'trivial', verdicts) AS n_claims,
           arrayCount(v -> v IN ('unsupported', 'contradicted', 'overreach', 'stale', 'no_source'), verdicts) AS n_failed
    FROM events
)
ARRAY JOIN arrayConcat(
    [('', ''), ('query_type', query_type), ('stakes', stakes),
     ('mix', concat('query_type=', if(query_type = '', '-', query_type), ' stakes=', if(stakes = '', '-', stakes)))],
    arrayMap((k, v) -> ('version.' || k, v), mapKeys(versions), mapValues(versions))
) AS slice;
