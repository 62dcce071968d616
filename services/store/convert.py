"""Pure converters between contract events and store rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec

from services.contract.model import Evidence, Signals, VerdictEvent


def ch_time(ts: datetime) -> str:
    """A DateTime64(3) literal in UTC, as JSONEachRow reads it."""
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_ch_time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


T = TypeVar("T")
Skip = Callable[[str, Exception], None]  # told of a stored row a reader cannot decode: its key and the error
UNREADABLE = (ValueError, OverflowError, TypeError, KeyError)  # what decoding a malformed row raises


def decode_rows(
    rows: Iterable[Mapping[str, Any]],
    decode: Callable[[Mapping[str, Any]], T],
    key: Callable[[Mapping[str, Any]], str],
    skip: Skip | None = None,
) -> list[T]:
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


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# How the worker's events reach the store: each as one JSON line of its values in order (records.intake_line,
# canonical values), which events_intake_mv turns into an ``events`` row inside ClickHouse.
INTAKE_TABLE = "events_intake"
INTAKE_SETTINGS = {
    "date_time_input_format": "best_effort",
    "input_format_null_as_default": 1,
    "input_format_json_read_objects_as_strings": 1,
    "input_format_json_read_arrays_as_strings": 1,
    "input_format_json_named_tuples_as_objects": 0,
}


def evidence_json(evidence: list[Evidence]) -> str:
    return msgspec.json.encode(evidence).decode() if evidence else "[]"  # Evidence omits its null fields


def signals_json(signals: Signals) -> str:
    return msgspec.json.encode(signals).decode()  # Signals omits its defaults: no nulls, no empty list


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
