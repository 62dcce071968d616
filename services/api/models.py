"""Request bodies (extra fields refused, so typos surface as 422s naming the field) and error shapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from fastapi import Path
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from services.alerts.lifecycle.silences import parse_duration
from services.contract.model import ACTIONS, CANONICAL_VERDICTS, CLAIM_TYPES, VERDICT_ALIASES
from services.evalset.runs import MAX_ANSWERS

MAX_ID_CHARS = 200  # an id in an API path: alert, issue, eval item, trace (the contract's ids are at most 128)


def path_id():
    """An id in a URL path: a longer one names nothing, so it is refused (422, naming the limit), not echoed."""
    return Path(max_length=MAX_ID_CHARS)


def who():
    return Field(
        None,
        min_length=1,
        max_length=200,
        pattern=r"\S",
        description="who does this (a name or handle); with a named token, its holder, and may be left out",
    )


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AckBody(Body):
    by: str | None = who()
    note: str = Field("", max_length=2000)


class WithDuration(Body):
    """A body whose ``duration`` is text such as 2h or 1h30m (services.alerts.lifecycle.silences.parse_duration)."""

    @field_validator("duration", check_fields=False)
    @classmethod
    def _bounded_duration(cls, duration: str | None) -> str | None:
        if duration is not None:
            parse_duration(duration)  # refuses bad text and lengths over MAX_SILENCE, naming the limit
        return duration


class SilencePreviewBody(Body):
    matchers: list[str] = Field(min_length=1, max_length=20, description="e.g. route=billing-faq, severity=~warn.*")

    @field_validator("matchers")
    @classmethod
    def _short_matchers(cls, matchers: list[str]) -> list[str]:
        for i, m in enumerate(matchers):
            if len(m) > 500:
                raise ValueError(f"matchers[{i}] is {len(m)} characters; keep each under 500")
        return matchers


class SilenceBody(WithDuration, SilencePreviewBody):
    by: str | None = who()
    comment: str = Field(min_length=1, max_length=2000, pattern=r"\S", description="why")
    duration: str | None = Field(
        None, max_length=32, description="e.g. 2h or 1h30m, at most 366d; give this or ends_at"
    )
    ends_at: AwareDatetime | None = Field(None, description="RFC 3339 end time, within 366 days")


class UnsilenceBody(Body):
    by: str | None = who()


class ResolveBody(Body):
    by: str | None = who()
    in_next_version: bool = Field(
        False,
        description="regress only on a corpus, model or prompt version other than "
        "those current on the issue's dominant route now",
    )


class ByBody(Body):
    by: str | None = who()


class AssignBody(Body):
    assignee: str = Field(min_length=1, max_length=200, pattern=r"\S", description="who works the issue")
    by: str | None = who()


class ArchiveBody(WithDuration):
    by: str | None = who()
    duration: str | None = Field(
        None, max_length=32, description="archive for this long (e.g. 8h, 7d); or claims; neither: until it escalates"
    )
    claims: int | None = Field(None, ge=1, le=10_000_000, description="archive until this many more failing claims")


class NoteBody(Body):
    text: str = Field(min_length=1, max_length=4000, pattern=r"\S")
    by: str | None = who()


class LinkBody(Body):
    url: str = Field(min_length=1, max_length=2000, description="the ticket's http(s) URL")
    by: str | None = who()


class MergeBody(Body):
    into: str = Field(min_length=1, max_length=200, description="the issue that absorbs this one")
    by: str | None = who()


class ProposeBody(Body):
    issue_id: str = Field(min_length=1, max_length=200)
    trace_ids: list[str] | None = Field(
        None, max_length=100, description="traces to promote; omitted: the issue's exemplars"
    )
    by: str | None = who()

    @field_validator("trace_ids")
    @classmethod
    def _sane_ids(cls, ids: list[str] | None) -> list[str] | None:
        for i, t in enumerate(ids or ()):
            if not 1 <= len(t) <= 128:
                raise ValueError(f"trace_ids[{i}] must be 1-128 characters")
        return ids


class ReviewBody(Body):
    by: str | None = who()
    reason: str = Field("", max_length=2000)


class RejectBody(Body):
    by: str | None = who()
    reason: str = Field(min_length=1, max_length=2000, pattern=r"\S", description="why it does not belong")


class Problem(BaseModel):
    detail: str = Field(description="what is wrong, in one sentence")
    field: str | None = Field(None, description="for malformed input: where the first problem is, e.g. body.by")


# FastAPI's type for a route's `responses`: status code to OpenAPI response fields.
Responses = dict[int | str, dict[str, Any]]

ERROR_RESPONSES: Responses = {
    404: {"model": Problem, "description": "Nothing has that id"},
    422: {"model": Problem, "description": "The input is malformed; detail names the field"},
}
# For endpoints whose success is not JSON (text, Markdown, HTML): their errors still are.
PROBLEM_JSON = {
    "application/json": {"schema": {"type": "object", "required": ["detail"], "properties": {"detail": {}}}}
}
TEXT_ERROR_RESPONSES: Responses = {
    404: {"description": "Nothing has that id", "content": PROBLEM_JSON},
    422: {"description": "The input is malformed; detail names the field", "content": PROBLEM_JSON},
}


LOCATIONS = {"body", "query", "path", "header", "cookie"}


def error_location(error: Mapping) -> str:
    """Where one validation error is, dotted: ``body.by``, ``query.state``; just ``body`` for a body that is not
    JSON."""
    loc = [str(p) for p in error.get("loc") or ()]
    return "body" if error.get("type") == "json_invalid" else ".".join(loc) or "input"


def _sentence(error: Mapping) -> str:
    kind, ctx = error.get("type", ""), error.get("ctx") or {}
    if kind == "json_invalid":
        return "the body is not valid JSON; send a JSON object"
    loc = [str(p) for p in error.get("loc") or ()]
    field = ".".join(loc[1:] if loc and loc[0] in LOCATIONS else loc) or (loc[0] if loc else "input")
    if kind == "missing":
        complaint = "is required"
    elif kind == "extra_forbidden":
        complaint = "is not a field this endpoint takes"
    elif kind == "string_too_short" and ctx.get("min_length") == 1:
        complaint = "must not be empty"
    elif kind == "string_pattern_mismatch" and ctx.get("pattern") == r"\S":
        complaint = "must not be blank"
    elif kind in ("literal_error", "enum") and "expected" in ctx:
        complaint = f"must be {ctx['expected']}"
    else:
        message = str(error.get("msg", "is malformed")).removeprefix("Value error, ")
        complaint = message[:1].lower() + message[1:]
    return f"{field}: {complaint}"


def plain_errors(errors: Sequence[Mapping]) -> str:
    """Validation errors (pydantic's, as FastAPI reports them) as one sentence naming each field:
    ``by: must not be empty; surprise: is not a field this endpoint takes``."""
    return "; ".join(_sentence(e) for e in errors) or "the input is malformed"


class ReviewerBody(Body):
    reviewer: str | None = who()


class LabelBody(Body):
    reviewer: str | None = who()
    label: str = Field(
        min_length=1, max_length=32, description="supported, contradicted, unsupported, overreach or stale"
    )
    span: str = Field("", max_length=4000, description="quoted verbatim from one of the claim's evidence chunks")


class AdjudicateBody(Body):
    adjudicator: str | None = who()
    label: str = Field(
        min_length=1, max_length=32, description="supported, contradicted, unsupported, overreach or stale"
    )
    span: str = Field("", max_length=4000, description="quoted verbatim from one of the claim's evidence chunks")


class SampleBody(Body):
    window: str = Field("24h", max_length=16, description="event-time window to sample from, e.g. 24h, or all")
    seed: int = Field(0, ge=0, le=2**32 - 1)
    include_eval: bool = Field(False, description="also queue the claims of approved eval items")


class RunClaimBody(Body):
    verdict: str = Field(min_length=1, max_length=40, description="the contract's vocabulary, or an alias")
    text: str = Field("", max_length=4000)
    claim_type: str = Field("other", description=f"one of {', '.join(CLAIM_TYPES)}")
    span: str = Field("", max_length=4000, description="the evidence text the verdict rests on")
    source_id: str = Field("", max_length=200)

    @field_validator("verdict")
    @classmethod
    def _verdict(cls, value: str) -> str:
        canonical = VERDICT_ALIASES.get(value.lower())
        if canonical is None:
            raise ValueError(f"unknown verdict {value[:40]!r}; use one of {', '.join(CANONICAL_VERDICTS)}")
        return canonical

    @field_validator("claim_type")
    @classmethod
    def _claim_type(cls, value: str) -> str:
        if value not in CLAIM_TYPES:
            raise ValueError(f"unknown claim type {value[:40]!r}; use one of {', '.join(CLAIM_TYPES)}")
        return value


class RunAnswerBody(Body):
    item_id: str = Field(min_length=1, max_length=128)
    action: Literal[ACTIONS] = "served"  # type: ignore[valid-type]
    answer: str = Field("", max_length=20_000, description="the answer's text")
    claims: list[RunClaimBody] = Field(default=[], max_length=200)


class RecordRunBody(Body):
    versions: dict[str, str] = Field(
        default={}, max_length=32, description="what answered: model, prompt, retriever, ... as in events"
    )
    labeler: str = Field(min_length=1, max_length=200, description="verifier:NAME[@VERSION] or human:ID")
    answers: list[RunAnswerBody] = Field(min_length=1, max_length=MAX_ANSWERS)
