"""Four-stage verifier pipelines (extract -> link -> classify -> decide): one run per answer.

Source fields (``*`` required):

    run_id          the run's id; the event_id is derived from it (else from the content and line)
    finished_at     RFC 3339 with offset (else the conversion time)
    request_id      the checked request's trace id (default: run_id, else the derived identity)
    pipeline        verifier name@version -> versions.verifier and the claims' labeler
    question, answer, action    (action uses the contract's values: served, abstained, ...)
    stages*:
      extract*   [{"claim_id"*, "text"*, "claim_type"}]
      link       [{"claim_id"*, "chunk_id"*, "source_id", "source_version", "evidence_text"}]
      classify   [{"claim_id"*, "relation", "score"}]          (score is used when decide has none)
      decide*    [{"claim_id"*, "verdict"*, "span", "score"}]  one per extracted claim

Verdicts: SUPPORTED, UNLINKED, OVERREACH, CONTRADICTED, STALE (case-insensitive).
"""

from __future__ import annotations

from datetime import datetime

from services.contract.errors import RecordError
from services.contract.model import CLAIM_TYPES
from services.contract.records import (
    check_type,
    derived_event_id,
    event_time,
    finish,
    identity,
    label,
    optional,
    pick_route,
    require,
)

NAME = "pipeline"
DESCRIPTION = "four-stage verifier pipelines: SUPPORTED / UNLINKED / OVERREACH / CONTRADICTED / STALE per claim"
VERDICTS = {
    "supported": "supported",
    "unlinked": "unsupported",
    "overreach": "overreach",
    "contradicted": "contradicted",
    "stale": "stale",
}
CLAIM_TYPE_LABELS = {t: t for t in CLAIM_TYPES}
TIME_FIELDS = ("finished_at",)


def looks_like(record: dict) -> bool:
    stages = record.get("stages")
    return isinstance(stages, dict) and ("extract" in stages or "decide" in stages)


def _by_claim(stages: dict, stage: str, line: int, *, required: bool) -> dict[str, dict]:
    entries = (
        require(stages, stage, list, line, where="stages.")
        if required
        else (optional(stages, stage, list, line, where="stages.") or [])
    )
    out: dict[str, dict] = {}
    for i, entry in enumerate(entries):
        where = f"stages.{stage}[{i}]."
        check_type(entry, dict, line, where.rstrip("."))
        claim_id = str(require(entry, "claim_id", (str, int), line, where=where))
        if claim_id in out and stage != "link":
            raise RecordError.at(line, f"{where}claim_id", f"claim {claim_id!r} appears twice in {stage}", "duplicate")
        out.setdefault(claim_id, entry)
    return out


def to_events(record: dict, *, route: str | None, line: int, now: datetime | None = None) -> list[dict]:
    run_id = identity(record, "run_id", line)
    stages = require(record, "stages", dict, line)
    extracted = _by_claim(stages, "extract", line, required=True)
    links = _by_claim(stages, "link", line, required=False)
    classified = _by_claim(stages, "classify", line, required=False)
    decided = _by_claim(stages, "decide", line, required=True)
    for stage, entries in (("link", links), ("classify", classified), ("decide", decided)):
        stray = sorted(set(entries) - set(extracted))
        if stray:
            raise RecordError.at(line, f"stages.{stage}", f"claim {stray[0]!r} was never extracted", "unknown_claim")
    pipeline = optional(record, "pipeline", str, line)
    labeler = f"verifier:{pipeline}" if pipeline else f"verifier:{NAME}"
    claims = []
    evidence: dict[str, dict] = {}  # by chunk_id
    for index, (claim_id, extract) in enumerate(extracted.items()):
        where = f"stages.extract[{index}]."
        decision = decided.get(claim_id)
        if decision is None:
            raise RecordError.at(line, "stages.decide", f"claim {claim_id!r} has no verdict", "missing_field")
        decide_at = f"stages.decide[claim {claim_id}]."
        link = links.get(claim_id, {})
        claim_type = optional(extract, "claim_type", str, line, where=where)
        score = optional(decision, "score", (int, float), line, where=decide_at)
        if score is None:
            score = optional(
                classified.get(claim_id, {}), "score", (int, float), line, where=f"stages.classify[claim {claim_id}]."
            )
        claims.append(
            {
                "claim_id": claim_id,
                "text": require(extract, "text", str, line, where=where),
                "claim_type": None
                if claim_type is None
                else label(claim_type, CLAIM_TYPE_LABELS, line, f"{where}claim_type"),
                "verdict": label(
                    require(decision, "verdict", str, line, where=decide_at), VERDICTS, line, f"{decide_at}verdict"
                ),
                "score": score,
                "span": optional(decision, "span", str, line, where=decide_at),
                "chunk_id": link.get("chunk_id"),
                "source_id": link.get("source_id"),
                "labeler": labeler,
            }
        )
    # Every linked chunk is evidence the claims rest on (a claim may link several; its chunk_id is the first).
    for i, link in enumerate(optional(stages, "link", list, line, where="stages.") or []):
        chunk_id = require(link, "chunk_id", str, line, where=f"stages.link[{i}].")
        evidence.setdefault(
            chunk_id,
            {
                "chunk_id": chunk_id,
                "source_id": link.get("source_id"),
                "version": link.get("source_version"),
                "used": True,
                "text": link.get("evidence_text"),
            },
        )
    event = {
        "event_id": derived_event_id(NAME, run_id),
        "trace_id": str(optional(record, "request_id", (str, int), line) or run_id),
        "observed_at": event_time(record, TIME_FIELDS, line, now),
        "route": pick_route(route, line),
        "query": {"text": optional(record, "question", str, line)},
        "answer": {"text": optional(record, "answer", str, line), "action": optional(record, "action", str, line)},
        "versions": {"verifier": pipeline} if pipeline else {},
        "evidence": [{k: v for k, v in e.items() if v is not None} for e in evidence.values()],
        "claims": [{k: v for k, v in c.items() if v is not None} for c in claims],
    }
    return [finish(event, line)]


def audit(record: dict, events: list[dict], *, line: int) -> list[str]:
    return []
