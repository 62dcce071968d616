"""Retention: the schema sets TTLs on event time, a changed policy is applied once, expired rows go at a merge.

The migration and policy tests run over both back ends (chDB, and a ClickHouse server's HTTP interface in
front of chDB); the rest on chDB through the `store` fixture, whose TTLs are put back where a test needs them.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from services.core.clock import utcnow
from services.store.migrate import migrate
from services.store.repair import repair, repair_recent
from services.store.retention import KEEP_EVERYTHING, MAX_DAYS, RETAINED_TABLES, Retention, RetentionKeeper, ttl_days
from services.store.storage import StorageRepository
from services.store.writer import EventWriter
from tests.unit.store.test_store_backends import BACKENDS, make_event, open_backend

ALL_RETAINED = ["claims", "dlq", "event_keys", "events", "rate_minute", "rate_minute_by_time"]
KEPT = (
    "alerts",
    "alert_transitions",
    "silences",
    "issues",
    "issue_members",
    "embedding_cache",
    "eval_items",
    "gold_spans",
    "claim_labels",
    "eval_results",
    "eval_item_history",
)


def engines(store) -> dict[str, str]:
    return {
        r["name"]: r["engine_full"]
        for r in store.query("SELECT name, engine_full FROM system.tables WHERE database = currentDatabase()")
    }


def ttl_mutations(store) -> int:
    return store.query("SELECT count() AS n FROM system.mutations WHERE command LIKE '%TTL%'")[0]["n"]


def observed(age: timedelta, n: int, route: str = "billing-faq"):
    """An event observed ``age`` ago (whole minutes, so minute buckets are easy to tell apart)."""
    at = (utcnow() - age).replace(second=n % 60, microsecond=0)
    return make_event(n, route, ("supported", "contradicted", "trivial"), observed_at=at.isoformat())


def counts(store) -> dict[str, int]:
    return {
        "events": store.query("SELECT count() AS n FROM events")[0]["n"],
        "claims": store.query("SELECT count() AS n FROM claims")[0]["n"],
        "rate_events": store.query("SELECT sum(events) AS n FROM rate_minute WHERE dim = ''")[0]["n"],
    }


@pytest.mark.parametrize("kind", BACKENDS)
def test_the_migration_sets_ttls_on_event_time_and_keeps_alerts_issues_and_the_eval_set(kind: str, tmp_path: Path):
    with open_backend(kind, tmp_path) as store:
        migrate(store)
        tables = engines(store)
        for table in ("events", "claims", "event_keys"):
            assert "TTL toDateTime(observed_at) + toIntervalDay(30)" in tables[table], tables[table]
        assert "TTL toDateTime(received_at) + toIntervalDay(30)" in tables["dlq"]
        assert "TTL minute + toIntervalDay(400)" in tables["rate_minute"]
        for table in KEPT:
            assert " TTL " not in tables[table], (table, tables[table])
        # The policy's defaults are the migration's: a default start changes nothing.
        assert RetentionKeeper(store).apply(Retention()) == []


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_changed_policy_is_applied_once_and_an_unchanged_one_not_at_all(kind: str, tmp_path: Path):
    with open_backend(kind, tmp_path) as store:
        migrate(store)
        keeper = RetentionKeeper(store)
        before = ttl_mutations(store)
        assert sorted(keeper.apply(Retention(7, 90))) == ALL_RETAINED
        ttls = keeper.ttls()
        assert [
            ttl_days(ttls[t]) for t in ("events", "claims", "event_keys", "dlq", "rate_minute", "rate_minute_by_time")
        ] == [7, 7, 7, 7, 90, 90]
        assert ttls["rate_minute"] == "minute + toIntervalDay(90)"
        applied = ttl_mutations(store)
        assert applied > before  # each ALTER materialises its TTL on the existing parts
        assert keeper.apply(Retention(7, 90)) == []
        assert ttl_mutations(store) == applied  # nothing re-applied
        assert keeper.apply(Retention(7, 120)) == ["rate_minute", "rate_minute_by_time"]  # only what differs
        assert sorted(keeper.apply(KEEP_EVERYTHING)) == ALL_RETAINED
        assert not any(keeper.ttls()[t] for t in RETAINED_TABLES)


def test_rows_older_than_the_ttl_go_at_a_merge_and_newer_ones_stay(store):
    keeper = RetentionKeeper(store)
    keeper.apply(Retention(30, 400))
    ages = {
        "an hour": timedelta(hours=1),
        "10 days": timedelta(days=10),
        "40 days": timedelta(days=40),
        "450 days": timedelta(days=450),
    }
    writer = EventWriter(store)
    for n, age in enumerate(ages.values()):
        assert writer.write([observed(age, 10 * n + i) for i in range(3)]).inserted == 3  # a backfill, by event time
    store_rows = StorageRepository(store)
    store_rows.compact()
    # Raw rows within 30 days stay (2 ages x 3 events x 3 claims); aggregates within 400 days stay (3 ages).
    assert counts(store) == {"events": 6, "claims": 18, "rate_events": 9}

    keeper.apply(Retention(7, 20))  # shorter: applied to the parts already stored
    store_rows.compact()
    assert counts(store) == {"events": 3, "claims": 9, "rate_events": 6}


def test_replaying_an_expired_event_counts_its_aggregates_again(store):
    """Documented behaviour (services/store/retention.py): dedup sees an event only while its raw row is stored."""
    RetentionKeeper(store).apply(Retention(30, 400))
    old = [observed(timedelta(days=40), i) for i in range(2)]
    writer = EventWriter(store)
    writer.write(old)
    StorageRepository(store).compact()
    assert counts(store) == {"events": 0, "claims": 0, "rate_events": 2}
    # An identical batch is still caught by its insert dedup token; a replay batched differently is not.
    writer.write(old)
    assert counts(store)["rate_events"] == 2
    for event in old:
        writer.write([event])
    assert counts(store)["rate_events"] == 4


def test_repair_leaves_the_buckets_of_expiring_answers_alone(store):
    """Some answers of a minute expired, others not yet: re-deriving that bucket from the rest would undercount."""
    RetentionKeeper(store).apply(Retention(30, 400))
    writer = EventWriter(store)
    age = timedelta(days=40)
    writer.write([observed(age, i) for i in range(3)])
    StorageRepository(store).compact(["events"])  # the TTL merge took these from `events`, not from the aggregates
    # and has not reached these yet: no merge of `events` at all, since any merge drops expired rows (a merge of
    # the new part with the emptied one, mid-repair, once made this test see no bucket to correct)
    store.command("SYSTEM STOP MERGES events")
    writer.write([observed(age, i) for i in range(3, 5)])
    assert counts(store)["rate_events"] == 5

    assert repair_recent(store, utcnow()).buckets_corrected == 0
    assert counts(store)["rate_events"] == 5
    # Nor without the guard: a repair never lowers a bucket to the answers still in `events` (issue 49 part 6).
    assert repair(store, utcnow() - timedelta(hours=1)).buckets_corrected == 0
    assert counts(store)["rate_events"] == 5


def test_the_default_policy_needs_no_migration_to_agree(store):
    keeper = RetentionKeeper(store)
    assert not any(
        keeper.ttls()[t] for t in RETAINED_TABLES
    )  # the fixture keeps everything (its event times are fixed)
    assert sorted(keeper.apply(Retention())) == ALL_RETAINED
    assert keeper.apply(Retention()) == []


def test_the_longest_retention_keeps_fresh_rows_and_a_longer_one_is_refused(store):
    """A TTL is a DateTime, which ends in 2106: 100 years would wrap into the past and expire everything."""
    RetentionKeeper(store).apply(Retention(MAX_DAYS, MAX_DAYS))
    EventWriter(store).write([observed(timedelta(hours=1), i) for i in range(3)])
    StorageRepository(store).compact()
    assert counts(store) == {"events": 3, "claims": 9, "rate_events": 3}
    with pytest.raises(ValueError, match=f"raw_days must be between 1 and {MAX_DAYS} days, got 36500"):
        Retention(36_500, 36_500)
