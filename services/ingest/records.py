"""What ingest hands the store: each accepted event's intake line, each rejected message's dead letter,
and the outcome of a write. The store's writer takes them (services/store/writer.py); ingest never
imports the store, so it is given a ``Writer`` by the composition root."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple, Protocol

import msgspec
from msgspec.structs import astuple

from services.contract.model import VerdictEvent
from services.contract.rejection import Problem, Rejection

# The event times the store can hold: whole seconds since 1970 in a UInt32, as its DateTime columns keep them
# (rate_minute.minute, the toDateTime of the TTLs). Outside, a minute saturates to 1970 or 2106 (counted in no
# window anyone reads) and a TTL wraps (the row expires on arrival), though DateTime64 columns take the time.
STORABLE_FROM = datetime(1970, 1, 1, tzinfo=UTC)
STORABLE_UNTIL = STORABLE_FROM + timedelta(seconds=1 << 32)  # exclusive: 2106-02-07T06:28:16Z
SAMPLE_BYTES = 2048  # what the store keeps of a rejected message
OUTSIDE_STORE_RANGE = "observed_at.outside_store_range"


def store_range_problem(observed_at: datetime) -> Problem | None:
    """Why the store cannot hold an event at ``observed_at`` (STORABLE_FROM), or None."""
    if STORABLE_FROM <= observed_at < STORABLE_UNTIL:
        return None
    last = (STORABLE_UNTIL - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Problem(
        OUTSIDE_STORE_RANGE,
        "observed_at",
        f"{observed_at.isoformat()} is outside the event times the store holds "
        f"({STORABLE_FROM:%Y-%m-%dT%H:%M:%SZ} to {last}): fix the producer's clock or the value it sends",
    )


@dataclass(frozen=True)
class WriteResult:
    inserted: int
    duplicates: int
    rejected: int = 0


@dataclass(frozen=True)
class DeadLetter:
    """An invalid message, or one invalid event of a batch envelope, and where it came from."""

    topic: str
    partition: int
    offset: int
    raw: bytes
    rejection: Rejection
    sample: bytes | None = None  # what the store keeps of ``raw``; redacted when privacy is on
    index: int | None = None  # the event's index in its envelope; None: the whole message
    # The incarnation of the log the offset belongs to: a restarted in-memory broker counts offsets from 0
    # again, and the epoch keeps its dead letters apart from the earlier ones.
    epoch: str = ""
    route: str | None = None  # the route it counts under; None: the one the rejection read
    event_time: datetime | None = None  # the minute it counts in; None: when it is stored
    # The message's fingerprint (RawMessage.fingerprint): the epoch is read when the worker starts, so a broker
    # restarted under a running worker would reuse it; the record's own identity still tells the two apart.
    record: int = 0

    @property
    def counted_route(self) -> str:
        return (self.rejection.route if self.route is None else self.route) or ""


_encoder = msgspec.json.Encoder()
# An intake line is a JSON array of the event's fields in the model's order, without ``schema``; its query,
# answer, claims and sampling are arrays of their fields too. ``events_intake`` declares its
# columns and tuples in that order (tests/unit/store/test_store_backends.py checks it), so ClickHouse reads
# values by position: no field names to write here or to match there (a quarter less of the store's parsing).
# The evidence and the signals stay objects: the store keeps their JSON text as it is.
INTAKE_FORMAT = "JSONCompactEachRow"


def intake_line(event: VerdictEvent) -> bytes:
    """The event as one ``events_intake`` line: the same values ``event_to_row`` gives, once stored."""
    (
        _,
        event_id,
        trace_id,
        observed_at,
        route,
        tenant,
        query,
        answer,
        versions,
        evidence,
        claims,
        first_failed_stage,
        signals,
        attributes,
        sampling,
    ) = astuple(event)
    return _encoder.encode(
        (
            event_id,
            trace_id,
            observed_at,
            route,
            tenant,
            astuple(query),
            astuple(answer),
            versions,
            evidence,
            [astuple(c) for c in claims],
            first_failed_stage,
            signals,
            attributes,
            astuple(sampling),
        )
    )


class EventKey(NamedTuple):
    """What the writer needs of a decoded event besides its intake line: its id, and where a redelivery of it
    would be stored (services/store/writer.py). The worker keeps these, not the decoded events, while a batch
    waits for the store."""

    event_id: str
    route: str
    observed_at: datetime

    @classmethod
    def of(cls, event: VerdictEvent) -> EventKey:
        return cls(event.event_id, event.route, event.observed_at)


@dataclass
class EventCounts:
    """What a batch adds to the ingest metrics: valid events per route, claims per (route, verdict)."""

    events: Counter = field(default_factory=Counter)
    claims: Counter = field(default_factory=Counter)

    def add(self, event: VerdictEvent) -> None:
        route = event.route
        self.events[route] += 1
        self.claims.update([(route, c.verdict) for c in event.claims])

    def __iadd__(self, other: EventCounts) -> EventCounts:
        self.events.update(other.events)
        self.claims.update(other.claims)
        return self


class Writer(Protocol):
    """Stores a batch at most once per event id (services.store.writer.EventWriter)."""

    def write_lines(
        self, keys: Sequence[EventKey], lines: Sequence[bytes], dead: Sequence[DeadLetter] = ()
    ) -> WriteResult: ...
