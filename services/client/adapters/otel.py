"""Per-claim verdicts attached to OpenTelemetry spans, exported as verdict events.

Input: one OTLP/JSON ``ExportTraceServiceRequest`` per line (``{"resourceSpans": [...]}``),
as the OpenTelemetry Collector's file exporter writes it; ids are hex, as OTLP/JSON
specifies. No opentelemetry-sdk is needed. A span becomes one event when it carries
claims, as flattened attributes (the OpenInference style of ``llm.input_messages.0...``)
or as span events, plus OpenInference attributes it may already have:

    claimwatch.claims.<i>.verdict*    contract verdict vocabulary (canonical or alias)
    claimwatch.claims.<i>.text | .claim_type | .score | .chunk_id | .source_id | .span | .labeler
    claimwatch.claims.count           number of claims; lets a span with zero claims (an abstention) be an event
    claimwatch.route                  the span's route (used when no --route is given; must equal it otherwise)
    claimwatch.answer.action          served, abstained, revised, blocked, review
    claimwatch.verifier               -> versions.verifier
    claimwatch.event_id               explicit event id (default: derived from trace id and span id)
    span events named "claimwatch.claim" with claimwatch.claim.verdict, .text, ... : the same, one event per claim
    input.value -> query.text, output.value -> answer.text, llm.model_name -> versions.model,
    llm.prompt_template.version -> versions.prompt, openinference.span.kind and the resource's
    service.name -> attributes

The span's ``traceId`` becomes ``trace_id``; its end time becomes ``observed_at``. These and
``spanId`` are required: OTLP requires them of every span, so a line without them is not a span.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from services.client.adapters import RecordError, check_type, derived_event_id, finish, label, require
from services.contract.model import VERDICT_ALIASES

NAME = "otel"
DESCRIPTION = "OTLP/JSON spans with claimwatch.claims.N.* attributes or claimwatch.claim span events"
PREFIX = "claimwatch.claims."
EVENT_NAME = "claimwatch.claim"
CLAIM_FIELDS = ("verdict", "text", "claim_type", "score", "chunk_id", "source_id", "span", "labeler")
_CLAIM_KEY = re.compile(r"claimwatch\.claims\.(\d+)\.(\w+)")
_HEX_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TIME_FIELDS: tuple[str, ...] = ()  # every span carries its own time


def claim_attributes(
    claims: list[dict], *, route: str | None = None, action: str | None = None, verifier: str | None = None
) -> dict[str, Any]:
    """Span attributes for claims, for ``span.set_attributes(...)`` with the OpenTelemetry API."""
    out: dict[str, Any] = {f"{PREFIX}count": len(claims)}
    for i, claim in enumerate(claims):
        out.update({f"{PREFIX}{i}.{k}": claim[k] for k in CLAIM_FIELDS if claim.get(k) is not None})
    extra = {"claimwatch.route": route, "claimwatch.answer.action": action, "claimwatch.verifier": verifier}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def looks_like(record: dict) -> bool:
    return isinstance(record.get("resourceSpans"), list)


def _value(any_value: Any, line: int, path: str) -> Any:
    """An OTLP AnyValue as a Python value."""
    check_type(any_value, dict, line, path)
    if "stringValue" in any_value:
        return any_value["stringValue"]
    if "intValue" in any_value:  # int64 travels as a string in OTLP/JSON
        try:
            return int(any_value["intValue"])
        except (TypeError, ValueError):
            raise RecordError.at(
                line, path, f"intValue {any_value['intValue']!r} is not an integer", "wrong_type"
            ) from None
    if "doubleValue" in any_value:
        return any_value["doubleValue"]
    if "boolValue" in any_value:
        return any_value["boolValue"]
    if "arrayValue" in any_value:
        return [_value(v, line, path) for v in (any_value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in any_value:
        return _attributes((any_value["kvlistValue"] or {}).get("values", []), line, path)
    return None


def _attributes(items: Any, line: int, path: str) -> dict[str, Any]:
    out = {}
    for i, item in enumerate(check_type(items or [], list, line, path)):
        key = require(item, "key", str, line, where=f"{path}[{i}].")
        out[key] = _value(item.get("value", {}), line, f"{path}[{key}]")
    return out


def _claims(attrs: dict[str, Any], events: list, line: int, path: str) -> list[dict] | None:
    indexed: dict[int, dict] = {}
    for key, value in attrs.items():
        match = _CLAIM_KEY.fullmatch(key)
        if match and match[2] in CLAIM_FIELDS:
            indexed.setdefault(int(match[1]), {})[match[2]] = value
    from_events = []
    for i, event in enumerate(events):
        if isinstance(event, dict) and event.get("name") == EVENT_NAME:
            ev_attrs = _attributes(event.get("attributes"), line, f"{path}.events[{i}].attributes")
            from_events.append(
                {k: ev_attrs[f"{EVENT_NAME}.{k}"] for k in CLAIM_FIELDS if f"{EVENT_NAME}.{k}" in ev_attrs}
            )
    if indexed and from_events:
        raise RecordError.at(
            line, path, "the span carries claims both as attributes and as span events; use one", "ambiguous_claims"
        )
    count = attrs.get(f"{PREFIX}count")
    if not indexed and not from_events and count is None:
        return None  # not a span with verdicts
    claims = [indexed[i] for i in sorted(indexed)] if indexed else from_events
    where = "attributes" if indexed else "events"
    if count is not None and count != len(claims):
        raise RecordError.at(
            line,
            f"{path}.attributes[{PREFIX}count]",
            f"says {count} but {len(claims)} claims are attached",
            "count_mismatch",
        )
    for n, claim in enumerate(claims):
        key = f"{PREFIX}{sorted(indexed)[n]}.verdict" if indexed else f"{EVENT_NAME}.verdict"
        if "verdict" not in claim:
            raise RecordError.at(line, f"{path}.{where}[{key}]", "required field is missing", "missing_field")
        claim["verdict"] = label(claim["verdict"], VERDICT_ALIASES, line, f"{path}.{where}[{key}]")
    return claims


def _time(span: dict, line: int, path: str) -> str:
    for field in ("endTimeUnixNano", "startTimeUnixNano"):
        raw = span.get(field)
        if raw not in (None, "", "0", 0):
            try:
                nanos = int(raw)
            except (TypeError, ValueError):
                raise RecordError.at(line, f"{path}.{field}", f"{raw!r} is not an integer", "wrong_type") from None
            return (_EPOCH + timedelta(microseconds=nanos // 1000)).isoformat(timespec="microseconds")
    raise RecordError.at(line, f"{path}.endTimeUnixNano", "required field is missing", "missing_field")


def _route(attrs: dict, route: str | None, line: int, path: str) -> str:
    own = attrs.get("claimwatch.route")
    if route and own and own != route:
        raise RecordError.at(
            line,
            f"{path}.attributes[claimwatch.route]",
            f"the span says {own!r} but --route is {route!r}; drop --route to keep each span's own route",
            "route_conflict",
        )
    found = route or own
    if not found:
        raise RecordError.at(
            line, f"{path}.attributes[claimwatch.route]", "required field is missing (or pass --route)", "missing_field"
        )
    return found


def _span_event(span: dict, resource: dict, route: str | None, line: int, path: str) -> dict | None:
    attrs = _attributes(span.get("attributes"), line, f"{path}.attributes")
    claims = _claims(attrs, span.get("events") or [], line, path)
    if claims is None:
        return None
    trace_id = require(span, "traceId", str, line, where=f"{path}.")
    if not _HEX_TRACE_ID.fullmatch(trace_id):
        raise RecordError.at(
            line,
            f"{path}.traceId",
            f"{trace_id[:40]!r} is not 32 hex digits (OTLP/JSON writes ids as hex)",
            "bad_value",
        )
    span_id = require(span, "spanId", str, line, where=f"{path}.")
    labels = {
        "openinference.span.kind": attrs.get("openinference.span.kind"),
        "service.name": resource.get("service.name"),
        "otel.span_name": span.get("name"),
    }
    versions = {
        "model": attrs.get("llm.model_name"),
        "prompt": attrs.get("llm.prompt_template.version"),
        "verifier": attrs.get("claimwatch.verifier"),
    }
    event = {
        "event_id": attrs.get("claimwatch.event_id") or derived_event_id(NAME, f"{trace_id.lower()}/{span_id.lower()}"),
        "trace_id": trace_id.lower(),
        "observed_at": _time(span, line, path),
        "route": _route(attrs, route, line, path),
        "query": {"text": attrs.get("input.value")},
        "answer": {"text": attrs.get("output.value"), "action": attrs.get("claimwatch.answer.action")},
        "versions": {k: str(v) for k, v in versions.items() if v is not None},
        "attributes": {k: str(v) for k, v in labels.items() if v is not None},
        "claims": claims,
    }
    return finish(event, line)


def to_events(record: dict, *, route: str | None, line: int, now: datetime | None = None) -> list[dict]:
    events = []
    for r, resource_spans in enumerate(require(record, "resourceSpans", list, line)):
        path = f"resourceSpans[{r}]"
        check_type(resource_spans, dict, line, path)
        resource = _attributes(
            (resource_spans.get("resource") or {}).get("attributes"), line, f"{path}.resource.attributes"
        )
        for s, scope_spans in enumerate(resource_spans.get("scopeSpans") or []):
            for k, span in enumerate(check_type(scope_spans, dict, line, f"{path}.scopeSpans[{s}]").get("spans") or []):
                span_path = f"{path}.scopeSpans[{s}].spans[{k}]"
                event = _span_event(check_type(span, dict, line, span_path), resource, route, line, span_path)
                if event is not None:
                    events.append(event)
    return events


def audit(record: dict, events: list[dict], *, line: int) -> list[str]:
    return []
