"""Serving-gate monitor records: one per request, counts only, no customer text.

Source fields (``*`` required):

    request_id           the request's id: trace_id, and the event_id is derived from it
                         (else both from the content and line)
    ts                   RFC 3339 with offset (else the conversion time)
    route                the record's route; used when no --route is given, and must equal it when one is
    verdict_counts*      {"supported": 3, "not_supported": 1}: keys in the contract's verdict vocabulary
                         (canonical or alias, case-insensitive), values non-negative integers
    evidence_version     -> versions.corpus
    model, gate          -> versions.model, versions.verifier
    first_failed_stage   passed, evidence_admission, claim_generation, generation_stability
    action               served, abstained, revised, blocked, review

Each counted claim becomes a claim that carries only its verdict.
"""

from __future__ import annotations

from datetime import datetime

from services.client.adapters import MAX_CLAIMS_PER_RECORD
from services.contract.errors import RecordError
from services.contract.model import FAILED_VERDICTS, VERDICT_ALIASES
from services.contract.records import (
    check_type,
    derived_event_id,
    event_time,
    finish,
    identity,
    label,
    optional,
    require,
)

NAME = "monitor-record"
DESCRIPTION = "serving-gate monitor records: verdict_counts per request, no text"
TIME_FIELDS = ("ts",)


def looks_like(record: dict) -> bool:
    return "verdict_counts" in record


def _route(record: dict, route: str | None, line: int) -> str:
    own = optional(record, "route", str, line)
    if route and own and own != route:
        raise RecordError.at(
            line,
            "route",
            f"the record says {own!r} but --route is {route!r}; drop --route to keep each record's own route",
            "route_conflict",
        )
    if not (route or own):
        raise RecordError.at(line, "route", "required field is missing (or pass --route)", "missing_field")
    return route or own


def to_events(record: dict, *, route: str | None, line: int, now: datetime | None = None) -> list[dict]:
    request_id = identity(record, "request_id", line)
    counts = require(record, "verdict_counts", dict, line)
    claims: list[dict] = []
    for key, count in counts.items():
        path = f"verdict_counts.{key}"
        verdict = label(key, VERDICT_ALIASES, line, path)
        check_type(count, int, line, path)
        if count < 0 or len(claims) + count > MAX_CLAIMS_PER_RECORD:
            raise RecordError.at(
                line,
                path,
                f"count {count} is out of range: 0 to {MAX_CLAIMS_PER_RECORD} claims per record",
                "out_of_range",
            )
        claims += [{"verdict": verdict}] * count
    versions = {
        name: optional(record, field, str, line)
        for name, field in (("corpus", "evidence_version"), ("model", "model"), ("verifier", "gate"))
    }
    event = {
        "event_id": derived_event_id(NAME, request_id),
        "trace_id": request_id,
        "observed_at": event_time(record, TIME_FIELDS, line, now),
        "route": _route(record, route, line),
        "answer": {"action": optional(record, "action", str, line)},
        "versions": {k: v for k, v in versions.items() if v},
        "first_failed_stage": optional(record, "first_failed_stage", str, line),
        "claims": claims,
    }
    return [finish(event, line)]


def audit(record: dict, events: list[dict], *, line: int) -> list[str]:
    # A gate that says "passed" while it counted failed claims contradicts itself.
    failed = sum(c["verdict"] in FAILED_VERDICTS for e in events for c in e["claims"])
    if record.get("first_failed_stage") == "passed" and failed:
        return [f"line {line}: first_failed_stage is 'passed' but verdict_counts hold {failed} failed claim(s)"]
    return []
