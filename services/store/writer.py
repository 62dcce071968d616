"""Idempotent batch writes: an event_id already stored is never counted again.

Exactly-once in effect = at-least-once delivery (offsets committed after the write)
+ this writer. Duplicates are removed before they reach ClickHouse, so counts are
right even before background merges; the insert dedup token additionally makes a
retried identical insert a no-op in ``events`` and in every materialized view.
"""
from __future__ import annotations

import base64
import hashlib
from typing import Sequence

import orjson

from services.contract.model import VerdictEvent
from services.ingest.records import SAMPLE_BYTES, DeadLetter, EventKey, WriteResult, intake_line
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


class EventWriter:
    def __init__(self, store: Store):
        self.store = store

    def stored_ids(self, keys: Sequence[EventKey]) -> set[str]:
        """The ids among ``keys`` stored already. A redelivery is its original: same route, same event time.
        So only the stored answers of the batch's (route, minute)s are read (``event_keys`` is ordered by them),
        however large the table has grown. The keys and ids go inline as JSON rows: chDB reads a long literal
        in a few milliseconds and an equally long query parameter in tens."""
        return {r["event_id"] for r in self.store.query(self.lookup_sql(keys))} if keys else set()

    @staticmethod
    def lookup_sql(keys: Sequence[EventKey]) -> str:
        minutes = {(k.route, int(k.observed_at.timestamp()) // 60 * 60) for k in keys}
        routes_minutes = sql_literal(b"\n".join(orjson.dumps(key) for key in minutes))
        ids = sql_literal(b"\n".join(orjson.dumps([k.event_id]) for k in keys))
        return ("SELECT DISTINCT event_id FROM event_keys WHERE (route, toStartOfMinute(observed_at)) IN "
                f"(SELECT * FROM format(JSONCompactEachRow, 'route String, minute DateTime(\\'UTC\\')', {routes_minutes})) "
                f"AND event_id IN (SELECT * FROM format(JSONCompactEachRow, 'event_id String', {ids}))")

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
                                    {**INSERT_SETTINGS, **INTAKE_SETTINGS, "insert_deduplication_token": token})
        if dead:
            self.store.insert("dlq", [dead_letter_row(d) for d in dead])
        return WriteResult(len(fresh), len(keys) - len(fresh), len(dead))
