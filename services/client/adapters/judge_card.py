"""LLM-judge prompt cards: one JSON object per judged answer.

The judge emits exactly ``{"claims": [{"text", "label", "evidence_phrase"}],
"hallucination_rate", "decision_basis"}``: that converts as it is. Source fields
(``*`` required):

    claims*             [{"text"*, "label"*, "evidence_phrase", "source"}]
    hallucination_rate  the judge's own figure; checked against the claims, a mismatch is a warning
    decision_basis      accepted and not carried: free text, and attributes (the only place for
                        it) are not redacted before storage
    card_id             the card's id; the event_id is derived from it (else from the content and line)
    created_at          RFC 3339 with offset: when the judged answer was produced (else the conversion time)
    trace_id            the judged request's trace id (default: card_id, else the derived identity)
    question, answer    texts
    model               the generator that wrote the answer -> versions.model
    judge               {"model", "prompt"} -> versions.verifier "<model>/<prompt>"

Labels: supported, unsupported, contradicted (case-insensitive).
"""

from __future__ import annotations

from datetime import datetime

from services.contract.model import FAILED_VERDICTS
from services.contract.records import (
    check_type,
    derived_event_id,
    event_time,
    finish,
    identity,
    label,
    optional,
    pick_route,
    rate_mismatch,
    require,
)

NAME = "judge-card"
DESCRIPTION = "LLM-judge prompt cards: claims with labels supported / unsupported / contradicted"
LABELS = {"supported": "supported", "unsupported": "unsupported", "contradicted": "contradicted"}
TIME_FIELDS = ("created_at",)


def looks_like(record: dict) -> bool:
    claims = record.get("claims")
    return (
        isinstance(claims, list)
        and "schema" not in record
        and (
            "card_id" in record
            or "hallucination_rate" in record
            or any(isinstance(c, dict) and "label" in c for c in claims)
        )
    )


def to_events(record: dict, *, route: str | None, line: int, now: datetime | None = None) -> list[dict]:
    card_id = identity(record, "card_id", line)
    judge = optional(record, "judge", dict, line) or {}
    judge_model = optional(judge, "model", str, line, where="judge.")
    judge_prompt = optional(judge, "prompt", str, line, where="judge.")
    verifier = "/".join(p for p in (judge_model, judge_prompt) if p) or None
    labeler = f"verifier:{NAME}/{verifier}" if verifier else f"verifier:{NAME}"
    claims = []
    for i, claim in enumerate(require(record, "claims", list, line)):
        where = f"claims[{i}]."
        check_type(claim, dict, line, where.rstrip("."))
        claims.append(
            {
                "claim_id": f"c{i + 1}",
                "text": require(claim, "text", str, line, where=where),
                "verdict": label(require(claim, "label", str, line, where=where), LABELS, line, f"{where}label"),
                "span": optional(claim, "evidence_phrase", str, line, where=where),
                "chunk_id": optional(claim, "source", str, line, where=where),
                "labeler": labeler,
            }
        )
    event = {
        "event_id": derived_event_id(NAME, card_id),
        "trace_id": str(optional(record, "trace_id", (str, int), line) or card_id),
        "observed_at": event_time(record, TIME_FIELDS, line, now),
        "route": pick_route(route, line),
        "query": {"text": optional(record, "question", str, line)},
        "answer": {"text": optional(record, "answer", str, line)},
        "versions": {k: v for k, v in (("model", optional(record, "model", str, line)), ("verifier", verifier)) if v},
        "claims": claims,
    }
    return [finish(event, line)]


def audit(record: dict, events: list[dict], *, line: int) -> list[str]:
    if record.get("hallucination_rate") is None:
        return []
    verdicts = [c["verdict"] for e in events for c in e["claims"]]
    failed = sum(v in FAILED_VERDICTS for v in verdicts)
    checkable = sum(v != "trivial" for v in verdicts)
    return rate_mismatch(record["hallucination_rate"], failed, checkable, line, "hallucination_rate")
