-- Acks apart from the alerts they acknowledge. The evaluator saves its own copy of each open alert every
-- minute, and that copy never knew of an ack made through the API since; as the newest version it hid the
-- ack (alerts showed acked for under a minute), and a merge of the ReplacingMergeTree would have dropped
-- it for good. Only people write here; the newest ack of an alert wins (a re-ack changes the note).
CREATE TABLE IF NOT EXISTS alert_acks
(
    alert_id String,
    acked_at DateTime64(3, 'UTC'),
    acked_by String,
    ack_note String
)
ENGINE = ReplacingMergeTree(acked_at)
ORDER BY alert_id;

INSERT INTO alert_acks SELECT alert_id, argMax(acked_at, updated_at), argMax(acked_by, updated_at), argMax(ack_note, updated_at)
FROM alerts WHERE acked_at IS NOT NULL GROUP BY alert_id;
