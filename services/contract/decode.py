"""Bytes in, a valid event or a machine-readable rejection out. Never raises on input."""
from __future__ import annotations

from dataclasses import dataclass, field

import orjson
from pydantic import ValidationError

from services.contract.model import VerdictEvent

DEFAULT_MAX_BYTES = 1 << 20

# pydantic's error types, folded into the contract's rule names.
_RULES = {
    "missing": "missing_field",
    "literal_error": "invalid_value",
    "string_too_short": "bad_length",
    "string_too_long": "bad_length",
    "too_long": "too_many_items",
    "greater_than_equal": "out_of_range",
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


@dataclass(frozen=True)
class Problem:
    rule: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def to_dict(self) -> dict:
        return {"rule": self.rule, "path": self.path, "message": self.message}


@dataclass(frozen=True)
class Rejection:
    """Why an input is not a valid event; ``problems[0]`` is the reason it is counted under."""

    problems: tuple[Problem, ...]
    event_id: str | None = None
    route: str | None = None

    @property
    def rule(self) -> str:
        return self.problems[0].rule

    @property
    def reason(self) -> str:
        return str(self.problems[0])

    def to_dict(self) -> dict:
        return {"rule": self.rule, "reason": self.reason, "problems": [p.to_dict() for p in self.problems]}


class ContractError(ValueError):
    """Raised by helpers that refuse an event at the source (producer, adapters)."""

    def __init__(self, rejection: Rejection):
        super().__init__(rejection.reason)
        self.rejection = rejection


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-before[canonical_verdict(), str]",) or "function-" in str(part):
            continue
        else:
            out += ("." if out else "") + ("schema" if part == "schema" else str(part))
    return out or "$"


def _problems(exc: ValidationError) -> tuple[Problem, ...]:
    problems = []
    for err in exc.errors(include_url=False, include_input=False)[:10]:
        kind = err["type"]
        rule = _RULES.get(kind, kind)
        path = _path(err["loc"])
        message = err["msg"]
        if kind == "literal_error" and path == "schema":
            rule, message = "bad_schema", f"schema must be 'claimwatch.verdict/v1': {message}"
        elif kind == "missing":
            message = "required field is missing"
        problems.append(Problem(rule, path, message))
    return tuple(problems)


def reject(rule: str, path: str, message: str, **ids: str | None) -> Rejection:
    return Rejection((Problem(rule, path, message),), **ids)


@dataclass
class Decoder:
    """Decodes raw Kafka values. Size is checked before any parsing; JSON depth is
    bounded by orjson's recursion limit (1024), so hostile input is refused cheaply."""

    max_bytes: int = DEFAULT_MAX_BYTES
    counts: dict[str, int] = field(default_factory=dict)

    def decode(self, raw: bytes | str | None) -> VerdictEvent | Rejection:
        result = self._decode(raw)
        if isinstance(result, Rejection):
            self.counts[result.rule] = self.counts.get(result.rule, 0) + 1
        return result

    def _decode(self, raw: bytes | str | None) -> VerdictEvent | Rejection:
        if raw is None:
            return reject("empty", "$", "message has no value")
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        if len(raw) > self.max_bytes:
            return reject("too_large", "$", f"event is {len(raw)} bytes; the limit is {self.max_bytes}")
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as uexc:
                return reject("not_utf8", "$", f"bytes are not UTF-8 at offset {uexc.start}")
            return reject("not_json", "$", f"not JSON: {exc}")
        if not isinstance(obj, dict):
            return reject("not_object", "$", f"event must be a JSON object, got {type(obj).__name__}")
        try:
            return VerdictEvent.model_validate(obj)
        except ValidationError as exc:
            ids = {k: v if isinstance(v, str) else None for k, v in (("event_id", obj.get("event_id")), ("route", obj.get("route")))}
            return Rejection(_problems(exc), **ids)
        except RecursionError:
            return reject("too_deep", "$", "event nests too deeply")


def validate_event(obj: dict) -> VerdictEvent:
    """Validate a Python dict as an event or raise ContractError with the DLQ's reason."""
    result = Decoder().decode(orjson.dumps(obj))
    if isinstance(result, Rejection):
        raise ContractError(result)
    return result
