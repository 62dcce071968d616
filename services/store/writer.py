"""Idempotent batch writes: an event_id already stored is never counted again.

Exactly-once in effect = at-least-once delivery (offsets committed after the write)
+ this writer. Duplicates are removed before they reach ClickHouse, so counts are
right even before background merges; the insert dedup token additionally makes a
retried identical insert a no-op in ``events`` and in every materialized view.
"""
from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Sequence

import orjson

from services.contract.decode import Rejection
from services.contract.model import VerdictEvent
from services.store.backends import Store
from services.store.convert import events_to_table

INSERT_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1}
SAMPLE_BYTES = 2048


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

    def to_row(self) -> dict:
        r = self.rejection
        sample = self.raw[:SAMPLE_BYTES] if self.sample is None else self.sample[:SAMPLE_BYTES]
        return {
            "topic": self.topic, "partition": self.partition, "offset": self.offset,
            "envelope_index": -1 if self.index is None else self.index,
            "rule": r.rule, "reason": r.reason, "problems": orjson.dumps(r.to_dict()["problems"]).decode(),
            "event_id": r.event_id or "", "route": r.route or "", "size": len(self.raw),
            "sample": base64.b64encode(sample).decode(),
        }


class EventWriter:
    def __init__(self, store: Store):
        self.store = store

    def stored_ids(self, event_ids: Sequence[str]) -> set[str]:
        if not event_ids:
            return set()
        rows = self.store.query("SELECT event_id FROM events WHERE event_id IN {ids:Array(String)}", {"ids": list(event_ids)})
        return {r["event_id"] for r in rows}

    def write(self, events: Sequence[VerdictEvent], dead: Sequence[DeadLetter] = ()) -> WriteResult:
        unique: dict[str, VerdictEvent] = {}
        for event in events:
            unique.setdefault(event.event_id, event)
        stored = self.stored_ids(list(unique))
        fresh = [e for eid, e in unique.items() if eid not in stored]
        if fresh:
            token = hashlib.sha256("\n".join(sorted(e.event_id for e in fresh)).encode()).hexdigest()
            self.store.insert_columns(
                "events", events_to_table(fresh), {**INSERT_SETTINGS, "insert_deduplication_token": token}
            )
        if dead:
            self.store.insert("dlq", [d.to_row() for d in dead])
        return WriteResult(len(fresh), len(events) - len(fresh), len(dead))
