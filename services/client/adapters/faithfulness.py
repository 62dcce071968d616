"""Per-sample faithfulness outputs of eval libraries (RAGAS-like): statements with a 0/1 verdict.

Source fields (``*`` required):

    sample_id            the sample's id; the event_id is derived from it. Eval exports often
                         have none: then it is derived from the record's content and line, so
                         identical samples on two lines stay two events
    user_input, response question and answer texts
    retrieved_contexts   [str] -> evidence chunks ctx-0, ctx-1, ...
    statements*          [{"statement"*, "verdict"* 0 or 1, "reason"}]: 1 = supported, 0 = unsupported
    faithfulness         the library's score (supported / statements); checked, a mismatch is a warning
    evaluated_at         RFC 3339 with offset; else the conversion time
    trace_id             default: sample_id or the derived id
    evaluator            name@version -> versions.verifier and the labeler
"""

from __future__ import annotations

from datetime import datetime

from services.contract.errors import RecordError
from services.contract.records import (
    check_type,
    derived_event_id,
    event_time,
    finish,
    identity,
    optional,
    pick_route,
    rate_mismatch,
    require,
)

NAME = "faithfulness"
DESCRIPTION = "per-sample faithfulness outputs (RAGAS-like): statements with verdict 0/1"
VERDICTS: dict[float, str] = {1: "supported", 0: "unsupported"}  # 1.0 and 0.0 too
TIME_FIELDS = ("evaluated_at",)


def looks_like(record: dict) -> bool:
    return isinstance(record.get("statements"), list)


def to_events(record: dict, *, route: str | None, line: int, now: datetime | None = None) -> list[dict]:
    sample_id = identity(record, "sample_id", line)
    evaluator = optional(record, "evaluator", str, line)
    labeler = f"verifier:{evaluator or NAME}"
    claims = []
    for i, item in enumerate(require(record, "statements", list, line)):
        where = f"statements[{i}]."
        check_type(item, dict, line, where.rstrip("."))
        raw = item.get("verdict")
        if raw is None:
            raise RecordError.at(line, f"{where}verdict", "required field is missing", "missing_field")
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw not in VERDICTS:
            raise RecordError.at(line, f"{where}verdict", f"unknown label {raw!r}; accepted: 0, 1", "unknown_label")
        claims.append(
            {
                "claim_id": f"s{i + 1}",
                "text": require(item, "statement", str, line, where=where),
                "verdict": VERDICTS[raw],
                "labeler": labeler,
            }
        )
    contexts = optional(record, "retrieved_contexts", list, line) or []
    evidence = [
        {"chunk_id": f"ctx-{i}", "text": check_type(text, str, line, f"retrieved_contexts[{i}]")}
        for i, text in enumerate(contexts)
    ]
    event = {
        "event_id": derived_event_id(NAME, sample_id),
        "trace_id": str(optional(record, "trace_id", (str, int), line) or sample_id)[:128],
        "observed_at": event_time(record, TIME_FIELDS, line, now),
        "route": pick_route(route, line),
        "query": {"text": optional(record, "user_input", str, line)},
        "answer": {"text": optional(record, "response", str, line)},
        "versions": {"verifier": evaluator} if evaluator else {},
        "evidence": evidence,
        "claims": claims,
    }
    return [finish(event, line)]


def audit(record: dict, events: list[dict], *, line: int) -> list[str]:
    stated = record.get("faithfulness")
    if stated is None:
        return []
    verdicts = [c["verdict"] for e in events for c in e["claims"]]
    supported = sum(v == "supported" for v in verdicts)
    return rate_mismatch(stated, supported, len(verdicts), line, "faithfulness")
