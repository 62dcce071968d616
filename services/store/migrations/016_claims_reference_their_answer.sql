-- No copied text (issue 25). A claim row references its answer (event_id) and no longer copies the
-- question, the answer or the signals into every claim: readers that need them join ``events``
-- (services/store/issues.py, with_answer_text). Rows stored before keep theirs; the join reads the event's.
DROP VIEW IF EXISTS claims_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS claims_mv TO claims AS
SELECT event_id, idx - 1 AS claim_idx, claim_ids[idx] AS claim_id, trace_id, route, observed_at,
       verdicts[idx] AS verdict, claim_types[idx] AS claim_type, claim_texts[idx] AS text, scores[idx] AS score,
       chunk_ids[idx] AS chunk_id, source_ids[idx] AS source_id, spans[idx] AS span, labelers[idx] AS labeler,
       versions, query_type, stakes, action, first_failed_stage
FROM events
ARRAY JOIN arrayEnumerate(verdicts) AS idx;
