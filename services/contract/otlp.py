"""OpenTelemetry data as verdict events: spans that carry per-claim verdicts, and ``gen_ai.evaluation.result`` events
(log records, or span events), read from OTLP/JSON (a dict as JSON gives it, ids in hex; services/contract/otlp_wire.py
turns protobuf into the same). Used by the OTLP intake (``POST /v1/traces``, ``POST /v1/logs``) and by
``claimwatch convert --from otel`` (one OTLP/JSON request per line, as the Collector's file exporter writes them).

**A span** becomes one event when it carries claims, as flattened attributes (the OpenInference style of
``llm.input_messages.0...``) or as span events, plus OpenInference attributes it may already have:

    claimwatch.claims.<i>.verdict*    contract verdict vocabulary (canonical or alias)
    claimwatch.claims.<i>.text | .claim_type | .score | .chunk_id | .source_id | .span | .labeler
    claimwatch.claims.count           number of claims; lets a span with zero claims (an abstention) be an event
    claimwatch.route                  the route (on the span, else on the resource; a --route given must equal it)
    claimwatch.answer.action          served, abstained, revised, blocked, review
    claimwatch.verifier               -> versions.verifier
    claimwatch.event_id               explicit event id (default: derived from trace id and span id)
    span events named "claimwatch.claim" with claimwatch.claim.verdict, .text, ... : the same, one per claim
    input.value -> query.text, output.value -> answer.text, llm.model_name -> versions.model,
    llm.prompt_template.version -> versions.prompt, openinference.span.kind and the resource's
    service.name -> attributes

Its ``traceId`` becomes ``trace_id`` and its end time ``observed_at``.

**A ``gen_ai.evaluation.result`` event** (the GenAI semantic conventions: a log record whose ``eventName``, or
``event.name`` attribute, is that name; or a span event of that name) is one answer as one evaluator judged it:

    gen_ai.evaluation.name*           the evaluator -> versions.verifier, and each claim's labeler "verifier:NAME"
    gen_ai.evaluation.score.label     the verdict of the answer's one claim (contract vocabulary or alias) ...
    gen_ai.evaluation.score.value     ... and its score, when within 0 to 1 (a confidence; other scales are left out)
    claimwatch.claim.text | .claim_type | .chunk_id | .source_id | .span | .score   that one claim's other fields
    claimwatch.claims.<i>.*           or several claims, as on spans (then score.label is not read)
    claimwatch.route*, claimwatch.answer.action, claimwatch.event_id   as on spans
    gen_ai.response.model | gen_ai.request.model -> versions.model

Its trace and span ids (the log record's, or the span's) name the answer it judges: ``trace_id`` is the trace
id, and the event id is derived from both and the evaluator, so an export sent twice is counted once. Its time
(else its observed time) becomes ``observed_at``. The explanation is not kept: the contract has no field for it.

Records with neither are no verdicts: they are counted as ignored, never refused. A record that claims to be one
and cannot become a valid event is refused alone (``Refused``: where, the rule, the reason), and its neighbours
go on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from services.contract.errors import RecordError
from services.contract.model import VERDICT_ALIASES
from services.contract.records import check_type, derived_event_id, finish, label, require

PREFIX = "claimwatch.claims."
CLAIM_EVENT = "claimwatch.claim"
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
SCORE_LABEL = "gen_ai.evaluation.score.label"
SCORE_VALUE = "gen_ai.evaluation.score.value"
CLAIM_FIELDS = ("verdict", "text", "claim_type", "score", "chunk_id", "source_id", "span", "labeler")
_CLAIM_KEY = re.compile(r"claimwatch\.claims\.(\d+)\.(\w+)")
_HEX_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SIGNALS = {"traces": ("resourceSpans", "scopeSpans", "spans"), "logs": ("resourceLogs", "scopeLogs", "logRecords")}


def claim_attributes(
    claims: list[dict[str, Any]], *, route: str | None = None, action: str | None = None, verifier: str | None = None
) -> dict[str, Any]:
    """Span attributes for claims, for ``span.set_attributes(...)`` with the OpenTelemetry API."""
    out: dict[str, Any] = {f"{PREFIX}count": len(claims)}
    for i, claim in enumerate(claims):
        out.update({f"{PREFIX}{i}.{k}": claim[k] for k in CLAIM_FIELDS if claim.get(k) is not None})
    extra = {"claimwatch.route": route, "claimwatch.answer.action": action, "claimwatch.verifier": verifier}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


@dataclass(frozen=True)
class Refused:
    """One record that claims to carry verdicts and cannot become a valid event."""

    path: str  # where in the request, e.g. resourceLogs[0].scopeLogs[0].logRecords[3]
    error: RecordError
    record: Any  # the record as OTLP/JSON
    route: str | None  # the route it names, if it names one

    @property
    def rule(self) -> str:
        """``otlp.<rule>``: the mapping's rule, or ``otlp.contract.<rule>`` for the contract's own."""
        return "otlp." + self.error.rule.replace("contract:", "contract.")

    @property
    def reason(self) -> str:
        where = self.error.field or self.path
        return f"{where if where.startswith(self.path) else f'{self.path}: {where}'}: {self.error.message}"


@dataclass
class Mapped:
    """What a request held: the events, the records refused, and how many records carried no verdicts."""

    events: list[dict[str, Any]] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    ignored: int = 0

    @property
    def records(self) -> int:
        """Records that carried verdicts, taken or refused."""
        return len(self.events) + len(self.refused)


def signal_of(request: dict[str, Any]) -> str | None:
    """``traces`` or ``logs``, by the request's top-level list; None for neither."""
    return next((s for s, (top, _, _) in SIGNALS.items() if isinstance(request.get(top), list)), None)


def map_request(request: dict[str, Any], signal: str, *, route: str | None = None, line: int = 0) -> Mapped:
    """Every record of an ExportTraceServiceRequest (``traces``) or ExportLogsServiceRequest (``logs``) in OTLP/JSON.
    A request whose structure is not OTLP's raises RecordError; a record that cannot become an event is refused
    alone (a resource whose attributes are malformed refuses each of its records)."""
    top, scopes, records = SIGNALS[signal]
    mapper = _span_events if signal == "traces" else _log_events
    mapped = Mapped()
    for r, block in enumerate(require(request, top, list, line)):
        path = f"{top}[{r}]"
        check_type(block, dict, line, path)
        resource: dict[str, Any] | RecordError
        try:
            resource = _attributes(
                check_type(block.get("resource") or {}, dict, line, f"{path}.resource").get("attributes"),
                line,
                f"{path}.resource.attributes",
            )
        except RecordError as exc:
            resource = exc
        except (AttributeError, TypeError, ValueError) as exc:
            resource = RecordError.at(line, f"{path}.resource", f"not an OTLP resource: {exc}", "wrong_type")
        for s, scope in enumerate(check_type(block.get(scopes) or [], list, line, f"{path}.{scopes}")):
            scope_path = f"{path}.{scopes}[{s}]"
            items = check_type(check_type(scope, dict, line, scope_path).get(records) or [], list, line, scope_path)
            for k, record in enumerate(items):
                record_path = f"{scope_path}.{records}[{k}]"
                try:
                    if isinstance(resource, RecordError):
                        raise resource
                    found = mapper(check_type(record, dict, line, record_path), resource, route, line, record_path)
                except RecordError as exc:
                    mapped.refused.append(Refused(record_path, exc, record, _route_named(record)))
                    continue
                except (AttributeError, TypeError, ValueError) as exc:  # a shape no check above foresaw: still refused
                    error = RecordError.at(line, record_path, f"not an OTLP record: {exc}", "wrong_type")
                    mapped.refused.append(Refused(record_path, error, record, None))
                    continue
                if found:
                    mapped.events.extend(found)
                else:
                    mapped.ignored += 1
    return mapped


def _route_named(record: Any) -> str | None:
    """The route a refused record names, read leniently (its dead letter counts under it)."""
    items = record.get("attributes") if isinstance(record, dict) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("key") == "claimwatch.route":
            value = (item.get("value") or {}).get("stringValue") if isinstance(item.get("value"), dict) else None
            return value if isinstance(value, str) and value else None
    return None


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


def _indexed_claims(attrs: dict[str, Any]) -> dict[int, dict[str, Any]]:
    indexed: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        match = _CLAIM_KEY.fullmatch(key)
        if match and match[2] in CLAIM_FIELDS:
            indexed.setdefault(int(match[1]), {})[match[2]] = value
    return indexed


def _one_claim(attrs: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k: attrs[f"{prefix}.{k}"] for k in CLAIM_FIELDS if f"{prefix}.{k}" in attrs}


def _claims(attrs: dict[str, Any], events: list[Any], line: int, path: str) -> list[dict[str, Any]] | None:
    """The claims a span or an evaluation result carries as attributes (or as ``claimwatch.claim`` span events);
    None when it carries none and does not say it has zero."""
    indexed = _indexed_claims(attrs)
    from_events = [
        _one_claim(_attributes(event.get("attributes"), line, f"{path}.events[{i}].attributes"), CLAIM_EVENT)
        for i, event in enumerate(events)
        if isinstance(event, dict) and event.get("name") == CLAIM_EVENT
    ]
    if indexed and from_events:
        raise RecordError.at(
            line, path, "the span carries claims both as attributes and as span events; use one", "ambiguous_claims"
        )
    count = attrs.get(f"{PREFIX}count")
    if not indexed and not from_events and count is None:
        return None
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
        key = f"{PREFIX}{sorted(indexed)[n]}.verdict" if indexed else f"{CLAIM_EVENT}.verdict"
        if "verdict" not in claim:
            raise RecordError.at(line, f"{path}.{where}[{key}]", "required field is missing", "missing_field")
        claim["verdict"] = label(claim["verdict"], VERDICT_ALIASES, line, f"{path}.{where}[{key}]")
    return claims


def _time(record: dict[str, Any], fields: tuple[str, ...], line: int, path: str) -> str:
    for name in fields:
        raw = record.get(name)
        if raw not in (None, "", "0", 0):
            try:
                nanos = int(raw)
            except (TypeError, ValueError):
                raise RecordError.at(line, f"{path}.{name}", f"{raw!r} is not an integer", "wrong_type") from None
            return (_EPOCH + timedelta(microseconds=nanos // 1000)).isoformat(timespec="microseconds")
    raise RecordError.at(line, f"{path}.{fields[0]}", "required field is missing", "missing_field")


def _route(attrs: dict[str, Any], resource: dict[str, Any], route: str | None, line: int, path: str) -> str:
    own = attrs.get("claimwatch.route") or resource.get("claimwatch.route")
    if route and own and own != route:
        raise RecordError.at(
            line,
            f"{path}.attributes[claimwatch.route]",
            f"the record says {own!r} but --route is {route!r}; drop --route to keep each record's own route",
            "route_conflict",
        )
    found = route or own
    if not found:
        raise RecordError.at(
            line,
            f"{path}.attributes[claimwatch.route]",
            "required field is missing (on the record or its resource; or pass --route)",
            "missing_field",
        )
    return str(found)


def _trace_id(record: dict[str, Any], line: int, path: str) -> str:
    trace_id = require(record, "traceId", str, line, where=f"{path}.")
    if not _HEX_TRACE_ID.fullmatch(trace_id) or not trace_id.strip("0"):
        raise RecordError.at(
            line,
            f"{path}.traceId",
            f"{trace_id[:40]!r} is not 32 hex digits (OTLP/JSON writes ids as hex), or is all zero",
            "bad_value",
        )
    return str(trace_id).lower()


def _event(
    attrs: dict[str, Any], resource: dict[str, Any], ids: str, route: str, trace_id: str, observed_at: str, **parts: Any
) -> dict[str, Any]:
    labels = {
        "openinference.span.kind": attrs.get("openinference.span.kind"),
        "service.name": resource.get("service.name"),
        **parts.pop("labels", {}),
    }
    versions = {
        "model": attrs.get("llm.model_name") or attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model"),
        "prompt": attrs.get("llm.prompt_template.version"),
        "verifier": attrs.get("claimwatch.verifier") or parts.pop("verifier", None),
    }
    return {
        "event_id": attrs.get("claimwatch.event_id") or derived_event_id("otel", ids),
        "trace_id": trace_id,
        "observed_at": observed_at,
        "route": route,
        "answer": {"text": attrs.get("output.value"), "action": attrs.get("claimwatch.answer.action")},
        "query": {"text": attrs.get("input.value")},
        "versions": {k: str(v) for k, v in versions.items() if v is not None},
        "attributes": {k: str(v) for k, v in labels.items() if v is not None},
        **parts,
    }


def _span_events(
    span: dict[str, Any], resource: dict[str, Any], route: str | None, line: int, path: str
) -> list[dict[str, Any]]:
    attrs = _attributes(span.get("attributes"), line, f"{path}.attributes")
    events = check_type(span.get("events") or [], list, line, f"{path}.events")
    found = []
    claims = _claims(attrs, events, line, path)
    if claims is not None:
        trace_id = _trace_id(span, line, path)
        span_id = require(span, "spanId", str, line, where=f"{path}.").lower()
        event = _event(
            attrs,
            resource,
            f"{trace_id}/{span_id}",
            _route(attrs, resource, route, line, path),
            trace_id,
            _time(span, ("endTimeUnixNano", "startTimeUnixNano"), line, path),
            claims=claims,
            labels={"otel.span_name": span.get("name")},
        )
        found.append(finish(event, line))
    for i, span_event in enumerate(events):
        if isinstance(span_event, dict) and span_event.get("name") == EVALUATION_EVENT:
            event_path = f"{path}.events[{i}]"
            own = _attributes(span_event.get("attributes"), line, f"{event_path}.attributes")
            # The span's route, model and prompt hold for its evaluations; its own claims and event id do not.
            inherited = {k: v for k, v in attrs.items() if not k.startswith(PREFIX) and k != "claimwatch.event_id"}
            found.append(_evaluation({**inherited, **own}, span_event, span, resource, route, line, event_path))
    return found


def _log_events(
    record: dict[str, Any], resource: dict[str, Any], route: str | None, line: int, path: str
) -> list[dict[str, Any]]:
    attrs = _attributes(record.get("attributes"), line, f"{path}.attributes")
    if (record.get("eventName") or attrs.get("event.name")) != EVALUATION_EVENT:
        return []
    return [_evaluation(attrs, record, record, resource, route, line, path)]


def _evaluation(
    attrs: dict[str, Any],
    timed: dict[str, Any],
    judged: dict[str, Any],
    resource: dict[str, Any],
    route: str | None,
    line: int,
    path: str,
) -> dict[str, Any]:
    """One ``gen_ai.evaluation.result``: ``timed`` holds its time, ``judged`` the ids of the span it judges."""
    name = attrs.get(EVALUATION_NAME)
    if not isinstance(name, str) or not name:
        raise RecordError.at(
            line, f"{path}.attributes[{EVALUATION_NAME}]", "required field is missing", "missing_field"
        )
    trace_id = _trace_id(judged, line, path)
    span_id = str(judged.get("spanId") or "").lower()
    claims = _claims(attrs, [], line, path)
    if claims is None:
        verdict = attrs.get(SCORE_LABEL)
        if verdict is None:
            raise RecordError.at(
                line,
                f"{path}.attributes[{SCORE_LABEL}]",
                f"required field is missing: the verdict, or claims as {PREFIX}N.verdict attributes",
                "missing_field",
            )
        claim = _one_claim(attrs, CLAIM_EVENT)
        claim["verdict"] = label(verdict, VERDICT_ALIASES, line, f"{path}.attributes[{SCORE_LABEL}]")
        score = attrs.get(SCORE_VALUE)
        if "score" not in claim and isinstance(score, (int, float)) and 0 <= score <= 1:
            claim["score"] = score
        claims = [claim]
    for claim in claims:
        claim.setdefault("labeler", f"verifier:{name}")
    event = _event(
        attrs,
        resource,
        f"{trace_id}/{span_id}/{name}",
        _route(attrs, resource, route, line, path),
        trace_id,
        _time(timed, ("timeUnixNano", "observedTimeUnixNano"), line, path),
        claims=claims,
        verifier=name,
        labels={"otel.event_name": EVALUATION_EVENT},
    )
    return finish(event, line)
