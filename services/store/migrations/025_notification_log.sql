-- The notification log (services/store/notifications.py), as Alertmanager keeps its nflog. A notification is
-- logged once per receiver and key before it is sent; its outcome is a newer row of the same (receiver, key)
-- without the body. A worker reloads what is still pending when it starts. Kept 7 days from when it was logged.
CREATE TABLE IF NOT EXISTS notification_log
(
    receiver LowCardinality(String),        -- alertmanager, webhook, issue_webhook
    key String,                             -- what it tells: alert/<alert_id>/<state>, issue/<delivery>
    state LowCardinality(String),           -- pending, delivered, failed (given up), dropped (shed from a full queue)
    url String,
    body String,                            -- the pending row's: the bytes to send
    headers Map(String, String),
    attempts UInt16,
    error String,                           -- the last failed attempt's
    created_at DateTime64(3, 'UTC'),        -- when it was logged
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY (receiver, key)
TTL toDateTime(created_at) + INTERVAL 7 DAY;

-- Each receiver's run of failed attempts, for the ops page of any process (the dispatcher runs in the leader).
CREATE TABLE IF NOT EXISTS notification_receivers
(
    receiver LowCardinality(String),
    failing_since Nullable(DateTime64(3, 'UTC')),
    last_error String,
    updated_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY receiver;

-- Alert transitions recorded before the log existed were notified (or not) by then: a start after this
-- migration must not announce them again (services/alerts/cycle.py re-plans transitions the log lacks).
INSERT INTO notification_log (receiver, key, state, created_at, updated_at)
SELECT '', concat('alert/', alert_id, '/', state), 'delivered', at, at FROM alert_transitions
WHERE state IN ('firing', 'resolved');
