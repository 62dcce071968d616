"""Request bodies (extra fields refused, so typos surface as 422s naming the field) and response shapes.

Response models allow extra keys: the services may add fields, and OpenAPI still
describes every field that is always there.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from services.alerts.silences import parse_duration

MAX_SILENCE = timedelta(days=366)


def who():
    return Field(min_length=1, max_length=200, pattern=r"\S", description="who does this (a name or handle)")


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AckBody(Body):
    by: str = who()
    note: str = Field("", max_length=2000)


class SilenceBody(Body):
    matchers: list[str] = Field(min_length=1, max_length=20, description="e.g. route=billing-faq, severity=~warn.*")
    by: str = who()
    comment: str = Field(min_length=1, max_length=2000, pattern=r"\S", description="why")
    duration: str | None = Field(None, max_length=32, description="e.g. 2h or 1h30m, at most 366d; give this or ends_at")
    ends_at: AwareDatetime | None = Field(None, description="RFC 3339 end time, within 366 days")

    @field_validator("matchers")
    @classmethod
    def _short_matchers(cls, matchers: list[str]) -> list[str]:
        for i, m in enumerate(matchers):
            if len(m) > 500:
                raise ValueError(f"matchers[{i}] is {len(m)} characters; keep each under 500")
        return matchers

    @field_validator("duration")
    @classmethod
    def _bounded_duration(cls, duration: str | None) -> str | None:
        if duration is not None:
            try:
                length = parse_duration(duration)
            except OverflowError:
                length = MAX_SILENCE * 2
            if length > MAX_SILENCE:
                raise ValueError(f"duration {duration!r} is longer than 366 days; silence for less and renew it")
        return duration


class ResolveBody(Body):
    by: str = who()


class MergeBody(Body):
    into: str = Field(min_length=1, max_length=200, description="the issue that absorbs this one")
    by: str = who()


class ProposeBody(Body):
    issue_id: str = Field(min_length=1, max_length=200)
    trace_ids: list[str] | None = Field(None, max_length=100,
                                        description="traces to promote; omitted: the issue's exemplars")
    by: str = who()

    @field_validator("trace_ids")
    @classmethod
    def _sane_ids(cls, ids: list[str] | None) -> list[str] | None:
        for i, t in enumerate(ids or ()):
            if not 1 <= len(t) <= 128:
                raise ValueError(f"trace_ids[{i}] must be 1-128 characters")
        return ids


class ReviewBody(Body):
    by: str = who()
    reason: str = Field("", max_length=2000)


class RejectBody(Body):
    by: str = who()
    reason: str = Field(min_length=1, max_length=2000, pattern=r"\S", description="why it does not belong")


# -- responses ----------------------------------------------------------------
class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class Share(Out):
    rate: float | None
    lo: float | None
    hi: float | None
    count: int
    of: int


class AbstentionPair(Out):
    correct_abstention: Share
    over_refusal: Share


class RateEntry(Out):
    route: str
    events: int
    claims: int = Field(description="non-trivial claims")
    failed: int
    rate: float | None = Field(description="failed / claims; null without claims")
    verdicts: dict[str, int]
    interval: list[float] | None = Field(description="95% interval [lo, hi], resampling answers")
    unsafe_serve: Share
    abstention: Share
    abstention_pair: AbstentionPair


class SliceEntry(RateEntry):
    dim: str
    value: str


class AlertView(Out):
    alert_id: str
    route: str
    kind: str
    severity: str
    labels: dict[str, str]
    window: int | None
    pending_since: str | None
    starts_at: str | None
    ends_at: str | None
    acked_at: str | None
    acked_by: str | None
    ack_note: str | None
    rate: float | None
    rate_interval: list[float] | None
    baseline: float | None
    baseline_interval: list[float] | None
    delta: float | None
    claims: int
    onset: str | None
    driving_verdict: str | None
    suspect_changes: list[dict]
    state: Literal["pending", "firing", "resolved"]
    acked: bool
    silenced_by: list[str]


class AlertDetail(AlertView):
    transitions: list[dict]


class SilenceView(Out):
    silence_id: str
    matchers: list[str]
    starts_at: str
    ends_at: str
    created_by: str
    comment: str


class SilenceListed(SilenceView):
    active: bool


class DlqSample(Out):
    reason: str
    source: str = Field(description="topic/partition/offset")
    size: int


class DlqReason(Out):
    reason: str = Field(description="the contract rule that was broken")
    count: int
    samples: list[DlqSample]


class Health(Out):
    status: Literal["ok"]


class Ready(Out):
    ready: bool
    reason: str | None = None


class SeriesPoint(Out):
    minute: str = Field(description="start of the bucket, UTC ISO 8601")
    events: int
    claims: int
    failed: int
    rate: float | None
    lo: float | None
    hi: float | None


class Baseline(Out):
    rate: float | None
    interval: list[float] | None
    source: str = Field(description="where the baseline comes from: an alert id or the preceding window")


class AlertSpan(Out):
    alert_id: str
    state: str
    severity: str
    start: str = Field(description="pending_since")
    firing_at: str | None
    end: str | None


class VersionSeen(Out):
    key: str = Field(description="versions key, e.g. model")
    value: str
    first_seen: str
    last_seen: str
    events: int


class RouteDetail(Out):
    route: str
    start: str
    end: str
    step_minutes: int
    totals: RateEntry
    series: list[SeriesPoint]
    baseline: Baseline | None
    alerts: list[AlertSpan]
    versions: list[VersionSeen]


class Problem(BaseModel):
    detail: str | list[dict]


# -- issues and the eval set --------------------------------------------------
class IssueSummary(Out):
    issue_id: str
    name: str
    state: str
    count: int
    first_seen: str | None
    last_seen: str | None
    routes: list[str] | dict[str, int]
    keywords: list[str]
    trend: list[int] = Field(description="claims per hour, last 24 hours, oldest first")


class IssueDetail(IssueSummary):
    exemplars: list[dict] = Field(description="typical members: claim text, question, trace_id, route, verdict")
    history: list[dict]


class IssueMember(Out):
    claim_key: str = Field(description="event_id:claim_idx")
    probability: float
    trace_id: str
    route: str
    verdict: str
    text: str


class IssueMapPoint(Out):
    x: float
    y: float
    issue_id: str
    member: bool = Field(description="true for this issue's members, false for neighbouring issues")
    text: str


class IssueMap(Out):
    points: list[IssueMapPoint]


class EvalItemView(Out):
    item_id: str
    state: Literal["proposed", "approved", "rejected"]
    query: str
    origin_issue_id: str
    origin_trace_id: str
    origin_route: str
    proposed_by: str
    reviewed_by: str


class EvalReportView(Out):
    faithfulness: dict
    slices: list[dict] = Field(description="worst first")
    abstention: dict = Field(description="correct abstention and over-refusal, reported together")
    items: int
    agreement: dict | None


class AgreementView(Out):
    pairs: int = Field(description="claims with both a verifier and a human label")


class GateResult(Out):
    passed: bool
    failures: list


ERROR_RESPONSES = {
    404: {"model": Problem, "description": "Nothing has that id"},
    422: {"model": Problem, "description": "The input is malformed; detail names the field"},
}
# For endpoints whose success is not JSON (text, Markdown, HTML): their errors still are.
PROBLEM_JSON = {"application/json": {"schema": {"type": "object", "required": ["detail"],
                                                "properties": {"detail": {}}}}}
TEXT_ERROR_RESPONSES = {
    404: {"description": "Nothing has that id", "content": PROBLEM_JSON},
    422: {"description": "The input is malformed; detail names the field", "content": PROBLEM_JSON},
}
