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
from services.ingest.records import SAMPLE_BYTES, DeadLetter, WriteResult, intake_line
from services.store.backends import Store
from services.store.convert import INTAKE_SETTINGS, INTAKE_TABLE, ch_time

INSERT_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1}


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

    def stored_ids(self, event_ids: Sequence[str]) -> set[str]:
        if not event_ids:
            return set()
        rows = self.store.query("SELECT event_id FROM events WHERE event_id IN {ids:Array(String)}", {"ids": list(event_ids)})
        return {r["event_id"] for r in rows}

    def write(self, events: Sequence[VerdictEvent], dead: Sequence[DeadLetter] = (),
              lines: Sequence[bytes] | None = None) -> WriteResult:
        """``lines``: each event's ``intake_line`` when the caller encoded them already (the worker does, on its
        decoding thread, so this thread only queries and inserts, mostly outside the GIL)."""
        first: dict[str, int] = {}
        for i, event in enumerate(events):
            first.setdefault(event.event_id, i)
        stored = self.stored_ids(list(first))
        fresh = [i for event_id, i in first.items() if event_id not in stored]
        if fresh:
            token = hashlib.sha256("\n".join(sorted(events[i].event_id for i in fresh)).encode()).hexdigest()
            data = b"\n".join(intake_line(events[i]) if lines is None else lines[i] for i in fresh)
            self.store.insert_lines(INTAKE_TABLE, data,
                                    {**INSERT_SETTINGS, **INTAKE_SETTINGS, "insert_deduplication_token": token})
        if dead:
            self.store.insert("dlq", [dead_letter_row(d) for d in dead])
        return WriteResult(len(fresh), len(events) - len(fresh), len(dead))
