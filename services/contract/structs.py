"""The verdict event as msgspec Structs, decoded straight from bytes (shared/contract/verdict-event-v1.md).

msgspec checks types, lengths and ranges in C. The contract's own rules (verdict aliases, timestamps,
routes, the versions and attributes maps) run in ``__post_init__`` and raise ``Fault``, which names the
rule and the field, so a rejection reads the same as for any other fault."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct, field
from pydantic_core import PydanticCustomError

from services.contract.model import (ACTIONS, CLAIM_TYPES, FAILED_VERDICTS, MAX_ATTRIBUTES, MAX_CLAIMS, MAX_EVIDENCE,
                                     MAX_KEY_CHARS, MAX_LABEL_CHARS, MAX_TEXT_CHARS, MAX_VERSION_KEYS, QUERY_TYPES,
                                     SCHEMA, STAGES, STAKES, canonical_verdict, check_route, parse_timestamp)


class Fault(ValueError):
    """A contract rule broken inside a struct: ``field`` is relative to the struct msgspec reports."""

    def __init__(self, rule: str, field: str, message: str):
        super().__init__(message)
        self.rule, self.field, self.message = rule, field, message


def _checked(check, value, name: str):
    try:
        return check(value)
    except PydanticCustomError as exc:
        raise Fault(exc.type, name, exc.message()) from None


Id = Annotated[str, Meta(min_length=1, max_length=128)]
Label = Annotated[str, Meta(max_length=MAX_LABEL_CHARS)]
Text = Annotated[str, Meta(max_length=MAX_TEXT_CHARS)]
Unit = Annotated[float, Meta(ge=0, le=1)]


class Part(Struct, gc=False):  # decoded trees hold no cycles, so the collector may skip them
    pass


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


class Claim(Part, kw_only=True):
    claim_id: Label | None = None
    text: Text | None = None
    claim_type: Literal[CLAIM_TYPES] | None = None  # type: ignore[valid-type]
    verdict: str
    score: Unit | None = None
    chunk_id: Label | None = None
    source_id: Label | None = None
    span: Text | None = None
    labeler: Label | None = None

    def __post_init__(self) -> None:
        self.verdict = _checked(canonical_verdict, self.verdict, "verdict")

    @property
    def failed(self) -> bool:
        return self.verdict in FAILED_VERDICTS


class Signals(Part):
    cherry_pick: Annotated[list[Label], Meta(max_length=MAX_EVIDENCE)] = field(default_factory=list)
    premise_similarity: Unit | None = None
    support_delta: float | None = None
    sample_disagreement: Unit | None = None


class Sampling(Part):
    # in (0, 1]: the chance this answer was picked for verification; 0 or more than 1 would weight it by nonsense
    rate: Annotated[float, Meta(gt=0, le=1)] = 1.0


def _labels(value: object, name: str, limit: int) -> dict[str, str]:
    """A versions or attributes map, checked here so a fault names its key."""
    if not isinstance(value, dict):
        raise Fault("wrong_type", name, f"expected an object, got {type(value).__name__}")
    if len(value) > limit:
        raise Fault(f"{name}.too_many", name, f"more than {limit} items; the limit is {limit}")
    for key, label in value.items():
        where = f"{name}.{key[:64]}"
        if len(key) > MAX_KEY_CHARS:
            raise Fault("too_long", where, f"key longer than {MAX_KEY_CHARS} characters, the limit")
        if not isinstance(label, str):
            raise Fault("wrong_type", where, f"expected a string, got {type(label).__name__}")
        if len(label) > MAX_LABEL_CHARS:
            raise Fault("too_long", where, f"string longer than {MAX_LABEL_CHARS} characters, the limit")
    return value


class VerdictEvent(Part, kw_only=True):
    schema_: Literal[SCHEMA] = field(name="schema")  # type: ignore[valid-type]
    event_id: Id
    trace_id: Id
    # RFC 3339 text on the wire, parsed by the contract's rule in __post_init__: an aware datetime once decoded.
    observed_at: str
    route: str
    tenant: Label | None = None
    query: Query = field(default_factory=Query)
    answer: Answer = field(default_factory=Answer)
    versions: dict = field(default_factory=dict)
    evidence: Annotated[list[Evidence], Meta(max_length=MAX_EVIDENCE)] = field(default_factory=list)
    claims: Annotated[list[Claim], Meta(max_length=MAX_CLAIMS)]
    first_failed_stage: Literal[STAGES] | None = None  # type: ignore[valid-type]
    signals: Signals = field(default_factory=Signals)
    attributes: dict = field(default_factory=dict)
    sampling: Sampling = field(default_factory=Sampling)

    def __post_init__(self) -> None:
        if isinstance(self.observed_at, datetime):  # built in code, or copied by msgspec.structs.replace
            return
        self.observed_at = _checked(parse_timestamp, self.observed_at, "observed_at")
        self.route = _checked(check_route, self.route, "route")
        self.versions = _labels(self.versions, "versions", MAX_VERSION_KEYS)
        self.attributes = _labels(self.attributes, "attributes", MAX_ATTRIBUTES)

    @property
    def failed_claims(self) -> list[Claim]:
        return [c for c in self.claims if c.failed]

    def to_json_dict(self) -> dict:
        """The event as contract JSON (canonical verdicts, schema key restored, no nulls)."""
        return _without_none(msgspec.to_builtins(self))


def _without_none(value):
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value
