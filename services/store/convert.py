"""Pure converters between contract events and store rows."""
from __future__ import annotations

from datetime import datetime, timezone

import orjson

from services.contract.model import VerdictEvent


def ch_time(ts: datetime) -> str:
    """A DateTime64(3) literal in UTC, as JSONEachRow reads it."""
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_ch_time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


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
        "evidence": orjson.dumps([e.model_dump(exclude_none=True) for e in event.evidence]).decode(),
        "signals": orjson.dumps(event.signals.model_dump(exclude_none=True)).decode(),
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
    }
