"""Pure converters between contract events and store rows."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import accumulate
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import orjson
import pyarrow as pa
import msgspec

from services.contract.model import Evidence, Signals, VerdictEvent, json_object


def ch_time(ts: datetime) -> str:
    """A DateTime64(3) literal in UTC, as JSONEachRow reads it."""
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_ch_time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


T = TypeVar("T")
Skip = Callable[[str, Exception], None]  # told of a stored row a reader cannot decode: its key and the error
UNREADABLE = (ValueError, OverflowError, TypeError, KeyError)  # what decoding a malformed row raises


def decode_rows(rows: Iterable[Mapping[str, Any]], decode: Callable[[Mapping[str, Any]], T],
                key: Callable[[Mapping[str, Any]], str], skip: Skip | None = None) -> list[T]:
    """Each row decoded. A row that cannot be (a time no datetime holds, broken JSON) raises, unless ``skip``
    is given: then ``skip`` is told and the row left out, so a background job goes on past it."""
    out = []
    for row in rows:
        try:
            out.append(decode(row))
        except UNREADABLE as exc:
            if skip is None:
                raise
            skip(key(row), exc)
    return out


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MILLISECOND = timedelta(milliseconds=1)
# The event times the store can hold: whole seconds since 1970 in a UInt32, as its DateTime columns keep them
# (rate_minute.minute, the toDateTime of the TTLs). Outside, a minute saturates to 1970 or 2106 (counted in no
# window anyone reads) and a TTL wraps (the row expires on arrival), though DateTime64 columns take the time.
STORABLE_FROM = EPOCH
STORABLE_UNTIL = EPOCH + timedelta(seconds=1 << 32)  # exclusive: 2106-02-07T06:28:16Z
_TEXTS = pa.list_(pa.string())
_MAP = pa.map_(pa.string(), pa.string())
# The ``events`` columns the writer fills (ingested_at keeps its DEFAULT), as Arrow types that
# ClickHouse reads into the table's own types (LowCardinality, Map, DateTime64(3, 'UTC')).
EVENT_COLUMNS = pa.schema([
    ("event_id", pa.string()), ("trace_id", pa.string()), ("observed_at", pa.timestamp("ms", tz="UTC")),
    ("route", pa.string()), ("tenant", pa.string()), ("query_text", pa.string()), ("query_type", pa.string()),
    ("stakes", pa.string()), ("answerable", pa.int8()), ("answer_text", pa.string()), ("action", pa.string()),
    ("versions", _MAP), ("first_failed_stage", pa.string()), ("evidence", pa.string()), ("signals", pa.string()),
    ("attributes", _MAP), ("claim_ids", _TEXTS), ("claim_texts", _TEXTS), ("claim_types", _TEXTS),
    ("verdicts", _TEXTS), ("scores", pa.list_(pa.float32())), ("chunk_ids", _TEXTS), ("source_ids", _TEXTS),
    ("spans", _TEXTS), ("labelers", _TEXTS), ("sampling_rate", pa.float64()),
])


def evidence_json(evidence: list[Evidence]) -> str:
    return msgspec.json.encode(evidence).decode() if evidence else "[]"  # Evidence omits its null fields


def signals_json(signals: Signals) -> str:
    return orjson.dumps(json_object(signals)).decode()


def _texts(values: list) -> pa.Array:
    return pa.array(values, type=pa.string())


def events_to_table(events: Sequence[VerdictEvent]) -> pa.Table:
    """The ``events`` rows of a batch as columns (one Arrow table), the same values ``event_to_row`` gives.

    Built column by column, and each per-claim column as one flat array cut by offsets: far fewer
    Python objects than a dict (and a list per claim field) per row."""
    queries, answers = [e.query for e in events], [e.answer for e in events]
    claims = [c for e in events for c in e.claims]
    offsets = pa.array([0, *accumulate(len(e.claims) for e in events)], type=pa.int32())

    def per_claim(values: list, kind: pa.DataType = pa.string()) -> pa.Array:
        return pa.ListArray.from_arrays(offsets, pa.array(values, type=kind))

    columns = {
        "event_id": _texts([e.event_id for e in events]),
        "trace_id": _texts([e.trace_id for e in events]),
        # Truncated to whole milliseconds, as ch_time does.
        "observed_at": pa.array([(e.observed_at - EPOCH) // MILLISECOND for e in events], pa.timestamp("ms", tz="UTC")),
        "route": _texts([e.route for e in events]),
        "tenant": _texts([e.tenant or "" for e in events]),
        "query_text": _texts([q.text or "" for q in queries]),
        "query_type": _texts([q.query_type or "" for q in queries]),
        "stakes": _texts([q.stakes or "" for q in queries]),
        "answerable": pa.array([-1 if q.answerable is None else int(q.answerable) for q in queries], pa.int8()),
        "answer_text": _texts([a.text or "" for a in answers]),
        "action": _texts([a.action or "" for a in answers]),
        "versions": pa.array([list(e.versions.items()) for e in events], _MAP),
        "first_failed_stage": _texts([e.first_failed_stage or "" for e in events]),
        "evidence": _texts([evidence_json(e.evidence) for e in events]),
        "signals": _texts([signals_json(e.signals) for e in events]),
        "attributes": pa.array([list(e.attributes.items()) for e in events], _MAP),
        "claim_ids": per_claim([c.claim_id or f"c{i + 1}" for e in events for i, c in enumerate(e.claims)]),
        "claim_texts": per_claim([c.text or "" for c in claims]),
        "claim_types": per_claim([c.claim_type or "" for c in claims]),
        "verdicts": per_claim([c.verdict for c in claims]),
        "scores": per_claim([c.score for c in claims], pa.float32()),
        "chunk_ids": per_claim([c.chunk_id or "" for c in claims]),
        "source_ids": per_claim([c.source_id or "" for c in claims]),
        "spans": per_claim([c.span or "" for c in claims]),
        "labelers": per_claim([c.labeler or "" for c in claims]),
        "sampling_rate": pa.array([e.sampling.rate for e in events], pa.float64()),
    }
    return pa.table(columns, schema=EVENT_COLUMNS)


def event_to_row(event: VerdictEvent) -> dict:
    claims = event.claims
    answerable = event.query.answerable
    return {
        "event_id": event.event_id,
        "trace_id": event.trace_id,
        "observed_at": ch_time(event.observed_at),
        "route": event.route,
        "tenant": event.tenant or "",
        "query_text": event.query.text or "",
        "query_type": event.query.query_type or "",
        "stakes": event.query.stakes or "",
        "answerable": -1 if answerable is None else int(answerable),
        "answer_text": event.answer.text or "",
        "action": event.answer.action or "",
        "versions": event.versions,
        "first_failed_stage": event.first_failed_stage or "",
        "evidence": evidence_json(event.evidence),
        "signals": signals_json(event.signals),
        "attributes": event.attributes,
        "claim_ids": [c.claim_id or f"c{i + 1}" for i, c in enumerate(claims)],
        "claim_texts": [c.text or "" for c in claims],
        "claim_types": [c.claim_type or "" for c in claims],
        "verdicts": [c.verdict for c in claims],
        "scores": [c.score for c in claims],
        "chunk_ids": [c.chunk_id or "" for c in claims],
        "source_ids": [c.source_id or "" for c in claims],
        "spans": [c.span or "" for c in claims],
        "labelers": [c.labeler or "" for c in claims],
        "sampling_rate": event.sampling.rate,
    }
