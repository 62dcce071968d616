-- Retention (issue 17): TTLs on event time, so a backfill expires by when its answers happened, not when
-- they arrived. These are the defaults (raw 30 days, minute aggregates 400 days); settings.retention
-- changes them on start (services/store/retention.py). Alerts, issues and the eval set have no TTL.
ALTER TABLE events MODIFY TTL toDateTime(observed_at) + toIntervalDay(30);
ALTER TABLE claims MODIFY TTL toDateTime(observed_at) + toIntervalDay(30);
ALTER TABLE dlq MODIFY TTL toDateTime(received_at) + toIntervalDay(30);
ALTER TABLE rate_minute MODIFY TTL minute + toIntervalDay(400);
