"""FEVER-style claim verification: one claim per record (the FEVER dataset's JSONL shape).

Source fields (``*`` required):

    id                   the record's id; the event_id is derived from it (else from the content and line)
    claim*               the claim text
    predicted_label      the verifier's call; used when present (labeler verifier:<verifier>)
    label                the gold / human label; used when there is no predicted_label (labeler human:fever)
                         one of the two is required
    predicted_evidence   [[page, sentence_id], ...]
    evidence             FEVER evidence sets: [[[annotation_id, evidence_id, page, sentence_id], ...], ...]
    observed_at          RFC 3339 with offset; FEVER files have none, so the conversion time is used
    trace_id             default "fever-<id>" (or "fever-<derived identity>")
    verifier             name@version of the verifier that predicted

Labels: SUPPORTS, REFUTES, NOT ENOUGH INFO (case-insensitive).
One FEVER record is one event with one claim: several claims of one answer, sent this
way, are resampled as separate answers by the rate intervals.
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
    label,
    optional,
    pick_route,
    require,
)

NAME = "fever"
DESCRIPTION = "FEVER-style records: SUPPORTS / REFUTES / NOT ENOUGH INFO, one claim each"
LABELS = {"supports": "supported", "refutes": "contradicted", "not enough info": "unsupported"}
TIME_FIELDS = ("observed_at",)


def looks_like(record: dict) -> bool:
    return isinstance(record.get("claim"), str) and ("label" in record or "predicted_label" in record)


def _chunks(record: dict, line: int) -> list[dict]:
    """Evidence sentences as chunks "<page>#<sentence>", predicted evidence first."""
    pairs: list[tuple[str, object]] = []
    for i, item in enumerate(optional(record, "predicted_evidence", list, line) or []):
        check_type(item, list, line, f"predicted_evidence[{i}]")
        if len(item) != 2:
            raise RecordError.at(line, f"predicted_evidence[{i}]", "expected [page, sentence_id]", "wrong_type")
        pairs.append((item[0], item[1]))
    for s, evidence_set in enumerate(optional(record, "evidence", list, line) or []):
        check_type(evidence_set, list, line, f"evidence[{s}]")
        for i, item in enumerate(evidence_set):
            check_type(item, list, line, f"evidence[{s}][{i}]")
            if len(item) != 4:
                raise RecordError.at(
                    line,
                    f"evidence[{s}][{i}]",
                    "expected [annotation_id, evidence_id, page, sentence_id]",
                    "wrong_type",
                )
            if item[2] is not None:  # NOT ENOUGH INFO sets carry no page
                pairs.append((item[2], item[3]))
    chunks: dict[str, dict] = {}
    for page, sentence in pairs:
        if not isinstance(page, str):
            raise RecordError.at(line, "evidence", f"page {page!r} is not a string", "wrong_type")
        chunk_id = f"{page}#{sentence}"
        chunks.setdefault(chunk_id, {"chunk_id": chunk_id, "source_id": page, "used": True})
    return list(chunks.values())


def to_events(record: dict, *, route: str | None, line: int, now: datetime | None = None) -> list[dict]:
    record_id = identity(record, "id", line)
    predicted = optional(record, "predicted_label", str, line)
    if predicted is not None:
        verdict = label(predicted, LABELS, line, "predicted_label")
        verifier = optional(record, "verifier", str, line)
        labeler = f"verifier:{verifier or NAME}"
    elif record.get("label") is not None:
        verdict = label(require(record, "label", str, line), LABELS, line, "label")
        verifier, labeler = None, "human:fever"
    else:
        raise RecordError.at(
            line, "predicted_label", "required field is missing (or give the gold 'label')", "missing_field"
        )
    evidence = _chunks(record, line)
    claim = {"claim_id": "c1", "text": require(record, "claim", str, line), "verdict": verdict, "labeler": labeler}
    if evidence:
        claim.update(chunk_id=evidence[0]["chunk_id"], source_id=evidence[0]["source_id"])
    event = {
        "event_id": derived_event_id(NAME, record_id),
        "trace_id": str(optional(record, "trace_id", (str, int), line) or f"fever-{record_id}"),
        "observed_at": event_time(record, TIME_FIELDS, line, now),
        "route": pick_route(route, line),
        "versions": {"verifier": verifier} if verifier else {},
        "evidence": evidence,
        "claims": [claim],
    }
    return [finish(event, line)]


def audit(record: dict, events: list[dict], *, line: int) -> list[str]:
    return []
