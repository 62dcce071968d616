"""The storage report against what was written: rows per table, bytes, bytes per claim and the TTLs in force."""
from __future__ import annotations

from services.store.retention import Retention, RetentionKeeper
from services.store.storage import StorageRepository
from services.store.writer import EventWriter
from services.ingest.records import DeadLetter
from services.contract.decode import reject
from tests.unit.store.test_store_backends import mixed_events


def test_the_report_counts_what_was_written(store):
    events = mixed_events(50)
    dead = [DeadLetter("claimwatch.verdicts", 0, i, b"{nope", reject("not_json", "", "not JSON")) for i in range(4)]
    EventWriter(store).write(events, dead)
    storage = StorageRepository(store)
    storage.compact()  # one part per table, so rows are final
    report = storage.report()
    tables = {t["table"]: t for t in report["tables"]}
    claims = sum(len(e.claims) for e in events)
    buckets = store.query("SELECT count() AS n FROM (SELECT DISTINCT dim, value, route, minute FROM rate_minute)")[0]["n"]

    assert report["claims"] == claims == tables["claims"]["rows"]
    assert tables["events"]["rows"] == 50 and tables["dlq"]["rows"] == 4 and tables["rate_minute"]["rows"] == buckets
    assert tables["alerts"]["rows"] == 0 and tables["alerts"]["compressed_bytes"] == 0
    for t in report["tables"]:
        assert t["bytes_per_claim"] == round(t["compressed_bytes"] / claims, 1)
        if t["rows"]:
            assert 0 < t["compressed_bytes"] <= t["disk_bytes"] and t["uncompressed_bytes"] > 0
    assert [t["compressed_bytes"] for t in report["tables"]] == sorted((t["compressed_bytes"] for t in report["tables"]),
                                                                       reverse=True)
    total = report["total"]
    assert total["rows"] == sum(t["rows"] for t in report["tables"])
    assert total["compressed_bytes"] == sum(t["compressed_bytes"] for t in report["tables"])
    assert total["bytes_per_claim"] == round(total["compressed_bytes"] / claims, 1)
    assert "schema_migrations" in tables and "claims_mv" not in tables  # views hold no data of their own


def test_the_report_shows_the_ttls_in_force(store):
    report = StorageRepository(store).report()
    assert report["claims"] == 0 and all(t["bytes_per_claim"] is None for t in report["tables"])
    assert all(t["ttl"] is None for t in report["tables"])  # the fixture keeps everything
    RetentionKeeper(store).apply(Retention(14, 90))
    tables = {t["table"]: t for t in StorageRepository(store).report()["tables"]}
    assert {name: tables[name]["ttl_days"] for name in ("events", "claims", "dlq", "rate_minute", "alerts", "issues")} == {
        "events": 14, "claims": 14, "dlq": 14, "rate_minute": 90, "alerts": None, "issues": None}
    assert tables["events"]["ttl"] == "toDateTime(observed_at) + toIntervalDay(14)"


def test_only_the_tables_whose_text_does_not_need_large_merges_merge_wider(store):
    """Migration 022: rate_minute and event_keys merge wide (fewer rewrites while ingest drains). events and
    claims keep the default base, because chDB compresses only large merges with ZSTD and wider merges of the
    text tables left it in LZ4 at nearly twice the bytes per claim."""
    created = {r["name"]: r["q"] for r in store.query(
        "SELECT name, create_table_query AS q FROM system.tables WHERE database = currentDatabase() "
        "AND name IN ('events', 'claims', 'rate_minute', 'event_keys')")}
    assert {name for name, sql in created.items() if "merge_selector_base = 20" in sql} == {"rate_minute", "event_keys"}
    assert not any("merge_selector_base" in created[name] for name in ("events", "claims"))
