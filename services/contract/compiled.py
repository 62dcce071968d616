"""Bytes in, valid events or machine-readable rejections out, decoded by msgspec straight from bytes.

msgspec reports the first fault it meets, as ``"<message> - at `$.path`"``; ``_problem`` folds that into
the contract's rule names and field paths. Input that is not JSON is classified by ``parse_error``, so
its rejection reads as it always has."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import msgspec

from services.contract.decode import DEFAULT_MAX_BYTES, envelope_problem, is_envelope, lenient_ids, parse_error
from services.contract.model import SCHEMA
from services.contract.rejection import Problem, Rejection, reject
from services.contract.structs import Fault, VerdictEvent

_AT = re.compile(r"(?s)(.*) - at `\$(.*)`")
_INDEX = re.compile(r"\[\d+\]")
_LENGTH = re.compile(r"Expected `(\w+)[^`]*` of length ([<>]=) (\d+)")
_RANGE = re.compile(r"Expected `[^`]*` [<>]")
_GOT = re.compile(r"Expected `[^`]*`, got `(\w+)`")
# The enumerated fields: a value of the wrong type is an invalid value, as for any other value outside the list.
_CHOICES = frozenset({"query.query_type", "query.stakes", "answer.action", "claims.claim_type", "first_failed_stage"})
_PY_TYPES = {"array": "list", "null": "NoneType", "object": "dict"}


class _Head(msgspec.Struct):
    """What tells a batch envelope from one event; everything else is skipped unread."""
    schema: object = None
    events: msgspec.Raw = None  # null is read as Raw(b"null"), so None means absent


class _Ids(msgspec.Struct):
    event_id: object = None
    route: object = None
    observed_at: object = None


_HEAD = msgspec.json.Decoder(_Head)
_EVENT = msgspec.json.Decoder(VerdictEvent)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_IDS = msgspec.json.Decoder(_Ids)
_ANY = msgspec.json.Decoder()
DECODE_ERRORS = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)  # malformed or too deep to read


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
            return Problem("bad_length", where, message)
        if kind == "str":
            return Problem("too_long", where, f"string longer than {limit} characters, the limit")
        return Problem(f"{_INDEX.sub('', where)}.too_many", where, f"more than {limit} items; the limit is {limit}")
    if _RANGE.match(message):
        return Problem("out_of_range", where, message)
    if message.startswith("Invalid enum value") or _INDEX.sub("", where) in _CHOICES:
        return Problem("invalid_value", where, message)
    if where == "$" and (got := _GOT.match(message)) is not None:
        kind = _PY_TYPES.get(got[1], got[1])
        return Problem("not_object", "$", f"event must be a JSON object, got {kind}")
    return Problem("wrong_type", where, message)


def validate(raw: bytes) -> VerdictEvent | Rejection:
    """One event's JSON bytes, known to be well-formed JSON."""
    try:
        return _EVENT.decode(raw)
    except msgspec.ValidationError as exc:
        problem = _problem(exc)
    except RecursionError:
        return reject("too_deep", "$", "event nests too deeply")
    if problem.rule == "not_object":
        return Rejection((problem,))
    try:
        ids = msgspec.structs.asdict(_IDS.decode(raw))
    except (msgspec.ValidationError, RecursionError):
        ids = {}
    return Rejection((problem,), **lenient_ids(ids))


def _envelope(head: _Head) -> list[bytes] | Rejection:
    """The envelope's events as raw JSON, or why the envelope as a whole is malformed."""
    obj = {"schema": head.schema}
    if head.events is not None:
        try:
            obj["events"] = _RAWS.decode(head.events)
        except msgspec.ValidationError:
            obj["events"] = _ANY.decode(head.events)  # not a list: only its type is reported
    return envelope_problem(obj) or obj["events"]


@dataclass
class Decoder:
    """Decodes raw Kafka values, as services.contract.decode.Decoder does, with msgspec."""

    max_bytes: int = DEFAULT_MAX_BYTES
    counts: dict[str, int] = field(default_factory=dict)

    def decode(self, raw: bytes | str | None) -> VerdictEvent | Rejection:
        return self._count(self._read(raw, envelopes=False)[0][1])

    def decode_message(self, raw: bytes | str | None) -> list[tuple[int | None, VerdictEvent | Rejection]]:
        """Each event with its index in the envelope (None for a single-event message or a
        malformed envelope, which is one rejection)."""
        return [(i, self._count(result)) for i, result in self._read(raw, envelopes=True)]

    def _read(self, raw: bytes | str | None, envelopes: bool) -> list:
        if raw is None:
            return [(None, reject("empty", "$", "message has no value"))]
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        if len(raw) > self.max_bytes:
            return [(None, reject("too_large", "$", f"message is {len(raw)} bytes; the limit is {self.max_bytes}"))]
        if not raw.isascii():  # msgspec checks UTF-8 only in the strings it reads, not in those it skips
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return [(None, parse_error(raw, exc))]
        try:
            head = _HEAD.decode(raw)
        except msgspec.ValidationError:  # not an object, which msgspec sees before reading further
            return [(None, self._not_object(raw))]
        except DECODE_ERRORS as exc:
            return [(None, parse_error(raw, exc))]
        if not (envelopes and is_envelope({"schema": head.schema, **({} if head.events is None else {"events": 1})})):
            return [(None, validate(raw))]
        events = _envelope(head)
        if isinstance(events, Rejection):
            return [(None, events)]
        return [(i, validate(event)) for i, event in enumerate(events)]

    @staticmethod
    def _not_object(raw: bytes) -> Rejection:
        """A document that is no object: named as not JSON if it is malformed anywhere, as orjson would."""
        try:
            _ANY.decode(raw)
        except DECODE_ERRORS as exc:
            return parse_error(raw, exc)
        return validate(raw)

    def _count(self, result: VerdictEvent | Rejection) -> VerdictEvent | Rejection:
        if isinstance(result, Rejection):
            self.counts[result.rule] = self.counts.get(result.rule, 0) + 1
        return result
