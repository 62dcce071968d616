"""Dead letters in the store: kept per log incarnation (epoch) and record, counted per route and minute of event
time."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from services.contract.decode import reject
from services.ingest.ingestor import RawMessage
from services.ingest.records import DeadLetter
from services.store.dlq import DeadLetterRepository
from services.store.writer import EventWriter

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


def dead(
    offset: int,
    rule: str = "not_json",
    epoch: str = "",
    route: str = "billing-faq",
    minute: int = 0,
    index: int | None = None,
    second: int = 0,
) -> DeadLetter:
    return DeadLetter(
        "verdicts",
        0,
        offset,
        b"{nope",
        reject(rule, "$", f"{rule} at {offset}"),
        index=index,
        epoch=epoch,
        route=route,
        event_time=T0 + timedelta(minutes=minute, seconds=second),
    )


def rows(store) -> list[tuple]:
    return [
        tuple(r.values()) for r in store.query("SELECT epoch, offset, reason FROM dlq FINAL ORDER BY epoch, offset")
    ]


def test_a_restarted_brokers_offsets_do_not_replace_earlier_dead_letters(store):
    writer = EventWriter(store)
    writer.write([], [dead(0, epoch="run-1"), dead(1, epoch="run-1")])
    writer.write([], [dead(0, epoch="run-1")])  # redelivered within the run: collapses
    writer.write([], [dead(0, "bad_route", epoch="run-2")])  # the same offset after a restart: a new dead letter
    store.command("OPTIMIZE TABLE dlq FINAL")  # a merge must keep both incarnations' offset 0
    assert rows(store) == [
        ("run-1", 0, "$: not_json at 0"),
        ("run-1", 1, "$: not_json at 1"),
        ("run-2", 0, "$: bad_route at 0"),
    ]
    assert {s["reason"]: s["count"] for s in DeadLetterRepository(store).summary()} == {"not_json": 2, "bad_route": 1}


def test_a_broker_restarted_under_a_running_worker_keeps_the_epoch_but_not_the_record():
    """The worker read its epoch when it started; the records the restarted broker puts at the same offsets are
    other records, and their fingerprints say so, while a redelivery keeps its own."""
    before = RawMessage("verdicts", 0, 0, b"{nope", b"billing-faq", timestamp_ms=1_764_000_000_000)
    assert before.fingerprint == RawMessage("verdicts", 0, 0, b"{nope", b"billing-faq", 1_764_000_000_000).fingerprint
    after = [
        RawMessage("verdicts", 0, 0, b"{nope", b"billing-faq", 1_764_000_000_001),
        RawMessage("verdicts", 0, 0, b"{nop", b"ebilling-faq", 1_764_000_000_000),  # bytes moved across parts
        RawMessage("verdicts", 0, 0, b"{nope!", b"billing-faq", 1_764_000_000_000),
    ]
    assert len({before.fingerprint, *(m.fingerprint for m in after)}) == 4
    assert all(0 <= m.fingerprint < 1 << 64 for m in after)


def test_dead_letters_of_one_epoch_and_offset_stay_apart_by_record(store):
    writer = EventWriter(store)
    first, second = (dataclasses.replace(dead(0, epoch="run-1"), record=r) for r in (1 << 63, 7))
    writer.write([], [first, second, first])  # the same record twice collapses
    store.command("OPTIMIZE TABLE dlq FINAL")
    assert [int(r["record"]) for r in store.query("SELECT record FROM dlq FINAL ORDER BY record")] == [7, 1 << 63]


def test_rejected_minutes_count_per_route_and_minute_of_event_time(store):
    EventWriter(store).write(
        [],
        [
            dead(0, minute=0),
            dead(1, minute=0, second=59),
            dead(2, minute=1),
            dead(3, route="parcel-status", minute=1),
            dead(4, route="", minute=2),
            dead(5, minute=3),
            dead(6, minute=-1),
            dead(7, index=0, minute=2),
            dead(8, index=1, minute=2),  # two bad events of one envelope
        ],
    )
    EventWriter(store).write([], [dead(1, minute=0, second=59)])  # redelivered: counted once
    got = DeadLetterRepository(store).rejected_minutes(T0 + timedelta(seconds=30), T0 + timedelta(minutes=2, seconds=5))
    assert got == [
        {"route": "billing-faq", "minute": T0, "rejected": 2},
        {"route": "billing-faq", "minute": T0 + timedelta(minutes=1), "rejected": 1},
        {"route": "parcel-status", "minute": T0 + timedelta(minutes=1), "rejected": 1},
        {"route": "", "minute": T0 + timedelta(minutes=2), "rejected": 1},
        {"route": "billing-faq", "minute": T0 + timedelta(minutes=2), "rejected": 2},
    ]


def test_rejected_routes_give_the_top_rule_its_count_and_the_latest_sample(store):
    writer = EventWriter(store)
    writer.write(
        [],
        [
            dead(0, "not_json"),
            dead(1, "unknown_verdict", minute=1),
            dead(2, "unknown_verdict", minute=2),
            dead(3, "bad_route", route="parcel-status"),
            dead(4, "not_utf8", route="parcel-status"),
            dead(5, "not_json", minute=9),
        ],
    )  # outside the window
    writer.write([], [dead(6, "unknown_verdict", minute=3, index=4)])  # the latest event time: the sample
    got = DeadLetterRepository(store).rejected_routes(T0, T0 + timedelta(minutes=5))
    assert got == [
        {
            "route": "billing-faq",
            "rejected": 4,
            "rule": "unknown_verdict",
            "rule_count": 3,
            "sample": {
                "reason": "$: unknown_verdict at 6",
                "source": "verdicts/0/6 events[4]",
                "size": 5,
                "envelope_index": 4,
            },
        },
        {
            "route": "parcel-status",
            "rejected": 2,
            "rule": "bad_route",
            "rule_count": 1,  # a tie: first by name
            "sample": {"reason": "$: bad_route at 3", "source": "verdicts/0/3", "size": 5, "envelope_index": None},
        },
    ]
    assert DeadLetterRepository(store).rejected_routes(T0 + timedelta(minutes=20), T0 + timedelta(minutes=30)) == []


def test_the_summary_takes_a_route(store):
    EventWriter(store).write(
        [],
        [dead(0, "not_json"), dead(1, "bad_route", route="parcel-status"), dead(2, "not_json", route="parcel-status")],
    )
    assert [(s["reason"], s["count"]) for s in DeadLetterRepository(store).summary(route="parcel-status")] == [
        ("bad_route", 1),
        ("not_json", 1),
    ]
    assert [(s["reason"], s["count"]) for s in DeadLetterRepository(store).summary()] == [
        ("not_json", 2),
        ("bad_route", 1),
    ]
    assert DeadLetterRepository(store).summary(route="nowhere") == []
