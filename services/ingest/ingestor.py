"""The ingest step as a plain object: raw Kafka messages in, one idempotent store write out.

A message holds one event or a batch envelope of events; each event is decoded, stored or
dead-lettered on its own (with its index in the envelope), and the message is acked as a whole.
A valid event whose time lies outside the ingest window (services/ingest/window.py) is dead-lettered
too: every acked event is either stored or dead-lettered, never dropped.

Faust only feeds it batches and acks them afterwards (see streams/agents.py), so all
of this is testable without a broker.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import orjson

from services.contract.decode import Decoder
from services.contract.model import MAX_ROUTE_CHARS
from services.contract.rejection import Rejection, reject
from services.core.errors import StoreError, StoreRefused
from services.ingest.privacy import RedactionSettings, Redactor
from services.ingest.records import SAMPLE_BYTES, DeadLetter, EventCounts, EventKey, Writer, WriteResult, intake_line
from services.ingest.routes import ROUTE_LIMIT, RouteGuard
from services.ingest.window import EventTimeWindow

STORE_REJECTED = "store.rejected"  # the dead-letter rule of an event the store refuses for what it holds
NEIGHBOUR_FRESH = timedelta(minutes=2)  # a partition's valid events this recent date its unreadable neighbours

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RawMessage:
    topic: str
    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None
    timestamp_ms: int = -1  # the record's broker timestamp (CreateTime or LogAppendTime); -1: none

    @property
    def fingerprint(self) -> int:
        """The record's own identity (its timestamp, key and bytes) as an unsigned 64-bit number: a redelivery
        keeps it, while the record a restarted broker puts at the same offset has another."""
        digest = hashlib.blake2b(digest_size=8)
        for part in (str(self.timestamp_ms).encode(), self.key or b"", self.value or b""):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        return int.from_bytes(digest.digest(), "big")


@dataclass(frozen=True)
class BatchOutcome:
    keys: list[EventKey]  # every valid event of the batch, stored now or before (a redelivery)
    dead: list[DeadLetter]
    result: WriteResult
    counts: EventCounts = field(default_factory=EventCounts)


@dataclass(frozen=True)
class DecodedBatch:
    """What ``Ingestor.split`` made of a batch: each valid (redacted) event's key with its source message and its
    index in the message's envelope (None for a single-event message), and its store intake line. The decoded
    events themselves are let go once encoded: a batch waiting for the store holds its lines, not its events."""

    items: list[tuple[RawMessage, int | None, EventKey]]
    dead: list[DeadLetter]
    lines: list[bytes]
    messages: int = 0  # how many Kafka messages it came from
    counts: EventCounts = field(default_factory=EventCounts)

    @property
    def keys(self) -> list[EventKey]:
        return [key for _, _, key in self.items]

    @classmethod
    def joined(cls, batches: Sequence[DecodedBatch]) -> DecodedBatch:
        """Several batches as one write, in order (services/ingest/pipeline.py's group commit)."""
        if len(batches) == 1:
            return batches[0]
        counts = EventCounts()
        for b in batches:
            counts += b.counts
        return cls(
            [i for b in batches for i in b.items],
            [d for b in batches for d in b.dead],
            [line for b in batches for line in b.lines],
            sum(b.messages for b in batches),
            counts,
        )


def envelope_events(m: RawMessage) -> list:
    """The events of an envelope the decoder has already accepted as one (so this cannot fail)."""
    assert m.value is not None  # the decoder rejects a message without a value whole, as no envelope
    return orjson.loads(m.value)["events"]


def event_bytes(m: RawMessage, index: int | None, events: list | None) -> bytes:
    """What a dead letter carries: the whole message, or the one event of an envelope on its own."""
    if index is None:
        return m.value or b""
    assert events is not None  # an index points into an envelope, whose events the caller has read
    return orjson.dumps(events[index])


def key_route(key: bytes | None) -> str | None:
    """The route a message key names (producers key by route), read leniently; None without a readable one."""
    try:
        return (key or b"").decode("utf-8")[:MAX_ROUTE_CHARS] or None
    except UnicodeDecodeError:
        return None


BROKER_SILENCE_SECONDS = 15.0  # three missed lag reads (streams/timers.py reads every 5 s)


@dataclass
class BrokerHealth:
    """Whether the broker answers, as the worker's pings see it (times: ``time.monotonic()``).

    Unreachable once a ping has gone unanswered for ``silence`` seconds, so a broker that refuses connections and
    one that is frozen (a ping that hangs, and never fails) read the same. Until the first ping, and between an
    answer and the next ping, nothing is waited for: a worker whose start takes long (joining its group after a
    kill) is not taken for one whose broker is gone."""

    silence: float = BROKER_SILENCE_SECONDS
    waiting_since: float | None = None  # the first ping not answered since the last answer
    error: str = ""  # the last failed ping's, until one succeeds

    def asking(self, now: float) -> None:
        if self.waiting_since is None:
            self.waiting_since = now

    def answered(self, now: float) -> None:
        self.waiting_since, self.error = None, ""

    def failed(self, error: str) -> None:
        self.error = error

    def unreachable(self, now: float) -> str | None:
        """Why the broker counts as unreachable at ``now``; None while it answers."""
        if self.waiting_since is None or now - self.waiting_since <= self.silence:
            return None
        return f"no answer for {now - self.waiting_since:.0f} s" + (
            f" (last error: {self.error})" if self.error else ""
        )


@dataclass
class Health:
    """What /readyz reports: the store's state as the ingest path last saw it, and in a process that consumes,
    whether the broker answers (``broker``; None in a process that only serves the API)."""

    store_ok: bool = True
    store_error: str = ""
    consecutive_failures: int = 0
    failing_since: datetime | None = None  # the first failed write of the current run of failures
    broker: BrokerHealth | None = None
    writes: bool = False  # this process writes ingest's batches (a worker), so the store fields mean something

    def mark_ok(self) -> None:
        self.store_ok, self.store_error, self.consecutive_failures, self.failing_since = True, "", 0, None

    def mark_failed(self, error: str, now: datetime) -> None:
        self.store_ok, self.store_error = False, error
        self.consecutive_failures += 1
        self.failing_since = self.failing_since or now


class Ingestor:
    """``window``: the event times stored (default: what the store can hold, up to a few minutes ahead);
    ``epoch``: the incarnation of the consumed log, kept on every dead letter (``DeadLetter.epoch``)."""

    def __init__(
        self,
        writer: Writer,
        decoder: Decoder,
        redactor: Redactor | None = None,
        window: EventTimeWindow | None = None,
        epoch: str = "",
        routes: RouteGuard | None = None,
    ):
        self.writer = writer
        self.decoder = decoder
        self.redactor = redactor or Redactor(RedactionSettings())  # before storage; a no-op unless enabled
        self.window = window or EventTimeWindow()
        self.epoch = epoch
        self.routes = RouteGuard() if routes is None else routes
        self.neighbours: dict[
            int, tuple[datetime, datetime]
        ] = {}  # partition -> (its newest valid event time, when seen)

    def split(self, messages: Sequence[RawMessage], now: datetime) -> DecodedBatch:
        """Decode and redact each event once; invalid ones (or a malformed envelope) and valid ones outside the
        window at ``now`` (when the batch arrived) become dead letters."""
        items, lines, counts = [], [], EventCounts()
        refused: list[tuple[RawMessage, Rejection, int | None, bytes, datetime | None]] = []
        earliest, latest = self.window.bounds(now)
        earlier = {p: self.minute_of_unreadable_in(p, now) for p in {m.partition for m in messages}}
        before: dict[int, datetime] = {}  # partition -> the time of its latest valid event read so far in the batch
        first: dict[int, datetime] = {}  # partition -> its first valid event in the batch
        for m in messages:
            envelope: list | None = None  # parsed again only if one of its events is bad
            for index, result in self.decoder.decode_message(m.value):
                if not isinstance(result, Rejection) and not earliest <= result.observed_at <= latest:
                    result = self.window.check(result, now) or result
                if not isinstance(result, Rejection) and not self.routes.admit(result.route, now):
                    result = self.routes.refusal(result)
                if isinstance(result, Rejection):
                    if index is not None and envelope is None:
                        envelope = envelope_events(m)
                    seen = result.observed_at
                    own = seen if seen is not None and self.window.admits(seen, now) else before.get(m.partition)
                    refused.append((m, result, index, event_bytes(m, index, envelope), own))
                else:
                    before[m.partition] = result.observed_at
                    first.setdefault(m.partition, result.observed_at)
                    self.note_valid(m.partition, result.observed_at, now)
                    items.append((m, index, EventKey.of(result)))
                    # Encoded here, on the decoding thread: the store thread then only queries and inserts.
                    lines.append(intake_line(self.redactor.redact(result)))
                    counts.add(result)
        # A dead letter without a time of its own counts beside its nearest valid neighbour in its partition: the one
        # read before it in this batch, else the partition's newest from earlier batches, else the first valid event
        # after it in this batch (a restarted worker knows no earlier one). Dating them all at the newest event of a
        # batch spanning many minutes (a backlog after a restart) read as a burst of rejections in one minute.
        dead = [
            self._dead_letter(m, r, i, raw, own or earlier[m.partition] or first.get(m.partition, now))
            for m, r, i, raw, own in refused
        ]
        return DecodedBatch(items, dead, lines, len(messages), counts)

    def note_valid(self, partition: int, observed_at: datetime, now: datetime) -> None:
        newest = self.neighbours.get(partition)
        self.neighbours[partition] = (observed_at if newest is None else max(newest[0], observed_at), now)

    def minute_of_unreadable_in(self, partition: int, now: datetime) -> datetime | None:
        """Where a dead letter without a usable time of its own counts, from earlier batches: beside the newest
        valid event its partition carried (a backfill's bad lines belong to the hours it replays, not to the minute
        they arrived); None if no valid event has come for NEIGHBOUR_FRESH (a producer whose every event is broken
        counts at its arrival, unless this batch has a valid one)."""
        newest = self.neighbours.get(partition)
        return newest[0] if newest is not None and now - newest[1] <= NEIGHBOUR_FRESH else None

    def _dead_letter(
        self, m: RawMessage, rejection: Rejection, index: int | None, raw: bytes, when: datetime
    ) -> DeadLetter:
        # The DLQ topic gets it all; the store keeps a (redacted) sample.
        sample = self.redactor.redact_raw(raw[:SAMPLE_BYTES])
        # Refused for the route bound: counted under no route, or each refused route would become one of the DLQ's.
        route = "" if rejection.rule == ROUTE_LIMIT else key_route(m.key) or rejection.route or ""
        return DeadLetter(
            m.topic, m.partition, m.offset, raw, rejection, sample, index, self.epoch, route, when, m.fingerprint
        )

    def process(self, messages: Sequence[RawMessage], now: datetime) -> BatchOutcome:
        """Decode and write once. StoreError propagates: the caller retries and does not ack."""
        return self.write(self.split(messages, now))

    def write(self, batch: DecodedBatch) -> BatchOutcome:
        """Write what ``split`` decoded; safe to call again after a StoreError. A batch the store refuses for what
        it holds (StoreRefused), or that breaks the writer itself, is split until the events refused are found:
        they are dead-lettered and the rest stored, so a partition never stalls on them."""
        dead = list(batch.dead)  # a retry must not see dead letters a failed attempt added
        try:
            return BatchOutcome(batch.keys, dead, self.writer.write_lines(batch.keys, batch.lines, dead), batch.counts)
        except StoreRefused as exc:
            log.warning(
                "the store refuses a batch of %d events (%s); splitting it to find the events it refuses",
                len(batch.items),
                str(exc)[:300],
            )
        except StoreError:
            raise
        except Exception:  # a data-dependent bug must not stall the partition either
            log.exception("batch write failed outside the store; splitting it to find the events that fail")
        return self._bisect(batch, dead)

    def _bisect(self, batch: DecodedBatch, dead: list[DeadLetter]) -> BatchOutcome:
        """Write halves of the batch, halving what fails again, in order; an event that fails alone becomes a dead
        letter: ``store.rejected`` with the store's message, or ``unprocessable`` when the writer broke. What was
        stored before a crash here is recognised at redelivery, so a kill mid-split stores nothing twice."""
        good, inserted, duplicates = [], 0, 0
        pending = [(0, len(batch.items))]
        while pending:
            lo, hi = pending.pop()
            keys = [key for _, _, key in batch.items[lo:hi]]
            try:
                result = self.writer.write_lines(keys, batch.lines[lo:hi])
            except StoreRefused as exc:
                failure = reject(
                    STORE_REJECTED,
                    "$",
                    f"the store refused this event: {exc}"[:1000],
                    event_id=keys[0].event_id,
                    route=keys[0].route,
                )
            except StoreError:
                raise
            except Exception as exc:
                failure = reject(
                    "unprocessable",
                    "$",
                    f"valid event could not be stored: {type(exc).__name__}: {exc}",
                    event_id=keys[0].event_id,
                    route=keys[0].route,
                )
            else:
                good += keys
                inserted += result.inserted
                duplicates += result.duplicates
                continue
            if hi - lo > 1:
                middle = (lo + hi) // 2
                pending += [(middle, hi), (lo, middle)]  # the first half next
                continue
            m, index, key = batch.items[lo]
            raw = event_bytes(m, index, None if index is None else envelope_events(m))
            dead.append(self._dead_letter(m, failure, index, raw, key.observed_at))
        self.writer.write_lines([], [], dead)
        return BatchOutcome(good, dead, WriteResult(inserted, duplicates, len(dead)), batch.counts)
