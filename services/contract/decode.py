"""Bytes in, valid events or machine-readable rejections out (one event, or each event of a batch
envelope with its index). Never raises on input.

msgspec decodes straight from bytes into the model's Structs and reports the first fault it meets, as
``"<message> - at `$.path`"``; ``_problem`` folds that into the contract's rule names and field paths.
A message is read whole first (``_all_valid``): nearly every message is valid, and only one that is not is
read again, piece by piece, to name each fault.
Input that is not JSON is classified by ``parse_error``, in orjson's words."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import orjson

from services.contract.model import (
    ENVELOPE_SCHEMA,
    MAX_ENVELOPE_EVENTS,
    MAX_ROUTE_CHARS,
    REFUSED_SCHEMA,
    SCHEMA,
    Fault,
    VerdictEvent,
    parse_timestamp,
)
from services.contract.rejection import ContractError, Problem, Rejection, reject  # noqa: F401  (re-exported)

DEFAULT_MAX_BYTES = 1 << 20


def lenient_time(value: object) -> datetime | None:
    """An invalid event's ``observed_at`` as far as it can be read: with an offset, or taken as UTC without one."""
    if not isinstance(value, str):
        return None
    for text in (value, value + "Z"):  # the second reading: a timestamp whose only fault is the missing offset
        try:
            return parse_timestamp(text)
        except Fault:
            continue
    return None


class LenientIds(TypedDict):
    event_id: str | None
    route: str | None
    observed_at: datetime | None


def lenient_ids(obj: dict[str, Any]) -> LenientIds:
    """What an invalid event still tells: its id, route (at most a route's length) and event time, where readable."""
    event_id, route = obj.get("event_id"), obj.get("route")
    return {
        "event_id": event_id if isinstance(event_id, str) else None,
        "route": route[:MAX_ROUTE_CHARS] if isinstance(route, str) else None,
        "observed_at": lenient_time(obj.get("observed_at")),
    }


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


_REFUSED_RULE = re.compile(r"otlp\.[a-z_.]{1,60}")


def refused_record(
    rule: str, path: str, message: str, source: str, record: Any, route: str | None, at: str | None
) -> bytes:
    """The message an intake sends for a record it refused (REFUSED_SCHEMA), so the worker dead-letters it."""
    return orjson.dumps(
        {
            "schema": REFUSED_SCHEMA,
            "source": source,
            "rule": rule,
            "path": path,
            "message": message,
            "route": route,
            "observed_at": at,
            "record": record,
        }
    )


def refused(raw: bytes) -> Rejection:
    """A refused record as its intake's rejection. Intakes name their rules ``otlp.*``; anything else claiming to
    be a refused record is a malformed one (a producer cannot make up rules to count under)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return parse_error(raw, exc)
    rule, path, message = (obj.get(k) for k in ("rule", "path", "message"))
    if not (isinstance(rule, str) and _REFUSED_RULE.fullmatch(rule) and isinstance(path, str)):
        return reject(
            "refused.bad_rule", "rule", f"a refused record names its intake's rule (otlp.*), got {rule!r:.64}"
        )
    route = obj.get("route")
    return reject(
        rule,
        path[:512],
        str(message)[:2048],
        route=route[:MAX_ROUTE_CHARS] if isinstance(route, str) and route else None,
        observed_at=lenient_time(obj.get("observed_at")),
    )


def is_envelope(obj: object) -> bool:
    """A batch envelope by its schema, or an object with ``events`` that does not claim to be one event."""
    if not isinstance(obj, dict):
        return False
    return obj.get("schema") == ENVELOPE_SCHEMA or ("events" in obj and obj.get("schema") != SCHEMA)


def envelope_problem(obj: dict[str, Any]) -> Rejection | None:
    """Why an envelope as a whole is malformed, or None; its events are validated one by one afterwards."""
    if obj.get("schema") != ENVELOPE_SCHEMA:
        return reject(
            "envelope.bad_schema",
            "schema",
            f"an object with 'events' is a batch envelope; its schema must be '{ENVELOPE_SCHEMA}', "
            f"got {obj.get('schema')!r:.64}",
        )
    if "events" not in obj:
        return reject("envelope.events.missing", "events", "a batch envelope needs an 'events' list")
    events = obj["events"]
    if not isinstance(events, list):
        return reject("envelope.events.wrong_type", "events", f"'events' must be a list, got {type(events).__name__}")
    if not events:
        return reject(
            "envelope.events.empty", "events", f"'events' is empty; an envelope holds 1 to {MAX_ENVELOPE_EVENTS} events"
        )
    if len(events) > MAX_ENVELOPE_EVENTS:
        return reject(
            "envelope.events.too_many",
            "events",
            f"'events' holds {len(events)} events; the limit is {MAX_ENVELOPE_EVENTS}",
        )
    return None


_AT = re.compile(r"(?s)(.*) - at `\$(.*)`")
_INDEX = re.compile(r"\[\d+\]")
_LENGTH = re.compile(r"Expected `(\w+)[^`]*` of length ([<>]=) (\d+)")
_RANGE = re.compile(r"Expected `[^`]*` ([<>]=?) (\S+)")
_BOUNDS = {">=": "greater than or equal to", ">": "greater than", "<=": "less than or equal to", "<": "less than"}
_GOT = re.compile(r"Expected `[^`]*`, got `(\w+)`")
# The enumerated fields: a value of the wrong type is an invalid value, as for any other value outside the list.
_CHOICES = frozenset({"query.query_type", "query.stakes", "answer.action", "claims.claim_type", "first_failed_stage"})
_PY_TYPES = {"array": "list", "null": "NoneType", "object": "dict"}


class _Head(msgspec.Struct):
    """What tells a batch envelope from one event; everything else is skipped unread."""

    schema: object = None
    events: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET  # null is read as Raw(b"null"), so UNSET means absent


class _Ids(msgspec.Struct):
    event_id: object = None
    route: object = None
    observed_at: object = None


class _Envelope(msgspec.Struct):
    """A batch envelope whose every event is valid: what producers send, read in one pass."""

    schema: Literal[ENVELOPE_SCHEMA]  # type: ignore[valid-type]
    events: Annotated[list[VerdictEvent], msgspec.Meta(min_length=1, max_length=MAX_ENVELOPE_EVENTS)]


_HEAD = msgspec.json.Decoder(_Head)
_WHOLE_ENVELOPE = msgspec.json.Decoder(_Envelope)
_EVENT = msgspec.json.Decoder(VerdictEvent)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_IDS = msgspec.json.Decoder(_Ids)
_ANY = msgspec.json.Decoder()
# Malformed, too deep to read, or (ValidationError, when read without a type) a number past a double's range.
DECODE_ERRORS = (msgspec.MsgspecError, UnicodeDecodeError, RecursionError)


def _problem(exc: msgspec.ValidationError) -> Problem:
    match = _AT.fullmatch(str(exc))
    message, path = (match[1], match[2].lstrip(".")) if match else (str(exc), "")
    fault = exc.__cause__
    if isinstance(fault, Fault):
        return Problem(fault.rule, f"{path}.{fault.field}" if path else fault.field, fault.message)
    if message.startswith("Object missing required field `"):
        name = message.split("`")[1]
        return Problem("missing_field", f"{path}.{name}" if path else name, "required field is missing")
    if message == "Number out of range":  # orjson refuses such numbers as not JSON
        return Problem("not_json", "$", f"not JSON: {message}")
    where = path or "$"
    if where == "schema":
        return Problem("bad_schema", where, f"schema must be '{SCHEMA}': {message}")
    if (length := _LENGTH.match(message)) is not None:
        kind, op, limit = length.groups()
        if op == ">=":
            return Problem("bad_length", where, f"should have at least {limit} character{'s' * (limit != '1')}")
        if kind == "str":
            return Problem("too_long", where, f"string longer than {limit} characters, the limit")
        return Problem(f"{_INDEX.sub('', where)}.too_many", where, f"more than {limit} items; the limit is {limit}")
    if (bound := _RANGE.match(message)) is not None:
        return Problem("out_of_range", where, f"should be {_BOUNDS[bound[1]]} {float(bound[2]):g}")
    if message.startswith("Invalid enum value") or _INDEX.sub("", where) in _CHOICES:
        return Problem("invalid_value", where, message)
    if where == "$" and (got := _GOT.match(message)) is not None:
        kind = _PY_TYPES.get(got[1], got[1])
        return Problem("not_object", "$", f"event must be a JSON object, got {kind}")
    return Problem("wrong_type", where, message)


def validate(raw: bytes) -> VerdictEvent | Rejection:
    """One event's JSON bytes."""
    try:
        return _EVENT.decode(raw)
    except msgspec.ValidationError as exc:
        problem = _problem(exc)
    except DECODE_ERRORS as exc:
        return parse_error(raw, exc)
    if problem.rule == "not_object":
        return Rejection((problem,))
    try:
        ids = msgspec.structs.asdict(_IDS.decode(raw))
    except (msgspec.ValidationError, RecursionError):
        ids = {}
    return Rejection((problem,), **lenient_ids(ids))


def _not_object(raw: bytes) -> VerdictEvent | Rejection:
    """A document that is no object: named as not JSON if it is malformed anywhere, as orjson would."""
    try:
        _ANY.decode(raw)
    except DECODE_ERRORS as exc:
        return parse_error(raw, exc)
    return validate(raw)


def _parses(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def _all_valid(raw: bytes, envelopes: bool) -> Decoded | None:
    """A valid event, or an envelope of valid events, each read once; None for anything else, which the checks in
    ``Decoder`` then take apart message by message and event by event. Either reading succeeds only where those
    checks accept: a valid event's schema makes it no envelope, and an envelope's events are the events alone."""
    for reader in (_WHOLE_ENVELOPE, _EVENT) if envelopes else (_EVENT,):
        try:
            read = reader.decode(raw)
        except (*DECODE_ERRORS, ValueError):  # ValidationError included: the slow path names the fault
            continue
        return list(enumerate(read.events)) if isinstance(read, _Envelope) else [(None, read)]
    return None


def _envelope(head: _Head, raw: bytes) -> list[bytes] | Rejection:
    """The envelope's events as raw JSON, or why the envelope as a whole is malformed."""
    obj: dict[str, Any] = {"schema": head.schema}
    if head.events is not msgspec.UNSET:
        try:
            obj["events"] = _RAWS.decode(head.events)
        except msgspec.ValidationError:
            try:
                obj["events"] = _ANY.decode(head.events)  # not a list: only its type is reported
            except DECODE_ERRORS as exc:
                return parse_error(raw, exc)
    return envelope_problem(obj) or obj["events"]


@dataclass
class Decoder:
    """Decodes raw Kafka values. Size is checked before any parsing, and msgspec reads no deeper than
    Python's recursion limit, so hostile input is refused cheaply.

    ``decode`` takes one event; ``decode_message`` takes what a Kafka message may hold:
    one event or a batch envelope, whose events are validated one by one."""

    max_bytes: int = DEFAULT_MAX_BYTES
    counts: dict[str, int] = field(default_factory=dict)

    def decode(self, raw: bytes | str | None) -> VerdictEvent | Rejection:
        return self._count(self._read(raw, envelopes=False)[0][1])

    def decode_message(self, raw: bytes | str | None) -> Decoded:
        """Each event with its index in the envelope (None for a single-event message or a
        malformed envelope, which is one rejection)."""
        return [(i, self._count(result)) for i, result in self._read(raw, envelopes=True)]

    def _read(self, raw: bytes | str | None, envelopes: bool) -> Decoded:
        if raw is None:
            return [(None, reject("empty", "$", "message has no value"))]
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        if len(raw) > self.max_bytes:
            return [(None, reject("too_large", "$", f"message is {len(raw)} bytes; the limit is {self.max_bytes}"))]
        try:
            return self._read_bytes(raw, envelopes)
        except (msgspec.MsgspecError, RecursionError, ValueError) as exc:  # unforeseen, still no crash
            return [(None, parse_error(raw, exc))]

    @staticmethod
    def _read_bytes(raw: bytes, envelopes: bool) -> Decoded:
        if not raw.isascii():  # msgspec checks UTF-8 only in the strings it reads, not in those it skips
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return [(None, parse_error(raw, exc))]
        if (valid := _all_valid(raw, envelopes)) is not None:
            return valid
        try:
            head = _HEAD.decode(raw)
        except msgspec.ValidationError:  # not an object, which msgspec sees before reading further
            return [(None, _not_object(raw))]
        except RecursionError as exc:  # too deep for msgspec to skip: orjson's depth limit (1024) decides, as before
            return [(None, validate(raw) if _parses(raw) else parse_error(raw, exc))]
        except DECODE_ERRORS as exc:
            return [(None, parse_error(raw, exc))]
        if head.schema == REFUSED_SCHEMA:
            return [(None, refused(raw))]
        if not (
            envelopes
            and is_envelope({"schema": head.schema, **({} if head.events is msgspec.UNSET else {"events": 1})})
        ):
            return [(None, validate(raw))]
        events = _envelope(head, raw)
        if isinstance(events, Rejection):
            return [(None, events)]
        return [(i, validate(event)) for i, event in enumerate(events)]

    def _count(self, result: VerdictEvent | Rejection) -> VerdictEvent | Rejection:
        if isinstance(result, Rejection):
            self.counts[result.rule] = self.counts.get(result.rule, 0) + 1
        return result


def validate_event(obj: dict[str, Any]) -> VerdictEvent:
    """Validate a Python dict as an event or raise ContractError with the DLQ's reason."""
    result = Decoder().decode(orjson.dumps(obj))
    if isinstance(result, Rejection):
        raise ContractError(result)
    return result
