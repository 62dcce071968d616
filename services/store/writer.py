"""Idempotent batch writes: an event_id already stored is never counted again.

Exactly-once in effect = at-least-once delivery (offsets committed after the write)
+ this writer. Duplicates are removed before they reach ClickHouse, so counts are
right even before background merges; the insert dedup token additionally makes a
retried identical insert a no-op in ``events`` and in every materialized view.
"""
from __future__ import annotations

import base64
import hashlib
from typing import Iterable, Sequence

import orjson

from services.contract.model import VerdictEvent
from services.ingest.records import INTAKE_FORMAT, SAMPLE_BYTES, DeadLetter, EventKey, WriteResult, intake_line
from services.store.backends import Store, sql_literal
from services.store.convert import INTAKE_SETTINGS, INTAKE_TABLE, ch_time

# optimize_on_insert off: the merge it runs on each inserted block finds nothing to merge here (the writer drops
# a batch's repeated answers, and rate_minute_mv groups by its table's key), at about 8 µs of CPU per answer
INSERT_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1, "optimize_on_insert": 0}


def dead_letter_row(d: DeadLetter) -> dict:
    """The ``dlq`` row of a dead letter."""
    r = d.rejection
    sample = d.raw[:SAMPLE_BYTES] if d.sample is None else d.sample[:SAMPLE_BYTES]
    row = {
        "topic": d.topic, "partition": d.partition, "offset": d.offset,
        "envelope_index": -1 if d.index is None else d.index, "epoch": d.epoch,
        "rule": r.rule, "reason": r.reason, "problems": orjson.dumps(r.to_dict()["problems"]).decode(),
        "event_id": r.event_id or "", "route": d.counted_route, "size": len(d.raw),
        "sample": base64.b64encode(sample).decode(),
    }
    if d.event_time is not None:  # otherwise the column's default, received_at
        row["event_time"] = ch_time(d.event_time)
    return row


Minute = tuple[str, int]  # a route and the Unix time its minute starts
_IN_MINUTES = ("(route, toStartOfMinute(observed_at)) IN (SELECT * FROM format(JSONCompactEachRow, "
               "'route String, minute DateTime(\\'UTC\\')', {minutes}))")


def _json_rows(rows: Iterable) -> str:
    return sql_literal(b"\n".join(orjson.dumps(row) for row in rows))


class EventWriter:
    def __init__(self, store: Store):
        self.store = store

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
        return ("SELECT DISTINCT route, toUnixTimestamp(toStartOfMinute(observed_at)) AS minute FROM event_keys "
                f"WHERE {_IN_MINUTES.format(minutes=_json_rows(minutes))}")

    @staticmethod
    def lookup_sql(minutes: Iterable[Minute], ids: Iterable[str]) -> str:
        """The keys and ids go inline as JSON rows: chDB reads a long literal in a few milliseconds and an equally
        long query parameter in tens."""
        return (f"SELECT DISTINCT event_id FROM event_keys WHERE {_IN_MINUTES.format(minutes=_json_rows(minutes))} "
                f"AND event_id IN (SELECT * FROM format(JSONCompactEachRow, 'event_id String', "
                f"{_json_rows([i] for i in ids)}))")

    def write(self, events: Sequence[VerdictEvent], dead: Sequence[DeadLetter] = ()) -> WriteResult:
        return self.write_lines([EventKey.of(e) for e in events], [intake_line(e) for e in events], dead)

    def write_lines(self, keys: Sequence[EventKey], lines: Sequence[bytes],
                    dead: Sequence[DeadLetter] = ()) -> WriteResult:
        """Each event's key and ``intake_line``: the worker encodes them on its decoding thread, so this thread
        only queries and inserts, mostly outside the GIL."""
        first: dict[str, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key.event_id, i)
        stored = self.stored_ids([keys[i] for i in first.values()])
        fresh = [i for event_id, i in first.items() if event_id not in stored]
        if fresh:
            token = hashlib.sha256("\n".join(sorted(keys[i].event_id for i in fresh)).encode()).hexdigest()
            self.store.insert_lines(INTAKE_TABLE, b"\n".join(lines[i] for i in fresh),
                                    {**INSERT_SETTINGS, **INTAKE_SETTINGS, "insert_deduplication_token": token},
                                    INTAKE_FORMAT)
        if dead:
            self.store.insert("dlq", [dead_letter_row(d) for d in dead])
        return WriteResult(len(fresh), len(keys) - len(fresh), len(dead))
