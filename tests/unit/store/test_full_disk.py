"""A store on a disk too full to write, on a real filesystem: every write says so, none pretends, and once space
returns every event is stored exactly once."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.client.simulate import Scenario, expected_counts, generate
from services.contract.decode import Decoder, reject
from services.contract.model import VerdictEvent
from services.core.errors import StoreError
from services.ingest.records import DeadLetter
from services.store.retention import KEEP_EVERYTHING
from services.store.writer import EventWriter
from tests.support.filesystems import filled, small_filesystem

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


@pytest.fixture
def disk(tmp_path):
    with small_filesystem(tmp_path / "disk", 96) as path:
        yield path


@pytest.fixture
def small_store(disk, store_templates):
    store = store_templates.fresh(disk / "clickhouse", KEEP_EVERYTHING)
    yield store
    store.close()


def stored(store) -> tuple[int, int, int]:
    """(answers, claims counted in the minute aggregates, claim rows)."""
    agg = store.query("SELECT sum(events) AS e, sum(claims) AS c FROM rate_minute WHERE dim = ''")[0]
    return (
        store.query("SELECT count() AS n FROM events FINAL")[0]["n"],
        int(agg["c"] or 0),
        store.query("SELECT count() AS n FROM claims FINAL")[0]["n"],
    )


@pytest.mark.slow
def test_a_full_disk_fails_the_write_and_the_retry_stores_each_event_once(small_store, disk):
    sims = list(generate(Scenario.demo(corpus_change_at=None), START, 6, seed=5))
    decoder = Decoder()
    events = [r for sim in sims for _, r in decoder.decode_message(sim.raw) if isinstance(r, VerdictEvent)]
    first, second = events[: len(events) // 2], events[len(events) // 2 :]
    writer = EventWriter(small_store)
    writer.write(first)
    before = stored(small_store)

    with filled(disk, leave_bytes=256 << 10):
        for _ in range(2):  # a retry on a disk still full fails the same way
            with pytest.raises(StoreError, match="the disk under the store is full"):
                writer.write(second)
        assert stored(small_store) == before
    result = writer.write(second)  # space is back: the batch is written again

    assert result.inserted == len({e.event_id for e in second} - {e.event_id for e in first})
    expected = expected_counts(sims)
    answers, claims, rows = stored(small_store)
    assert answers == expected.valid_events
    assert claims == sum(expected.claims(route) for route in expected.events)
    assert writer.write(second).inserted == 0  # and a redelivery after that changes nothing
    assert stored(small_store) == (answers, claims, rows)


def test_every_other_insert_on_a_full_disk_raises(small_store, disk):
    """Alerts, dead letters, labels: each goes in as one statement, which reports the failure."""
    rejection = reject("json.invalid", "$", "not JSON")
    dead = DeadLetter("verdicts", 0, 7, b"{", rejection, None, None, "", "billing-faq", START)
    with filled(disk, leave_bytes=64 << 10):
        with pytest.raises(StoreError, match="not enough space"):
            small_store.insert(
                "silences", [{"silence_id": "x", "body": "y" * (2 << 20), "ends_at": 1, "updated_at": 1}]
            )
        with pytest.raises(StoreError):
            EventWriter(small_store).write([], [dead] * 5000)
    assert small_store.query("SELECT count() AS n FROM dlq")[0]["n"] == 0
