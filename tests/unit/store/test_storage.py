"""The storage report against what was written: rows per table, bytes, bytes per claim and the TTLs in force."""

from __future__ import annotations

from services.contract.decode import reject
from services.ingest.records import DeadLetter
from services.store.retention import Retention, RetentionKeeper
from services.store.storage import StorageRepository
from services.store.writer import EventWriter
from tests.unit.store.test_store_backends import make_event, mixed_events


def test_the_report_counts_what_was_written(store):
    events = mixed_events(50)
    dead = [DeadLetter("claimwatch.verdicts", 0, i, b"{nope", reject("not_json", "", "not JSON")) for i in range(4)]
    EventWriter(store).write(events, dead)
    storage = StorageRepository(store)
    storage.compact()  # one part per table, so rows are final
    report = storage.report()
    tables = {t["table"]: t for t in report["tables"]}
    claims = sum(len(e.claims) for e in events)
    buckets = store.query("SELECT count() AS n FROM (SELECT DISTINCT dim, value, route, minute FROM rate_minute)")[0][
        "n"
    ]

    assert report["claims"] == claims == tables["claims"]["rows"]
    assert tables["events"]["rows"] == 50 and tables["dlq"]["rows"] == 4 and tables["rate_minute"]["rows"] == buckets
    assert tables["alerts"]["rows"] == 0 and tables["alerts"]["compressed_bytes"] == 0
    for t in report["tables"]:
        assert t["bytes_per_claim"] == round(t["compressed_bytes"] / claims, 1)
        if t["rows"]:
            assert 0 < t["compressed_bytes"] <= t["disk_bytes"] and t["uncompressed_bytes"] > 0
    assert [t["compressed_bytes"] for t in report["tables"]] == sorted(
        (t["compressed_bytes"] for t in report["tables"]), reverse=True
    )
    total = report["total"]
    assert total["rows"] == sum(t["rows"] for t in report["tables"])
    assert total["compressed_bytes"] == sum(t["compressed_bytes"] for t in report["tables"])
    assert total["bytes_per_claim"] == round(total["compressed_bytes"] / claims, 1)
    assert "schema_migrations" in tables and "claims_mv" not in tables  # views hold no data of their own
    for t in report["tables"]:  # merged: each table's bytes in ZSTD
        assert sum(t["codecs"].values()) == t["compressed_bytes"] and set(t["codecs"]) <= {"ZSTD(1)"}, t
    assert total["codecs"] == {"ZSTD(1)": total["compressed_bytes"]}


def test_the_report_shows_the_ttls_in_force(store):
    report = StorageRepository(store).report()
    assert report["claims"] == 0 and all(t["bytes_per_claim"] is None for t in report["tables"])
    ttls = {t["table"]: t["ttl_days"] for t in report["tables"]}
    assert ttls.pop("notification_log") == 7  # kept a week from when it was logged, whatever the retention
    assert not any(ttls.values())  # the fixture keeps everything
    RetentionKeeper(store).apply(Retention(14, 90))
    tables = {t["table"]: t for t in StorageRepository(store).report()["tables"]}
    assert {
        name: tables[name]["ttl_days"] for name in ("events", "claims", "dlq", "rate_minute", "alerts", "issues")
    } == {"events": 14, "claims": 14, "dlq": 14, "rate_minute": 90, "alerts": None, "issues": None}
    assert tables["events"]["ttl"] == "toDateTime(observed_at) + toIntervalDay(14)"


def of_parts(store, table: str, column: str) -> set[str]:
    """The values of a ``system.parts`` column over ``table``'s active parts."""
    return {
        r["v"]
        for r in store.query(
            f"SELECT {column} AS v FROM system.parts WHERE active "
            "AND database = currentDatabase() AND table = {t:String}",
            {"t": table},
        )
    }


def codecs(store, table: str) -> set[str]:
    return of_parts(store, table, "default_compression_codec")


def test_the_ingest_tables_merge_wide_and_their_merged_parts_are_zstd(store):
    """Migrations 022 and 023: every table ingest writes merges 20 similar parts at a time (fewer rewrites while
    ingest drains). That is cheap in bytes only because the store names its part codecs
    (services/store/clickhouse-compression.xml): an insert's part is LZ4, a merged one ZSTD."""
    created = {
        r["name"]: r["q"]
        for r in store.query(
            "SELECT name, create_table_query AS q FROM system.tables WHERE database = currentDatabase() "
            "AND name IN ('events', 'claims', 'rate_minute', 'event_keys')"
        )
    }
    assert {name for name, sql in created.items() if "merge_selector_base = 20" in sql} == set(created)
    events, writer = mixed_events(40), EventWriter(store)
    writer.write(events[:20])
    writer.write(events[20:])
    assert codecs(store, "events") == codecs(store, "claims") == {"LZ4"}
    reported = {t["table"]: t["codecs"] for t in StorageRepository(store).report()["tables"]}
    assert set(reported["events"]) == set(reported["claims"]) == {"LZ4"}
    StorageRepository(store).compact(["events", "claims"])
    assert codecs(store, "events") == codecs(store, "claims") == {"ZSTD(1)"}


def test_a_merge_of_at_least_16_mb_is_compressed_harder(store):
    """The text a store keeps longest, in its largest parts, gets ZSTD(3)."""
    store.command("CREATE TABLE big (k UInt64, s String) ENGINE = MergeTree ORDER BY k")
    for part in range(2):  # random text does not compress: each part is about 10 MB on disk
        store.command(f"INSERT INTO big SELECT number + {part} * 10000, randomPrintableASCII(1000) FROM numbers(10000)")
    store.command("OPTIMIZE TABLE big FINAL")
    assert codecs(store, "big") == {"ZSTD(3)"}


def test_an_insert_of_more_than_10_mb_of_text_is_written_compact(store):
    """Migration 024: the worker's inserts (about 13 MB of events each) are written in one file per part, not a
    file and a 1 MiB buffer per column, which held about 180 MiB an insert."""
    text = "The parcel left the depot on Monday and reaches the customer within three working days. " * 330
    events = [
        make_event(
            n,
            "parcel-status",
            ("supported",),
            minute=10,
            answer={"text": f"{n} {text}"},
            claims=[{"text": f"{n}.{i} {text}", "verdict": "supported"} for i in range(3)],
        )
        for n in range(200)
    ]
    EventWriter(store).write(events)
    written = store.query(
        "SELECT table, sum(data_uncompressed_bytes) AS b FROM system.parts WHERE active "
        "AND database = currentDatabase() AND table IN ('events', 'claims') GROUP BY table"
    )
    assert {r["table"]: r["b"] > 10 << 20 for r in written} == {"events": True, "claims": True}
    assert of_parts(store, "events", "part_type") == of_parts(store, "claims", "part_type") == {"Compact"}
