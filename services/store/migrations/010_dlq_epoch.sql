-- Dead letters are never overwritten, and count per route and minute of event time.
-- epoch: the incarnation of the log an offset belongs to (the verdicts topic's id, which a restarted
-- in-memory broker gives anew while it counts offsets from 0 again). It joins the sorting key, so a
-- redelivery within one incarnation still collapses and a new incarnation's offset 0 keeps the old row.
-- event_time: the event's own observed_at where it has a usable one, else when it arrived; rows stored
-- before this migration take received_at. Unlike 007, no rebuild: a column without a default expression
-- may join the sorting key in the ALTER that adds it, and the table keeps its TTL.
ALTER TABLE dlq
    ADD COLUMN IF NOT EXISTS epoch String AFTER envelope_index,
    ADD COLUMN IF NOT EXISTS event_time DateTime64(3, 'UTC') DEFAULT received_at AFTER received_at,
    MODIFY ORDER BY (topic, partition, offset, envelope_index, epoch);
