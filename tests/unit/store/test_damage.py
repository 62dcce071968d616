"""A part of the store damaged on disk (its data file deleted while nothing ran), on the real engine: found
before anything consumes, never repaired into lower rates, and recovered exactly by a rebuild and a replay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.client.simulate import Scenario, expected_counts, generate
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.core.clock import utcnow
from services.store.backends import ChdbStore
from services.store.damage import find_damage, rebuild
from services.store.repair import repair_recent
from services.store.retention import KEEP_EVERYTHING
from services.store.writer import EventWriter

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


def batches(n: int) -> list[list]:
    decoder = Decoder()
    out = []
    for k in range(n):
        sims = list(generate(Scenario.demo(corpus_change_at=None), START + timedelta(minutes=4 * k), 4, seed=k))
        out.append((sims, [r for s in sims for _, r in decoder.decode_message(s.raw) if isinstance(r, VerdictEvent)]))
    return out


def totals(store) -> dict:
    rates = store.query(
        "SELECT sum(events) AS events, sum(claims) AS claims, sum(failed) AS failed FROM rate_minute WHERE dim = ''"
    )[0]
    return {
        **{k: int(v) for k, v in rates.items()},
        "answers": store.query("SELECT count() AS n FROM events FINAL")[0]["n"],
        "keys": store.query("SELECT count() AS n FROM event_keys FINAL")[0]["n"],
        "claim_rows": store.query("SELECT count() AS n FROM claims FINAL")[0]["n"],
    }


@pytest.fixture
def damaged(tmp_path, store_templates):
    """A store of four parts, one of whose `events` data file is deleted between two runs."""
    path = tmp_path / "clickhouse"
    written = batches(4)
    store = store_templates.fresh(path, KEEP_EVERYTHING)
    store.command("SYSTEM STOP MERGES")
    for _, events in written:
        EventWriter(store).write(events)
    whole = totals(store)
    parts = [
        r["name"] for r in store.query("SELECT name FROM system.parts WHERE table = 'events' AND active ORDER BY name")
    ]
    store.close()
    Path(path, "data", "default", "events", parts[1], "data.bin").unlink()
    store = ChdbStore(path)
    yield store, written, whole
    store.close()


@pytest.mark.slow
def test_damage_is_found_never_repaired_into_lower_rates_and_a_rebuild_then_replay_restores_it_exactly(damaged):
    store, written, whole = damaged
    [part] = find_damage(store)
    assert (part.table, part.problem) == ("events", "detached as broken-on-start")
    assert part.rows == len({e.event_id for e in written[1][1]})  # what was lost, before anything is done about it

    assert not repair_recent(store, utcnow(), timedelta(days=3650)).changed  # the start-up repair lowers nothing
    assert totals(store)["events"] == whole["events"]

    report = rebuild(store, utcnow(), [part])
    assert report.answers_lost == part.rows and report.parts_dropped == [f"events {part.part}"]
    assert find_damage(store) == []
    now = totals(store)
    assert now["events"] == now["answers"] == now["keys"] == whole["answers"] - part.rows  # agree with what is held
    assert report.lost_from is not None and report.lost_from <= report.lost_until

    writer = EventWriter(store)
    for _, events in written:  # replay the whole source: only what was lost is stored again
        writer.write(events)
    assert totals(store) == whole
    expected = expected_counts([s for sims, _ in written for s in sims])
    assert whole["answers"] == expected.valid_events
