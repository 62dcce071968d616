"""Bytes in, valid events or machine-readable rejections out (one event, or each event of a batch
envelope with its index). Never raises on input."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import orjson
from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from services.contract.model import (ENVELOPE_SCHEMA, MAX_ENVELOPE_EVENTS, MAX_ROUTE_CHARS, SCHEMA, VerdictEvent,
                                     parse_timestamp)
from services.contract.rejection import ContractError, Problem, Rejection, reject  # noqa: F401  (re-exported)

DEFAULT_MAX_BYTES = 1 << 20

# pydantic's error types, folded into the contract's rule names.
_RULES = {
    "missing": "missing_field",
    "literal_error": "invalid_value",
    "string_too_short": "bad_length",
    "string_too_long": "too_long",
    "greater_than_equal": "out_of_range",
    "greater_than": "out_of_range",
    "less_than_equal": "out_of_range",
    "model_type": "wrong_type",
    "dict_type": "wrong_type",
    "list_type": "wrong_type",
    "string_type": "wrong_type",
    "bool_type": "wrong_type",
    "float_type": "wrong_type",
    "int_type": "wrong_type",
    "finite_number": "wrong_type",
}


MAX_PATH_PART = 64  # a hostile key can be long; the path names it, shortened


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "function-" in str(part) or part == "[key]":
            continue
        else:
            out += ("." if out else "") + str(part)[:MAX_PATH_PART]
    return out or "$"


def _field(loc: tuple) -> str:
    """The field a list or object bound belongs to: 'claims', 'versions', 'signals.cherry_pick'."""
    return ".".join(str(p) for p in loc if isinstance(p, str) and "function-" not in p)


def _problems(exc: ValidationError) -> tuple[Problem, ...]:
    problems = []
    for err in exc.errors(include_url=False, include_input=False)[:10]:
        kind = err["type"]
        rule = f"{_field(err['loc'])}.too_many" if kind == "too_long" else _RULES.get(kind, kind)
        path = _path(err["loc"])
        message = err["msg"]
        if kind == "literal_error" and path == "schema":
            rule, message = "bad_schema", f"schema must be 'claimwatch.verdict/v1': {message}"
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "too_long":
            message = f"more than {err['ctx']['max_length']} items; the limit is {err['ctx']['max_length']}"
        elif kind == "string_too_long":
            what = "key" if "[key]" in err["loc"] else "string"
            message = f"{what} longer than {err['ctx']['max_length']} characters, the limit"
        problems.append(Problem(rule, path, message))
    return tuple(problems)


def lenient_time(value: object) -> datetime | None:
    """An invalid event's ``observed_at`` as far as it can be read: with an offset, or taken as UTC without one."""
    if not isinstance(value, str):
        return None
    for text in (value, value + "Z"):  # the second reading: a timestamp whose only fault is the missing offset
        try:
            return parse_timestamp(text)
        except PydanticCustomError:
            continue
    return None


def lenient_ids(obj: dict) -> dict:
    """What an invalid event still tells: its id, route (at most a route's length) and event time, where readable."""
    event_id, route = obj.get("event_id"), obj.get("route")
    return {"event_id": event_id if isinstance(event_id, str) else None,
            "route": route[:MAX_ROUTE_CHARS] if isinstance(route, str) else None,
            "observed_at": lenient_time(obj.get("observed_at"))}


def parse_error(raw: bytes, exc: Exception) -> Rejection:
    """Why bytes that a parser refused (``exc``) are no event, worded as orjson sees them."""
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as json_exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as uexc:
            return reject("not_utf8", "$", f"bytes are not UTF-8 at offset {uexc.start}")
        return reject("not_json", "$", f"not JSON: {json_exc}")
    if isinstance(exc, RecursionError):
        return reject("too_deep", "$", "event nests too deeply")
    return reject("not_json", "$", f"not JSON: {exc}")


Decoded = list[tuple[int | None, VerdictEvent | Rejection]]


def is_envelope(obj: object) -> bool:
    """A batch envelope by its schema, or an object with ``events`` that does not claim to be one event."""
    if not isinstance(obj, dict):
        return False
    return obj.get("schema") == ENVELOPE_SCHEMA or ("events" in obj and obj.get("schema") != SCHEMA)


def envelope_problem(obj: dict) -> Rejection | None:
    """Why an envelope as a whole is malformed, or None; its events are validated one by one afterwards."""
    if obj.get("schema") != ENVELOPE_SCHEMA:
        return reject("envelope.bad_schema", "schema",
                      f"an object with 'events' is a batch envelope; its schema must be '{ENVELOPE_SCHEMA}', "
                      f"got {obj.get('schema')!r:.64}")
    if "events" not in obj:
        return reject("envelope.events.missing", "events", "a batch envelope needs an 'events' list")
    events = obj["events"]
    if not isinstance(events, list):
        return reject("envelope.events.wrong_type", "events", f"'events' must be a list, got {type(events).__name__}")
    if not events:
        return reject("envelope.events.empty", "events", "'events' is empty; an envelope holds 1 to "
                      f"{MAX_ENVELOPE_EVENTS} events")
    if len(events) > MAX_ENVELOPE_EVENTS:
        return reject("envelope.events.too_many", "events",
                      f"'events' holds {len(events)} events; the limit is {MAX_ENVELOPE_EVENTS}")
    return None


@dataclass
class Decoder:
    """Decodes raw Kafka values. Size is checked before any parsing; JSON depth is
    bounded by orjson's recursion limit (1024), so hostile input is refused cheaply.

    ``decode`` takes one event; ``decode_message`` takes what a Kafka message may hold:
    one event or a batch envelope, whose events are validated one by one."""

    max_bytes: int = DEFAULT_MAX_BYTES
    counts: dict[str, int] = field(default_factory=dict)

    def decode(self, raw: bytes | str | None) -> VerdictEvent | Rejection:
        parsed = self._parse(raw)
        return self._count(parsed if isinstance(parsed, Rejection) else self._validate(parsed))

    def decode_message(self, raw: bytes | str | None) -> Decoded:
        """Each event with its index in the envelope (None for a single-event message or a
        malformed envelope, which is one rejection)."""
        parsed = self._parse(raw)
        if isinstance(parsed, Rejection):
            return [(None, self._count(parsed))]
        if not is_envelope(parsed):
            return [(None, self._count(self._validate(parsed)))]
        problem = envelope_problem(parsed)
        if problem is not None:
            return [(None, self._count(problem))]
        return [(i, self._count(self._validate(obj))) for i, obj in enumerate(parsed["events"])]

    def _count(self, result: VerdictEvent | Rejection) -> VerdictEvent | Rejection:
        if isinstance(result, Rejection):
            self.counts[result.rule] = self.counts.get(result.rule, 0) + 1
        return result

    def _parse(self, raw: bytes | str | None) -> object:
        if raw is None:
            return reject("empty", "$", "message has no value")
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        if len(raw) > self.max_bytes:
            return reject("too_large", "$", f"message is {len(raw)} bytes; the limit is {self.max_bytes}")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return parse_error(raw, exc)

    @staticmethod
    def _validate(obj: object) -> VerdictEvent | Rejection:
        if not isinstance(obj, dict):
            return reject("not_object", "$", f"event must be a JSON object, got {type(obj).__name__}")
        try:
            return VerdictEvent.model_validate(obj)
        except ValidationError as exc:
            return Rejection(_problems(exc), **lenient_ids(obj))
        except RecursionError:
            return reject("too_deep", "$", "event nests too deeply")


def validate_event(obj: dict) -> VerdictEvent:
    """Validate a Python dict as an event or raise ContractError with the DLQ's reason."""
    result = Decoder().decode(orjson.dumps(obj))
    if isinstance(result, Rejection):
        raise ContractError(result)
    return result
