"""`claimwatch backtest` keeps its rejected lines as dead letters, per route and minute of the replay's own
clock, as live ingest does; and an event time the store cannot hold is refused, not counted in 1970."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from services.alerts.evaluation.backtest import BucketLoader, read_chunks
from services.app.compose import run_backtest
from services.app.settings import Settings
from services.contract.decode import Decoder
from services.ingest.records import OUTSIDE_STORE_RANGE
from services.store.dlq import DeadLetterRepository
from services.store.rates import RateRepository
from services.store.scratch import private_store

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
EVENT = {"schema": "claimwatch.verdict/v1", "trace_id": "t", "claims": [{"verdict": "supported"}]}


def event(event_id: str, route: str, observed_at: str, **over) -> bytes:
    return orjson.dumps({**EVENT, "event_id": event_id, "route": route, "observed_at": observed_at, **over})


LINES = [
    b"not json",  # 0: before any valid event
    event("v1", "a", "2026-11-21T09:00:10Z"),
    event("x2", "a", "2026-11-21T09:03:20Z", claims=[{"verdict": "maybe"}]),  # 2: its own time
    event("v3", "b", "2026-11-21T09:05:00Z"),
    event("x4", "a", "1969-12-31T23:59:59Z"),  # 4: valid, but not storable
    orjson.dumps({"route": "b", "claims": "x"}),  # 5: no time at all
    event("v6", "a", "2026-11-21T09:02:00Z"),  # a late event: the clock stays
    orjson.dumps({"route": "c", "observed_at": "2026-11-21T09:07:00"}),  # 7: no offset, read as UTC
]


def write(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def minute(m: int) -> datetime:
    return T0 + timedelta(minutes=m)


def test_rejected_lines_count_per_route_in_their_own_minute_or_the_replays(tmp_path):
    store = private_store(tmp_path / "store")
    try:
        loader = BucketLoader(store, Decoder(), "events.jsonl")
        loader.load(read_chunks(write(tmp_path, LINES), size=3))  # chunks cut between a line and its dating
        assert (loader.stored, loader.rejected) == (3, 5)
        assert DeadLetterRepository(store).rejected_minutes(minute(0), minute(10)) == [
            {"route": "", "minute": minute(0), "rejected": 1},  # dated by the first valid event
            {"route": "a", "minute": minute(3), "rejected": 1},
            {"route": "a", "minute": minute(5), "rejected": 1},  # the latest valid time, not the late one's
            {"route": "b", "minute": minute(5), "rejected": 1},
            {"route": "c", "minute": minute(7), "rejected": 1},
        ]
        [unstorable] = [s for s in DeadLetterRepository(store).summary() if s["reason"] == OUTSIDE_STORE_RANGE]
        assert unstorable["samples"][0]["source"] == "events.jsonl/0/4"
        assert RateRepository(store).first_minute() == minute(0)  # nothing counted in 1970
    finally:
        store.close()


def test_a_file_without_a_valid_event_keeps_its_rejections_in_the_stores_first_minute(tmp_path):
    store = private_store(tmp_path / "store")
    try:
        loader = BucketLoader(store, Decoder())
        loader.load(read_chunks(write(tmp_path, [b"nope", b"{}"])))
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        assert DeadLetterRepository(store).rejected_minutes(epoch, epoch) == [
            {"route": "", "minute": epoch, "rejected": 2}
        ]
    finally:
        store.close()


def test_an_event_from_1900_does_not_make_the_replay_walk_from_1970(tmp_path):
    lines = [event(f"v{m}", "a", (minute(m)).isoformat()) for m in range(5)] + [
        event("old", "a", "1900-01-01T00:00:00Z")
    ]
    summary = run_backtest(write(tmp_path, lines), tmp_path / "alerts.jsonl", Settings())
    assert (summary.events, summary.rejected, summary.minutes) == (5, 1, 5)
