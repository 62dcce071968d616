"""Answers with evidence for review tests, written through the real writer into a real store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.store.writer import EventWriter

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
CHUNK_TEXT = "Annual plans can be refunded within 14 days of purchase. A processing fee of 5% applies."


def answer(
    i: int,
    route: str = "billing-faq",
    verdicts=("supported", "contradicted"),
    verifier: str = "nli@1",
    at: datetime | None = None,
    scores: tuple[float | None, ...] | None = None,
) -> VerdictEvent:
    raw = {
        "schema": "claimwatch.verdict/v1",
        "event_id": f"ev-{route}-{i}",
        "trace_id": f"tr-{route}-{i}",
        "observed_at": (at or T0 + timedelta(seconds=i)).isoformat(),
        "route": route,
        "query": {"text": f"question {i}: how long do refunds take?", "answerable": True},
        "answer": {"text": f"answer {i}: refunds within 30 days, with a 5% fee.", "action": "served"},
        "versions": {"verifier": verifier},
        "evidence": [
            {"chunk_id": "refund-1", "source_id": "refund-policy", "text": CHUNK_TEXT},
            {"chunk_id": "fees-2", "source_id": "fees", "text": "Express shipping covers the EU only."},
        ],
        "claims": [
            {
                "text": f"claim {i}.{k}",
                "verdict": v,
                "span": "refunded within 14 days" if v != "supported" else "A processing fee of 5% applies.",
                "chunk_id": "refund-1",
                **({"score": scores[k]} if scores and scores[k] is not None else {}),
            }
            for k, v in enumerate(verdicts)
        ],
    }
    event = Decoder().decode(orjson.dumps(raw))
    assert isinstance(event, VerdictEvent), event
    return event


def write_answers(store, events) -> None:
    EventWriter(store).write(list(events))
