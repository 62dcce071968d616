"""The event-time window of live ingest: every acked event is stored and counted, or dead-lettered under the rule
that says why, at every boundary date, through the real decoder, writer and chDB engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.contract.decode import Decoder
from services.core.clock import utcnow
from services.ingest.ingestor import NEIGHBOUR_FRESH, Ingestor, RawMessage
from services.ingest.records import OUTSIDE_STORE_RANGE
from services.ingest.window import TOO_FAR_AHEAD, TOO_OLD, EventTimeWindow
from services.store.backends import ChdbStore
from services.store.dlq import DeadLetterRepository
from services.store.migrate import migrate
from services.store.retention import Retention, RetentionKeeper
from services.store.writer import EventWriter

NOW = datetime(2026, 11, 21, 9, 30, 15, tzinfo=UTC)
SKEW = timedelta(minutes=5)
LIVE = EventTimeWindow(raw_days=30, aggregate_days=400, backfill=False, max_future_skew=SKEW)
BACKFILL = EventTimeWindow(raw_days=30, aggregate_days=400, backfill=True, max_future_skew=SKEW)
KEEP_ALL = EventTimeWindow(raw_days=None, aggregate_days=None, backfill=True, max_future_skew=SKEW)
BASE = {
    "schema": "claimwatch.verdict/v1",
    "trace_id": "t",
    "answer": {"action": "served"},
    "claims": [{"verdict": "contradicted"}, {"verdict": "supported"}],
}
STORED = "stored"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


# (name, observed_at relative to `now` or fixed, outcome under LIVE, under BACKFILL, under KEEP_ALL)
BOUNDARIES = [
    (
        "year 1",
        lambda now: at("0001-01-01T00:00:00+00:00"),
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
    ),
    (
        "year 1900",
        lambda now: at("1900-01-01T00:00:00+00:00"),
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
    ),
    (
        "last second of 1969",
        lambda now: at("1969-12-31T23:59:59+00:00"),
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
    ),
    (
        "1970, in another zone",
        lambda now: at("1970-01-01T00:30:00+01:00"),
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
    ),
    ("first second of 1970", lambda now: at("1970-01-01T00:00:00+00:00"), TOO_OLD, TOO_OLD, STORED),
    ("older than the aggregates", lambda now: now - timedelta(days=401), TOO_OLD, TOO_OLD, STORED),
    ("older than raw rows", lambda now: now - timedelta(days=31), TOO_OLD, STORED, STORED),
    ("recent", lambda now: now - timedelta(hours=1), STORED, STORED, STORED),
    ("skew less a second ahead", lambda now: now + SKEW - timedelta(seconds=1), STORED, STORED, STORED),
    (
        "skew and a second ahead",
        lambda now: now + SKEW + timedelta(seconds=1),
        TOO_FAR_AHEAD,
        TOO_FAR_AHEAD,
        TOO_FAR_AHEAD,
    ),
    ("30 days ahead", lambda now: now + timedelta(days=30), TOO_FAR_AHEAD, TOO_FAR_AHEAD, TOO_FAR_AHEAD),
    (
        "DateTime's last second",
        lambda now: at("2106-02-07T06:28:15+00:00"),
        TOO_FAR_AHEAD,
        TOO_FAR_AHEAD,
        TOO_FAR_AHEAD,
    ),
    (
        "past DateTime's end",
        lambda now: at("2106-02-07T06:28:16+00:00"),
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
    ),
    (
        "year 9999, behind UTC",
        lambda now: at("9999-12-31T23:59:59-01:00"),
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
        OUTSIDE_STORE_RANGE,
    ),
]
WINDOWS = {"live": (LIVE, 2), "backfill": (BACKFILL, 3), "keep everything": (KEEP_ALL, 4)}


def rfc3339(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")


def boundary_messages(now: datetime, envelope: bool) -> list[RawMessage]:
    """One event per boundary, each on its own route (so its minute bucket is its alone)."""
    events = [
        {**BASE, "event_id": f"e{i}", "route": f"r{i}", "observed_at": rfc3339(when(now))}
        for i, (_, when, *_) in enumerate(BOUNDARIES)
    ]
    if envelope:
        return [RawMessage("verdicts", 0, 0, orjson.dumps({"schema": "claimwatch.verdicts/v1", "events": events}))]
    return [RawMessage("verdicts", 0, i, orjson.dumps(e), f"r{i}".encode()) for i, e in enumerate(events)]


def account(store, now: datetime) -> dict[str, str]:
    """Each event's fate: STORED (its row and its own minute's bucket, counted once) or its DLQ rule."""
    rows = {
        r["event_id"]: r
        for r in store.query(
            "SELECT event_id, route, toString(toStartOfMinute(observed_at)) AS minute FROM events FINAL"
        )
    }
    buckets = {
        (r["route"], r["minute"]): r["events"]
        for r in store.query(
            "SELECT route, toString(minute) AS minute, sum(events) AS events FROM rate_minute WHERE dim = '' "
            "GROUP BY route, minute"
        )
    }
    dead = {r["event_id"]: r["rule"] for r in store.query("SELECT event_id, rule FROM dlq FINAL")}
    fates = {}
    for i, (name, when, *_) in enumerate(BOUNDARIES):
        eid = f"e{i}"
        assert not (eid in rows and eid in dead), f"{name}: both stored and dead-lettered"
        if eid in rows:
            minute = when(now).astimezone(UTC).replace(second=0, microsecond=0).strftime("%Y-%m-%d %H:%M:%S")
            assert rows[eid]["minute"] == minute, f"{name}: stored at {rows[eid]['minute']}"
            assert buckets.get((f"r{i}", minute)) == 1, f"{name}: not counted in its minute {minute}"
            fates[name] = STORED
        else:
            fates[name] = dead.get(eid, "lost")
    assert sum(buckets.values()) == list(fates.values()).count(STORED), "a bucket counts an event twice or wrongly"
    return fates


@pytest.mark.slow
@pytest.mark.parametrize("envelope", [False, True], ids=["single", "envelope"])
@pytest.mark.parametrize("window", list(WINDOWS), ids=str)
def test_every_boundary_date_is_stored_and_counted_or_dead_lettered_with_its_rule(store, window, envelope):
    config, column = WINDOWS[window]
    outcome = Ingestor(EventWriter(store), Decoder(), window=config).process(boundary_messages(NOW, envelope), NOW)
    assert outcome.result.inserted + outcome.result.rejected == len(BOUNDARIES)
    assert account(store, NOW) == {b[0]: b[column] for b in BOUNDARIES}


def test_with_the_live_ttls_applied_no_acked_event_is_lost(tmp_path):
    """Against the default TTLs, merged: what the window stores outlives its TTL, the rest is dead-lettered."""
    now = utcnow()  # the TTLs run on the wall clock
    store = ChdbStore(tmp_path / "ch")
    try:
        migrate(store)
        RetentionKeeper(store).apply(Retention(30, 400))
        Ingestor(EventWriter(store), Decoder(), window=LIVE).process(boundary_messages(now, envelope=False), now)
        for table in ("events", "rate_minute", "dlq"):
            store.command(f"OPTIMIZE TABLE {table} FINAL")  # a TTL merge now, not in hours
        assert account(store, now) == {b[0]: b[2] for b in BOUNDARIES}
    finally:
        store.close()


def test_reasons_name_the_bound_and_the_fix():
    old = LIVE.problem(NOW - timedelta(days=31), NOW)
    assert (old.rule, old.path) == (TOO_OLD, "observed_at") and "30 days" in old.message
    assert "ingest.backfill" in old.message and "claimwatch backtest" in old.message
    older = BACKFILL.problem(NOW - timedelta(days=401), NOW)
    assert "400 days" in older.message and "retention.aggregate_days" in older.message
    ahead = LIVE.problem(NOW + timedelta(days=30), NOW)
    assert "30 days, 0:00:00 ahead" in ahead.message and "300 s" in ahead.message
    assert "ingest.max_future_skew_seconds" in ahead.message and "producer's clock" in ahead.message
    early = LIVE.problem(at("1969-12-31T23:59:59+00:00"), NOW)
    assert "1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z" in early.message


def test_the_window_is_judged_at_the_time_given_not_the_wall_clock():
    event_time = NOW - timedelta(days=29)
    assert LIVE.admits(event_time, NOW) and not LIVE.admits(event_time, NOW + timedelta(days=2))
    assert not LIVE.admits(NOW + timedelta(minutes=6), NOW) and LIVE.admits(NOW + timedelta(minutes=6), NOW + SKEW)


@pytest.mark.parametrize("window", list(WINDOWS), ids=str)
@pytest.mark.parametrize(
    "now",
    [NOW, at("2106-02-07T06:25:00+00:00"), at("1970-01-20T00:00:00+00:00")],
    ids=["now", "near DateTime's end", "near 1970"],
)
def test_a_batchs_bounds_admit_exactly_what_the_rules_admit(window, now):
    """The ingestor holds a batch's events to two bounds and asks the rules only outside them: each bound and
    the microsecond past it must get the rules' own answer."""
    config, _ = WINDOWS[window]
    earliest, latest = config.bounds(now)
    tick = timedelta(microseconds=1)
    assert config.admits(earliest, now) and config.admits(latest, now)
    assert not config.admits(earliest - tick, now) and not config.admits(latest + tick, now)


def test_a_dead_letter_counts_in_its_events_minute_or_its_arrivals_under_its_route(store):
    """Route: the message key, else the JSON's route. Minute: observed_at where readable and in the window,
    else when the batch arrived."""
    bad = {**BASE, "claims": [{"verdict": "maybe"}]}
    messages = [
        RawMessage(
            "verdicts",
            0,
            0,
            orjson.dumps({**bad, "event_id": "a", "route": "json-route", "observed_at": "2026-11-21T09:10:30+01:00"}),
            b"key-route",
        ),
        RawMessage(
            "verdicts",
            0,
            1,
            orjson.dumps({**bad, "event_id": "b", "route": "json-route", "observed_at": "2026-11-21T08:20:00"}),
        ),  # no offset: read as UTC
        RawMessage(
            "verdicts",
            0,
            2,
            orjson.dumps({**bad, "event_id": "c", "route": "json-route", "observed_at": "2020-01-01T00:00:00Z"}),
            b"key-route",
        ),
        RawMessage("verdicts", 0, 3, b"{not json", b"\xff\xfe"),  # neither a readable key nor JSON
        RawMessage(
            "verdicts",
            0,
            4,
            orjson.dumps({**BASE, "event_id": "d", "route": "future", "observed_at": "2027-01-01T00:00:00Z"}),
        ),
    ]
    Ingestor(EventWriter(store), Decoder(), window=LIVE).process(messages, NOW)
    minutes = DeadLetterRepository(store).rejected_minutes(NOW - timedelta(hours=2), NOW)
    at_minute = lambda text: datetime.fromisoformat(text).replace(tzinfo=UTC)  # noqa: E731
    assert minutes == [
        {"route": "key-route", "minute": at_minute("2026-11-21 08:10"), "rejected": 1},
        {"route": "json-route", "minute": at_minute("2026-11-21 08:20"), "rejected": 1},
        {"route": "", "minute": at_minute("2026-11-21 09:30"), "rejected": 1},
        {"route": "future", "minute": at_minute("2026-11-21 09:30"), "rejected": 1},
        {"route": "key-route", "minute": at_minute("2026-11-21 09:30"), "rejected": 1},
    ]


def test_a_backfills_unreadable_lines_count_beside_the_valid_events_of_their_partition(store):
    """A backfill replays hours in seconds: a line with no usable time counts beside the valid events its partition
    carries, not in the minute it arrived (which would read as every route's events failing at once). Once no valid
    event has come for NEIGHBOUR_FRESH (a producer whose every event is broken), it counts when it arrives."""
    hour_ago = NOW - timedelta(hours=1)
    ingestor = Ingestor(EventWriter(store), Decoder(), window=LIVE)
    valid = orjson.dumps({**BASE, "event_id": "v1", "route": "r", "observed_at": hour_ago.isoformat()})
    ingestor.process(
        [
            RawMessage("verdicts", 0, 0, valid, b"r"),
            RawMessage("verdicts", 0, 1, b"{junk", b"r"),
            RawMessage("verdicts", 1, 0, b"{junk", b"r"),
        ],
        NOW,
    )  # partition 1 has no valid neighbour
    ingestor.process([RawMessage("verdicts", 0, 2, b"{junk", b"r")], NOW + NEIGHBOUR_FRESH + timedelta(seconds=1))
    minute = lambda t: t.replace(second=0, microsecond=0)  # noqa: E731
    assert [
        (m["minute"], m["rejected"])
        for m in DeadLetterRepository(store).rejected_minutes(hour_ago, NOW + timedelta(minutes=5))
    ] == [
        (minute(hour_ago), 1),
        (minute(NOW), 1),
        (minute(NOW + NEIGHBOUR_FRESH + timedelta(seconds=1)), 1),
    ]


def test_after_a_restart_bad_lines_before_the_first_valid_event_of_the_batch_count_beside_it(store):
    """A restarted worker knows no neighbour yet: the bad lines its first batch reads before a valid event of their
    partition count beside that event, not at the wall clock (which would read as a burst of rejections)."""
    hour_ago = NOW - timedelta(hours=1)
    ingestor = Ingestor(EventWriter(store), Decoder(), window=LIVE)
    valid = orjson.dumps({**BASE, "event_id": "v1", "route": "r", "observed_at": hour_ago.isoformat()})
    ingestor.process(
        [RawMessage("verdicts", 0, 0, b"{junk", b"r"), RawMessage("verdicts", 0, 1, valid, b"r")],
        NOW,
    )
    assert [
        (m["minute"], m["rejected"])
        for m in DeadLetterRepository(store).rejected_minutes(hour_ago, NOW + timedelta(minutes=5))
    ] == [(hour_ago.replace(second=0, microsecond=0), 1)]


def test_a_batch_spanning_many_minutes_dates_each_bad_line_beside_the_valid_event_before_it(store):
    """A restarted worker's backlog: one batch holds many minutes of a backfill. Each bad line counts beside the
    valid event read just before it, so the rejections spread as the events do; dated all at the batch's newest
    event they read as a burst in one minute (test_reliability's extra events_rejected alert)."""
    start = NOW - timedelta(hours=1)
    ingestor = Ingestor(EventWriter(store), Decoder(), window=LIVE)
    messages = []
    for i in range(5):  # a valid event of each minute, then a bad line
        observed = (start + timedelta(minutes=i)).isoformat()
        valid = orjson.dumps({**BASE, "event_id": f"v{i}", "route": "r", "observed_at": observed})
        messages += [RawMessage("verdicts", 0, 2 * i, valid, b"r"), RawMessage("verdicts", 0, 2 * i + 1, b"{x", b"r")]
    ingestor.process(messages, NOW)
    assert [
        (m["minute"], m["rejected"])
        for m in DeadLetterRepository(store).rejected_minutes(start, NOW + timedelta(minutes=5))
    ] == [(start.replace(second=0, microsecond=0) + timedelta(minutes=i), 1) for i in range(5)]
