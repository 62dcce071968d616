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
from datetime import datetime, timedelta
from typing import Sequence

import orjson

from services.contract.decode import Problem, Rejection
from services.contract.model import VerdictEvent
from services.store.backends import Store
from services.store.convert import INTAKE_SETTINGS, INTAKE_TABLE, STORABLE_FROM, STORABLE_UNTIL, ch_time, intake_line

INSERT_SETTINGS = {"deduplicate_blocks_in_dependent_materialized_views": 1}
SAMPLE_BYTES = 2048
OUTSIDE_STORE_RANGE = "observed_at.outside_store_range"


def store_range_problem(observed_at: datetime) -> Problem | None:
    """Why the store cannot hold an event at ``observed_at`` (convert.STORABLE_FROM), or None."""
    if STORABLE_FROM <= observed_at < STORABLE_UNTIL:
        return None
    last = (STORABLE_UNTIL - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Problem(OUTSIDE_STORE_RANGE, "observed_at",
                   f"{observed_at.isoformat()} is outside the event times the store holds "
                   f"({STORABLE_FROM:%Y-%m-%dT%H:%M:%SZ} to {last}): fix the producer's clock or the value it sends")


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
    # again, and the epoch keeps its dead letters apart from the earlier ones (migration 010).
    epoch: str = ""
    route: str | None = None  # the route it counts under; None: the one the rejection read
    event_time: datetime | None = None  # the minute it counts in; None: when it is stored

    @property
    def counted_route(self) -> str:
        return (self.rejection.route if self.route is None else self.route) or ""

    def to_row(self) -> dict:
        r = self.rejection
        sample = self.raw[:SAMPLE_BYTES] if self.sample is None else self.sample[:SAMPLE_BYTES]
        row = {
            "topic": self.topic, "partition": self.partition, "offset": self.offset,
            "envelope_index": -1 if self.index is None else self.index, "epoch": self.epoch,
            "rule": r.rule, "reason": r.reason, "problems": orjson.dumps(r.to_dict()["problems"]).decode(),
            "event_id": r.event_id or "", "route": self.counted_route, "size": len(self.raw),
            "sample": base64.b64encode(sample).decode(),
        }
        if self.event_time is not None:  # otherwise the column's default, received_at
            row["event_time"] = ch_time(self.event_time)
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
            self.store.insert("dlq", [d.to_row() for d in dead])
        return WriteResult(len(fresh), len(events) - len(fresh), len(dead))
