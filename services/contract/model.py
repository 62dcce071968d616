"""Typed model of the verdict event contract, v1 (shared/contract/verdict-event-v1.md), as msgspec Structs.

msgspec checks types, lengths and ranges in C while it decodes. The contract's own rules (verdict aliases,
timestamps, routes, the versions and attributes maps) run in ``__post_init__`` and raise ``Fault``, which
names the rule and the field, so the decoder reports them as it reports any other fault."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta, Struct, field

SCHEMA = "claimwatch.verdict/v1"
# A batch envelope: {"schema": ENVELOPE_SCHEMA, "events": [event, ...]}, 1 to MAX_ENVELOPE_EVENTS events.
ENVELOPE_SCHEMA = "claimwatch.verdicts/v1"
# A record an intake refused before it could be an event (services/contract/decode.py: refused), sent on so the
# worker dead-letters it with the intake's rule: {"schema", "source", "rule", "path", "message", "route", "observed_at",
# "record"}.
REFUSED_SCHEMA = "claimwatch.refused/v1"
MAX_ENVELOPE_EVENTS = 1000

CANONICAL_VERDICTS = ("supported", "unsupported", "contradicted", "overreach", "stale", "no_source", "trivial")
# The failed verdicts, defined here once: in CANONICAL_VERDICTS' order (rates, the detector's driving verdict and
# the CLI list them so) and as a set. The store's SQL binds them; tests/unit/store/test_failed_verdicts.py checks
# that the migrations' views, which spell them out, list this set.
FAILED_VERDICT_ORDER = ("unsupported", "contradicted", "overreach", "stale", "no_source")
FAILED_VERDICTS = frozenset(FAILED_VERDICT_ORDER)
VERDICT_ALIASES = {
    **{v: v for v in CANONICAL_VERDICTS},
    "unlinked": "unsupported",
    "not_supported": "unsupported",
    "nei": "unsupported",
    "not_enough_info": "unsupported",
    "notenoughinfo": "unsupported",
    "neutral": "unsupported",
    "refuted": "contradicted",
    "contradiction": "contradicted",
    "entailed": "supported",
    "entailment": "supported",
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
MAX_KEY_CHARS = 64  # a versions or attributes key
MAX_LABEL_CHARS = 256  # a version, attribute value, tenant, claim/chunk/source id, labeler
MAX_TEXT_CHARS = 32_768  # question, answer, claim, span and chunk text
ROUTE_RE = re.compile(rf"[A-Za-z0-9._:/-]{{1,{MAX_ROUTE_CHARS}}}")
# RFC 3339 date-time; the offset group is checked separately to give a specific reason.
TIMESTAMP_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?P<offset>[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)?"
)


class Fault(ValueError):
    """A broken contract rule; ``field`` is relative to the struct that raised it ('' in a plain check)."""

    def __init__(self, rule: str, message: str, field: str = ""):
        super().__init__(message)
        self.rule, self.message, self.field = rule, message, field


def canonical_verdict(value: object) -> str:
    if not isinstance(value, str):
        raise Fault("wrong_type", "verdict must be a string")
    canonical = VERDICT_ALIASES.get(value.lower())
    if canonical is None:
        raise Fault("unknown_verdict", f"unknown verdict {value[:64]!r}")
    return canonical


def parse_timestamp(value: object) -> datetime:
    if not isinstance(value, str):
        raise Fault("wrong_type", "timestamp must be an RFC 3339 string")
    match = TIMESTAMP_RE.fullmatch(value)
    if match is None:
        raise Fault("bad_timestamp", f"not an RFC 3339 timestamp: {value[:64]!r}")
    if match["offset"] is None:
        raise Fault("timestamp_without_offset", f"timestamp {value[:64]!r} has no offset; add Z or +HH:MM")
    try:
        return datetime.fromisoformat(value[:-1] + "Z" if value.endswith("z") else value)
    except ValueError:
        raise Fault("bad_timestamp", f"not a valid date-time: {value[:64]!r}") from None


DOT_SEGMENTS = (".", "..")  # URLs resolve these away, so /routes/{route} would lead elsewhere


def check_route(value: str) -> str:
    if not ROUTE_RE.fullmatch(value):
        raise Fault("bad_route", f"route must be 1-128 chars of A-Z a-z 0-9 . _ : / -, got {value[:64]!r}")
    if value in DOT_SEGMENTS:
        raise Fault(
            "route.dot_segment",
            f"route {value!r} is a URL dot segment, which links drop; use a name with a letter or digit",
        )
    return value


_V = TypeVar("_V")
_R = TypeVar("_R")


def _checked(check: Callable[[_V], _R], value: _V, name: str) -> _R:
    try:
        return check(value)
    except Fault as exc:
        raise Fault(exc.rule, exc.message, name) from None


def _labels(value: object, name: str, limit: int) -> dict[str, str]:
    """A versions or attributes map, checked here so that a fault names its key."""
    if not isinstance(value, dict):
        raise Fault("wrong_type", f"expected an object, got {type(value).__name__}", name)
    if len(value) > limit:
        raise Fault(f"{name}.too_many", f"more than {limit} items; the limit is {limit}", name)
    for key, label in value.items():
        if len(key) > MAX_KEY_CHARS or not isinstance(label, str) or len(label) > MAX_LABEL_CHARS:
            _label_fault(name, key, label)
    return value


def _label_fault(name: str, key: str, label: object) -> None:
    """Raises the fault of a bad item; kept apart so that good items (every one, nearly) format no message."""
    where = f"{name}.{key[:MAX_KEY_CHARS]}"
    if len(key) > MAX_KEY_CHARS:
        raise Fault("too_long", f"key longer than {MAX_KEY_CHARS} characters, the limit", where)
    if not isinstance(label, str):
        raise Fault("wrong_type", f"expected a string, got {type(label).__name__}", where)
    raise Fault("too_long", f"string longer than {MAX_LABEL_CHARS} characters, the limit", where)


Id = Annotated[str, Meta(min_length=1, max_length=128)]
Label = Annotated[str, Meta(max_length=MAX_LABEL_CHARS)]
Text = Annotated[str, Meta(max_length=MAX_TEXT_CHARS)]
Unit = Annotated[float, Meta(ge=0, le=1)]
# A versions or attributes map. msgspec reads the bare dict, so any object decodes and __post_init__ checks it (a fault
# then names its key); type checkers see the str to str map every constructed event holds.
if TYPE_CHECKING:
    LabelMap = dict[str, str]
else:
    LabelMap = dict


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


class Evidence(Part, omit_defaults=True):  # its optional fields default to None: encoded JSON leaves the nulls out
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
        # a dict lookup for the common spellings; anything else takes the rule, which raises with its reason
        self.verdict = VERDICT_ALIASES.get(self.verdict) or _checked(canonical_verdict, self.verdict, "verdict")

    @property
    def failed(self) -> bool:
        return self.verdict in FAILED_VERDICTS


class Signals(Part, omit_defaults=True):  # encoded JSON leaves out nulls and an empty cherry_pick
    cherry_pick: Annotated[list[Label], Meta(max_length=MAX_EVIDENCE)] = field(default_factory=list)
    premise_similarity: Unit | None = None
    support_delta: float | None = None
    sample_disagreement: Unit | None = None


class Sampling(Part):
    # in (0, 1]: the chance this answer was picked for verification; 0 or more than 1 would weight it by nonsense
    rate: Annotated[float, Meta(gt=0, le=1)] = 1.0


class VerdictEvent(Part, kw_only=True):
    schema_: Literal[SCHEMA] = field(name="schema")  # type: ignore[valid-type]
    event_id: Id
    trace_id: Id
    # RFC 3339 text on the wire, parsed by the contract's rule in __post_init__: an aware datetime once decoded.
    # msgspec reads the str annotation; type checkers see the datetime every constructed event holds.
    if TYPE_CHECKING:
        observed_at: datetime
    else:
        observed_at: str
    route: str
    tenant: Label | None = None
    query: Query = field(default_factory=Query)
    answer: Answer = field(default_factory=Answer)
    versions: LabelMap = field(default_factory=dict)  # any object, checked in __post_init__ so a fault names its key
    evidence: Annotated[list[Evidence], Meta(max_length=MAX_EVIDENCE)] = field(default_factory=list)
    claims: Annotated[list[Claim], Meta(max_length=MAX_CLAIMS)]
    first_failed_stage: Literal[STAGES] | None = None  # type: ignore[valid-type]
    signals: Signals = field(default_factory=Signals)
    attributes: LabelMap = field(default_factory=dict)
    sampling: Sampling = field(default_factory=Sampling)

    def __post_init__(self) -> None:
        if isinstance(self.observed_at, datetime):  # checked already: copied by msgspec.structs.replace
            return
        self.observed_at = _checked(parse_timestamp, self.observed_at, "observed_at")
        self.route = _checked(check_route, self.route, "route")
        self.versions = _labels(self.versions, "versions", MAX_VERSION_KEYS)
        self.attributes = _labels(self.attributes, "attributes", MAX_ATTRIBUTES)

    @property
    def failed_claims(self) -> list[Claim]:
        return [c for c in self.claims if c.failed]

    def to_json_dict(self) -> dict[str, Any]:
        """The event as contract JSON (canonical verdicts, schema key restored, no nulls)."""
        return json_object(self)


def json_object(part: Part) -> dict[str, Any]:
    """A part as contract JSON: canonical values, no nulls (as its fields were given or defaulted)."""
    plain: dict[str, Any] = _without_none(msgspec.to_builtins(part))
    return plain


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value
