"""Typed model of the verdict event contract, v1 (shared/contract/verdict-event-v1.md)."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

SCHEMA = "claimwatch.verdict/v1"
# A batch envelope: {"schema": ENVELOPE_SCHEMA, "events": [event, ...]}, 1 to MAX_ENVELOPE_EVENTS events.
ENVELOPE_SCHEMA = "claimwatch.verdicts/v1"
MAX_ENVELOPE_EVENTS = 1000

CANONICAL_VERDICTS = ("supported", "unsupported", "contradicted", "overreach", "stale", "no_source", "trivial")
FAILED_VERDICTS = frozenset({"unsupported", "contradicted", "overreach", "stale", "no_source"})
VERDICT_ALIASES = {
    **{v: v for v in CANONICAL_VERDICTS},
    "unlinked": "unsupported", "not_supported": "unsupported", "nei": "unsupported",
    "not_enough_info": "unsupported", "notenoughinfo": "unsupported", "neutral": "unsupported",
    "refuted": "contradicted", "contradiction": "contradicted",
    "entailed": "supported", "entailment": "supported",
}
QUERY_TYPES = ("lookup", "multi_hop", "aggregation", "unanswerable", "ambiguous", "other")
STAKES = ("low", "medium", "high")
ACTIONS = ("served", "abstained", "revised", "blocked", "review")
CLAIM_TYPES = ("existence", "attribute", "numeric", "relation", "qualifier", "action", "other")
STAGES = ("passed", "evidence_admission", "claim_generation", "generation_stability")

MAX_ROUTE_CHARS = 128
# Shape bounds: every versions key becomes a slice of every rate query and page, and every claim a row of its
# trace page, so one hostile event could otherwise multiply the cost of reading the whole store. Each bound
# is a dead-letter rule: "<field>.too_many" for items, "too_long" for strings.
MAX_VERSION_KEYS = 16
MAX_ATTRIBUTES = 32
MAX_CLAIMS = 500
MAX_EVIDENCE = 500
MAX_KEY_CHARS = 64        # a versions or attributes key
MAX_LABEL_CHARS = 256     # a version, attribute value, tenant, claim/chunk/source id, labeler
MAX_TEXT_CHARS = 32_768   # question, answer, claim, span and chunk text
ROUTE_RE = re.compile(rf"[A-Za-z0-9._:/-]{{1,{MAX_ROUTE_CHARS}}}")
# RFC 3339 date-time; the offset group is checked separately to give a specific reason.
TIMESTAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?P<offset>[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)?")


def canonical_verdict(value: object) -> str:
    if not isinstance(value, str):
        raise PydanticCustomError("wrong_type", "verdict must be a string")
    canonical = VERDICT_ALIASES.get(value.lower())
    if canonical is None:
        raise PydanticCustomError("unknown_verdict", "unknown verdict {verdict}", {"verdict": repr(value[:64])})
    return canonical


def parse_timestamp(value: object) -> datetime:
    if not isinstance(value, str):
        raise PydanticCustomError("wrong_type", "timestamp must be an RFC 3339 string")
    match = TIMESTAMP_RE.fullmatch(value)
    if match is None:
        raise PydanticCustomError("bad_timestamp", "not an RFC 3339 timestamp: {value}", {"value": repr(value[:64])})
    if match["offset"] is None:
        raise PydanticCustomError(
            "timestamp_without_offset", "timestamp {value} has no offset; add Z or +HH:MM", {"value": repr(value[:64])}
        )
    try:
        return datetime.fromisoformat(value[:-1] + "Z" if value.endswith("z") else value)
    except ValueError:
        raise PydanticCustomError("bad_timestamp", "not a valid date-time: {value}", {"value": repr(value[:64])}) from None


DOT_SEGMENTS = (".", "..")  # URLs resolve these away, so /routes/{route} would lead elsewhere


def check_route(value: str) -> str:
    if not ROUTE_RE.fullmatch(value):
        raise PydanticCustomError(
            "bad_route", "route must be 1-128 chars of A-Z a-z 0-9 . _ : / -, got {route}", {"route": repr(value[:64])}
        )
    if value in DOT_SEGMENTS:
        raise PydanticCustomError(
            "route.dot_segment",
            "route {route} is a URL dot segment, which links drop; use a name with a letter or digit", {"route": repr(value)})
    return value


Verdict = Annotated[str, BeforeValidator(canonical_verdict)]
Timestamp = Annotated[datetime, BeforeValidator(parse_timestamp)]
Route = Annotated[str, AfterValidator(check_route)]
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

    @property
    def failed(self) -> bool:
        return self.verdict in FAILED_VERDICTS


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

    @property
    def failed_claims(self) -> list[Claim]:
        return [c for c in self.claims if c.failed]

    def to_json_dict(self) -> dict:
        """The event as contract JSON (canonical verdicts, schema key restored)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
