-- A dead letter is never overwritten by a restart of the broker under a running worker either.
-- The epoch (010) is the topic's incarnation as the worker read it when it started; a broker restarted under
-- it counts offsets from 0 again under the same epoch. record: the message's fingerprint (its broker timestamp,
-- key and bytes, services/ingest/ingestor.py RawMessage.fingerprint), the same for a redelivery and another for
-- the record a new incarnation puts at the same offset. Rows stored before this migration keep 0.
ALTER TABLE dlq
    ADD COLUMN IF NOT EXISTS record UInt64 AFTER epoch,
    MODIFY ORDER BY (topic, partition, offset, envelope_index, epoch, record);
