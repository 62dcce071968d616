"""Idempotent batch writes: an event_id already stored is never counted again.

Exactly-once in effect = at-least-once delivery (offsets committed after the write)
+ this writer. Duplicates are removed before they reach ClickHouse, so counts are
right even before background merges; the insert dedup token additionally makes a
retried identical insert a no-op in ``events`` and in every materialized view.

Nothing is committed that was not stored: after each insert the writer counts the batch's answers and keys in
the store (``check_held``), since chDB's streaming insert can fail its commit without an error (a full disk).
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

import orjson

from services.contract.model import VerdictEvent
from services.core.clock import utcnow
from services.core.errors import StoreError, StoreRefused
from services.ingest.records import INTAKE_FORMAT, SAMPLE_BYTES, DeadLetter, EventKey, WriteResult, intake_line
from services.store.backends import Store, sql_literal
from services.store.convert import INTAKE_SETTINGS, INTAKE_TABLE, ch_time
from services.store.repair import repair_recent
from services.store.retention import RetentionKeeper, ttl_days

# optimize_on_insert off: the merge it runs on each inserted block finds nothing to merge here (the writer drops
# a batch's repeated answers, and rate_minute_mv groups by its table's key), at about 8 µs of CPU per answer
INSERT_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1, "optimize_on_insert": 0}


def dead_letter_row(d: DeadLetter) -> dict:
    """The ``dlq`` row of a dead letter."""
    r = d.rejection
    sample = d.raw[:SAMPLE_BYTES] if d.sample is None else d.sample[:SAMPLE_BYTES]
    row = {
        "topic": d.topic,
        "partition": d.partition,
        "offset": d.offset,
        "envelope_index": -1 if d.index is None else d.index,
        "epoch": d.epoch,
        "record": d.record,
        "rule": r.rule,
        "reason": r.reason,
        "problems": orjson.dumps(r.to_dict()["problems"]).decode(),
        "event_id": r.event_id or "",
        "route": d.counted_route,
        "size": len(d.raw),
        "sample": base64.b64encode(sample).decode(),
    }
    if d.event_time is not None:  # otherwise the column's default, received_at
        row["event_time"] = ch_time(d.event_time)
    return row


Minute = tuple[str, int]  # a route and the Unix time its minute starts
_IN_MINUTES = (
    "(route, toStartOfMinute(observed_at)) IN (SELECT * FROM format(JSONCompactEachRow, "
    "'route String, minute DateTime(\\'UTC\\')', {minutes}))"
)

_IDS = "(SELECT * FROM format(JSONCompactEachRow, 'event_id String', {ids}))"
log = logging.getLogger(__name__)
DEAD_LETTER_ROWS = 5000  # dlq rows an insert (each up to ~3 KiB with its sample)
CLOCK_SLACK = timedelta(minutes=5)  # between this process's clock and the store's ingested_at
SHORTEST_RAW_TTL = timedelta(days=1)  # retention.raw_days is at least 1
TTL_SLACK = timedelta(minutes=10)  # an answer this close to its raw TTL may be gone by the time it is checked


def _json_rows(rows: Iterable) -> str:
    return sql_literal(b"\n".join(orjson.dumps(row) for row in rows))


class EventWriter:
    """``repair_after_failure``: after a write that did not hold, re-derive what it may have left half-stored before
    the next write (safe only where this process alone writes: the embedded store)."""

    def __init__(self, store: Store, repair_after_failure: bool = True, clock: Callable[[], datetime] = utcnow):
        self.store = store
        self.repair_after_failure = repair_after_failure
        self.clock = clock
        self.unverified_since: datetime | None = None  # when a write that did not hold began

    def stored_ids(self, keys: Sequence[EventKey]) -> set[str]:
        """The ids among ``keys`` stored already. A redelivery is its original: same route, same event time.
        So only the batch's (route, minute)s are read (``event_keys`` is ordered by them), however large the
        table has grown; and only the ids of those minutes that hold any stored answer are looked up: draining
        a backlog, that is the few answers of each route's first minute, not the thousands of the batch."""
        by_minute: dict[Minute, list[str]] = {}
        for key in keys:
            by_minute.setdefault((key.route, int(key.observed_at.timestamp()) // 60 * 60), []).append(key.event_id)
        if not by_minute:
            return set()
        occupied = [(r["route"], r["minute"]) for r in self.store.query(self.occupied_sql(by_minute))]
        ids = [event_id for minute in occupied for event_id in by_minute[minute]]
        return {r["event_id"] for r in self.store.query(self.lookup_sql(occupied, ids))} if ids else set()

    @staticmethod
    def occupied_sql(minutes: Iterable[Minute]) -> str:
        return (
            "SELECT DISTINCT route, toUnixTimestamp(toStartOfMinute(observed_at)) AS minute FROM event_keys "
            f"WHERE {_IN_MINUTES.format(minutes=_json_rows(minutes))}"
        )

    @staticmethod
    def lookup_sql(minutes: Iterable[Minute], ids: Iterable[str]) -> str:
        """The keys and ids go inline as JSON rows: chDB reads a long literal in a few milliseconds and an equally
        long query parameter in tens."""
        return (
            f"SELECT DISTINCT event_id FROM event_keys WHERE {_IN_MINUTES.format(minutes=_json_rows(minutes))} "
            f"AND event_id IN {_IDS.format(ids=_json_rows([i] for i in ids))}"
        )

    def holds(self, keys: Sequence[EventKey], began: datetime) -> set[str] | None:
        """None when the store holds every answer of ``keys`` with its key (a backfill older than
        retention.raw_days counts only in the minute aggregates: ``kept_raw``); else the ids it holds as answers.
        An answer stored without its key, or the other way round, is a torn write: the next write repairs from
        ``began`` first."""
        keys = self.kept_raw(keys)
        if not keys:
            return None
        answers, keys_held = self.held(keys)
        if len(answers) != keys_held:
            self.unverified_since = began - CLOCK_SLACK
        return None if len(answers) == keys_held == len(keys) else answers

    def kept_raw(self, keys: Sequence[EventKey]) -> Sequence[EventKey]:
        """The keys whose answers the raw TTL keeps: one older than retention.raw_days has its raw rows dropped on
        arrival. The TTL is read only for a batch that old."""
        now = self.clock()
        if all(key.observed_at >= now - SHORTEST_RAW_TTL + TTL_SLACK for key in keys):
            return keys
        days = ttl_days(RetentionKeeper(self.store).ttls().get("events"))
        kept_from = None if days is None else now - timedelta(days=days) + TTL_SLACK
        return keys if kept_from is None else [key for key in keys if key.observed_at >= kept_from]

    def held(self, keys: Sequence[EventKey]) -> tuple[set[str], int]:
        """The ids of ``keys`` the store holds as answers (``events``), and how many it holds as keys."""
        minutes = {(key.route, int(key.observed_at.timestamp()) // 60 * 60) for key in keys}
        ids = _json_rows([key.event_id] for key in keys)
        rows = self.store.query(
            f"SELECT event_id, (SELECT uniqExact(event_id) FROM event_keys WHERE "
            f"{_IN_MINUTES.format(minutes=_json_rows(minutes))} AND event_id IN {_IDS.format(ids=ids)}) AS keys "
            f"FROM (SELECT DISTINCT event_id FROM events WHERE event_id IN {_IDS.format(ids=ids)}) "
            f"UNION ALL SELECT '' AS event_id, (SELECT uniqExact(event_id) FROM event_keys WHERE "
            f"{_IN_MINUTES.format(minutes=_json_rows(minutes))} AND event_id IN {_IDS.format(ids=ids)}) AS keys"
        )
        return {r["event_id"] for r in rows if r["event_id"]}, int(rows[0]["keys"]) if rows else 0

    def _fresh(self, keys: Sequence[EventKey], offset: Sequence[int] | None = None) -> list[int]:
        """Indexes of the first of each event id among ``keys`` that the store does not hold yet (into ``offset``,
        when ``keys`` are those indexes' keys)."""
        first: dict[str, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key.event_id, i)
        stored = self.stored_ids([keys[i] for i in first.values()])
        fresh = [i for event_id, i in first.items() if event_id not in stored]
        return fresh if offset is None else [offset[i] for i in fresh]

    def _insert(
        self, keys: Sequence[EventKey], lines: Sequence[bytes], indexes: list[int], insert, salt: str = ""
    ) -> None:
        if not indexes:
            return
        ids = "\n".join(sorted(keys[i].event_id for i in indexes))
        token = hashlib.sha256((ids + salt).encode()).hexdigest()
        insert(
            INTAKE_TABLE,
            b"\n".join(lines[i] for i in indexes),
            {**INSERT_SETTINGS, **INTAKE_SETTINGS, "insert_deduplication_token": token},
            INTAKE_FORMAT,
        )

    def _note_torn(self, keys: Sequence[EventKey], began: datetime) -> None:
        """After a failed insert: repair before the next write if it may have stored part of what it wrote."""
        try:
            self.holds(keys, began)
        except StoreError:  # the store stopped answering: assume the worst
            self.unverified_since = began - CLOCK_SLACK

    def _repair_unverified(self) -> None:
        """After a write that did not hold: re-derive the keys and views it may have left half-stored."""
        if self.unverified_since is not None and self.repair_after_failure:
            now = self.clock()
            try:
                repair_recent(self.store, now, now - self.unverified_since)
            except StoreRefused as exc:  # not this batch's fault: it must not be dead-lettered for it
                log.warning(
                    "could not re-derive what a failed write left half-stored (%s); `claimwatch repair` "
                    "retries it with the worker stopped",
                    str(exc)[:300],
                )
        self.unverified_since = None

    def write(self, events: Sequence[VerdictEvent], dead: Sequence[DeadLetter] = ()) -> WriteResult:
        return self.write_lines([EventKey.of(e) for e in events], [intake_line(e) for e in events], dead)

    def write_lines(
        self, keys: Sequence[EventKey], lines: Sequence[bytes], dead: Sequence[DeadLetter] = ()
    ) -> WriteResult:
        """Each event's key and ``intake_line``: the worker encodes them on its decoding thread, so this thread
        only queries and inserts, mostly outside the GIL. Returns once the store holds every event (StoreError
        otherwise; StoreRefused when it refuses them for what they hold)."""
        self._repair_unverified()
        fresh = self._fresh(keys)
        if fresh:
            began, fresh_keys = self.clock(), [keys[i] for i in fresh]
            self._insert(keys, lines, fresh, self.store.stream_lines)
            answered = self.holds(fresh_keys, began)
            if answered is not None:
                # The streaming insert reports parse errors only. The rows still missing, in one statement, say
                # what the engine refused (a full disk, a broken constraint), or are stored this time.
                self._repair_unverified()
                missing = [i for i in self._fresh(fresh_keys, offset=fresh) if keys[i].event_id not in answered]
                try:
                    # A token of its own: the first one may be remembered for a block that was never stored (a
                    # replay after damage), and would make this insert a no-op too.
                    self._insert(keys, lines, missing, self.store.insert_lines, salt=ch_time(began))
                except StoreError:
                    self._note_torn(fresh_keys, began)
                    raise
                if self.holds(fresh_keys, began) is not None:
                    raise StoreError(
                        f"the store took {len(fresh):,} events without an error but lacks some of "
                        "them; the batch stays uncommitted and is written again"
                    )
        for start in range(0, len(dead), DEAD_LETTER_ROWS):  # a flood of bad input: a bounded insert at a time
            self.store.insert("dlq", [dead_letter_row(d) for d in dead[start : start + DEAD_LETTER_ROWS]])
        return WriteResult(len(fresh), len(keys) - len(fresh), len(dead))
