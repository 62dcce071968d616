"""Response shapes for OpenAPI; extra keys allowed (services may add fields; OpenAPI names those always there)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.api.triage_responses import Out, TriageDetail, TriageView


class Share(Out):
    rate: float | None
    lo: float | None
    hi: float | None
    count: int
    of: int


class AbstentionPair(Out):
    correct_abstention: Share
    over_refusal: Share


class WeightedTotals(Out):
    events: float
    claims: float
    failed: float


class RateEntry(Out):
    route: str
    events: int = Field(description="answers stored")
    claims: int = Field(description="non-trivial claims stored")
    failed: int
    rate: float | None = Field(description="the whole traffic's rate: failed / claims, each answer weighted by 1 / "
                               "its sampling.rate (so failed / claims when every answer is verified); null without claims")
    verdicts: dict[str, int]
    interval: list[float] | None = Field(description="95% interval [lo, hi] of rate, resampling answers")
    unsafe_serve: Share
    abstention: Share
    abstention_pair: AbstentionPair
    weighted: WeightedTotals = Field(description="the traffic the stored answers stand for (each 1 / sampling.rate)")
    effective_claims: float = Field(description="what the claims are worth as an unweighted sample (Kish)")
    sampling: Literal["none", "mixed", "all"] = Field(description="how many of the answers were sampled "
                                                      "(sampling.rate below 1): mixed means weighted and unweighted "
                                                      "answers share this slice")
    sampled_events: int


class RouteRate(RateEntry):
    expected: float | None = Field(description="the drift detector's time-of-day expectation for the route, as its "
                                   "alerts carry it; null while it has too little history (learning) or has not run")
    expected_basis: str = Field(description="what the expectation rests on, or why there is none yet")
    learning: bool = Field(description="under a day of history: no time-of-day profile yet")
    delta: float | None = Field(description="rate - expected")
    delta_lo: float | None = Field(description="the 95% interval's lower end - expected: the rise the data is sure of")
    firing_alerts: list[str] = Field(description="ids of the route's firing alerts")


class SliceEntry(RateEntry):
    dim: str
    value: str


class Health(Out):
    status: Literal["ok"]


class About(Out):
    store: str = Field(description="the store served: an absolute chdb path or a server's address, no credentials")


class Ready(Out):
    ready: bool
    reason: str | None = None


class IngestLag(Out):
    messages_behind: int | None = Field(description="messages on the verdicts topic the worker has yet to ingest "
                                        "(at least this many); null when the broker could not be read")
    threshold: int = Field(description="ingest.lag_warning_messages: beyond it, every page warns of stale figures")
    behind: bool
    error: str | None = None


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
    source: str = Field(description="the drift detector's expectation now (then key expectation is true), an alert or the window before")


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


class BaselineStatus(Out):
    learning: bool = Field(description="under a day of history: a local level and a wider test, no time-of-day profile yet")
    history_hours: float = Field(description="hours from the route's first stored minute to the end of the range")
    basis: str = Field(description="what the drift detector's expectation rests on, in words")


class RouteDetail(Out):
    route: str
    start: str
    end: str
    step_minutes: int
    totals: RateEntry
    current: RouteRate | RateEntry | None = Field(None, description=(
        "the last 30 minutes, as the overview's default window; beside the expectation unless `end` is given"))
    series: list[SeriesPoint]
    baseline: Baseline | None
    baseline_status: BaselineStatus
    alerts: list[AlertSpan]
    versions: list[VersionSeen] = Field(description="the 50 version values first seen last in the range, oldest first")
    versions_seen: int = Field(description="version values seen in the range in all")


# -- issues and the eval set ----------------------------------------------------


class IssueSummary(TriageView):
    issue_id: str
    name: str = Field(description="title: the most representative failing claim, phrased by its verdict")
    subtitle: str = Field("", description="keywords · verdict · route · stage · versions the issue concentrates on")
    state: str
    escalating: bool = Field(False, description="last hour's claims >= 3x the mean of the 6 hours before (and >= 10)")
    drives_alerts: list[dict] = Field(default_factory=list, description="firing alerts it drives: alert_id, route, claims")
    recent_count: int = Field(0, description="claims in the last 24 hours (event time)")
    count: int
    first_seen: str | None
    last_seen: str | None
    routes: list[str] | dict[str, int]
    keywords: list[str]
    trend: list[int] = Field(description="claims per hour, last 24 hours, oldest first")


class IssueDetail(IssueSummary, TriageDetail):
    exemplars: list[dict] = Field(description="members of distinct traces, no near-duplicate questions (what `promote "
                                  "propose` proposes; eval_item: already one): claim, question, trace_id, route, verdict")
    exemplars_from: str = Field("", description="an open alert's window on its suspect version, or \"\" (the whole issue)")
    history: list[dict]
    alerts: list[dict] = Field(default_factory=list, description="alerts it has failing claims behind: alert_id, "
                               "route, state, state_text, share (of the excess), contribution, failed, window")


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
    checked: list[str] = Field(description="each threshold met, with its 95% interval and items")


# -- traces ---------------------------------------------------------------------
class TraceChunkView(Out):
    chunk_id: str
    source_id: str | None
    version: str | None
    used: bool | None
    text: str | None


class TraceClaimView(Out):
    index: int
    claim_key: str = Field(description="event_id:index, as issue membership names the claim")
    text: str
    verdict: str
    failed: bool
    score: float | None
    span: str | None = Field(description="the evidence span the verifier quoted")
    chunk_id: str | None
    chunk: TraceChunkView | None = Field(description="the retrieved chunk named by chunk_id, when the event listed it")
    issue_ids: list[str] = Field(description="issues this claim was clustered into")


class TraceIssueView(Out):
    issue_id: str
    name: str
    state: str
    claims: int = Field(description="how many of the trace's claims belong to the issue")


class TraceEventView(Out):
    event_id: str
    observed_at: str
    route: str
    question: str
    answer: str
    action: str | None
    versions: dict[str, str]
    first_failed_stage: str | None = Field(description="null when the producer did not report one")
    claims: list[TraceClaimView] = Field(description="one page of the event's claims, from index claims_from")
    evidence: list[TraceChunkView]
    signals: dict
    attributes: dict[str, str]
    claim_count: int = Field(description="all of the event's claims")
    failed_claims: int = Field(description="of all its claims, those that failed")
    claims_from: int = Field(description="index of the first claim on this page")


class TraceDetail(TraceEventView):
    trace_id: str
    issues: list[TraceIssueView]
    earlier: list[TraceEventView] = Field(description="older events with the same trace_id, newest first")
    claims_page: int = Field(description="the page of each event's claims shown (from 1; 100 claims a page)")
    claims_pages: int = Field(description="pages of claims of the event with the most")
