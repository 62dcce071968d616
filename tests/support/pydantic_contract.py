"""The pydantic model and decoder that the msgspec decoder replaced, kept as the differential test's reference
(tests/unit/contract/test_decoder_differential.py). Not used by the service."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import orjson
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from services.contract.decode import envelope_problem, is_envelope, lenient_ids, parse_error
from services.contract.model import (
    ACTIONS,
    CLAIM_TYPES,
    MAX_ATTRIBUTES,
    MAX_CLAIMS,
    MAX_EVIDENCE,
    MAX_KEY_CHARS,
    MAX_LABEL_CHARS,
    MAX_TEXT_CHARS,
    MAX_VERSION_KEYS,
    QUERY_TYPES,
    STAGES,
    STAKES,
    Fault,
    canonical_verdict,
    check_route,
    parse_timestamp,
)
from services.contract.rejection import Problem, Rejection, reject


def _custom(check, value):
    try:
        return check(value)
    except Fault as exc:
        raise PydanticCustomError(exc.rule, exc.message) from None


Verdict = Annotated[str, BeforeValidator(lambda v: _custom(canonical_verdict, v))]
Timestamp = Annotated[datetime, BeforeValidator(lambda v: _custom(parse_timestamp, v))]
Route = Annotated[str, AfterValidator(lambda v: _custom(check_route, v))]
Id = Annotated[str, Field(min_length=1, max_length=128)]
Label = Annotated[str, Field(max_length=MAX_LABEL_CHARS)]
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Key = Annotated[str, Field(max_length=MAX_KEY_CHARS)]
Unit = Annotated[float, Field(ge=0, le=1)]


class Part(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class Query(Part):
    text: Text | None = None
    query_type: Literal[QUERY_TYPES] | None = None  # type: ignore[valid-type]
    stakes: Literal[STAKES] | None = None  # type: ignore[valid-type]
    answerable: bool | None = None


class Answer(Part):
    text: Text | None = None
    action: Literal[ACTIONS] | None = None  # type: ignore[valid-type]


class Evidence(Part):
    chunk_id: Label
    source_id: Label | None = None
    version: Label | None = None
    used: bool | None = None
    text: Text | None = None


class Claim(Part):
    claim_id: Label | None = None
    text: Text | None = None
    claim_type: Literal[CLAIM_TYPES] | None = None  # type: ignore[valid-type]
    verdict: Verdict
    score: Unit | None = None
    chunk_id: Label | None = None
    source_id: Label | None = None
    span: Text | None = None
    labeler: Label | None = None


class Signals(Part):
    cherry_pick: list[Label] = Field(default_factory=list, max_length=MAX_EVIDENCE, fail_fast=True)
    premise_similarity: Unit | None = None
    support_delta: float | None = None
    sample_disagreement: Unit | None = None


class Sampling(Part):
    # in (0, 1]: the chance this answer was picked for verification; 0 or more than 1 would weight it by nonsense
    rate: Annotated[float, Field(gt=0, le=1)] = 1.0


class VerdictEvent(Part):
    schema_: Literal["claimwatch.verdict/v1"] = Field(alias="schema")
    event_id: Id
    trace_id: Id
    observed_at: Timestamp
    route: Route
    tenant: Label | None = None
    query: Query = Field(default_factory=Query)
    answer: Answer = Field(default_factory=Answer)
    versions: dict[Key, Label] = Field(default_factory=dict, max_length=MAX_VERSION_KEYS)
    # fail_fast: a 500k-item list under the size limit is refused at its first bad item.
    evidence: list[Evidence] = Field(default_factory=list, max_length=MAX_EVIDENCE, fail_fast=True)
    claims: list[Claim] = Field(max_length=MAX_CLAIMS, fail_fast=True)
    first_failed_stage: Literal[STAGES] | None = None  # type: ignore[valid-type]
    signals: Signals = Field(default_factory=Signals)
    attributes: dict[Key, Label] = Field(default_factory=dict, max_length=MAX_ATTRIBUTES)
    sampling: Sampling = Field(default_factory=Sampling)

    def to_json_dict(self) -> dict:
        out = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not out["signals"]["cherry_pick"]:  # the service's Signals leave their defaults out, as nulls
            del out["signals"]["cherry_pick"]
        return out


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
    """Every fault pydantic found (the service kept the first 10): the differential test asks whether msgspec's
    one fault is among them, and an input with more than 10 faults must not hide it."""
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
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


def _validate(obj: object) -> VerdictEvent | Rejection:
    if not isinstance(obj, dict):
        return reject("not_object", "$", f"event must be a JSON object, got {type(obj).__name__}")
    try:
        return VerdictEvent.model_validate(obj)
    except ValidationError as exc:
        return Rejection(_problems(exc), **lenient_ids(obj))
    except RecursionError:
        return reject("too_deep", "$", "event nests too deeply")


def _parse(raw: bytes | str | None, max_bytes: int = 1 << 20) -> object:
    if raw is None:
        return reject("empty", "$", "message has no value")
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > max_bytes:
        return reject("too_large", "$", f"message is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return parse_error(raw, exc)


def decode(raw: bytes | str | None) -> VerdictEvent | Rejection:
    parsed = _parse(raw)
    return parsed if isinstance(parsed, Rejection) else _validate(parsed)


def decode_message(raw: bytes | str | None) -> list[tuple[int | None, VerdictEvent | Rejection]]:
    parsed = _parse(raw)
    if isinstance(parsed, Rejection):
        return [(None, parsed)]
    if not is_envelope(parsed):
        return [(None, _validate(parsed))]
    problem = envelope_problem(parsed)
    if problem is not None:
        return [(None, problem)]
    return [(i, _validate(obj)) for i, obj in enumerate(parsed["events"])]
