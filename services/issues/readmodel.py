"""What the issue use cases return (list, show, members, map, and each triage change), defined once
(services/core/readmodel.py): the API answers with these; the CLI, the pages and the runbooks read the same fields."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.core.readmodel import Read


class ArchiveRead(Read):
    until: Literal["escalating", "duration", "claims"]
    since: str
    ends_at: str | None = Field(description="duration: when it wakes up")
    claims: int | None = Field(description="claims: how many more failing claims wake it up")
    text: str = Field(description="the condition in words, e.g. until escalating")


class IssueRead(Read):
    """One issue as the list shows it; every triage change answers with it."""

    issue_id: str
    name: str = Field(description="title: the most representative failing claim, phrased by its verdict")
    subtitle: str = Field(description="keywords · verdict · route · stage · versions the issue concentrates on")
    state: str
    count: int = Field(description="failing claims (members)")
    recent_count: int = Field(description="claims in the last 24 hours (event time)")
    escalating: bool = Field(description="last hour's claims >= 3x the mean of the 6 hours before (and >= 10)")
    drives_alerts: list[dict] = Field(description="firing alerts it drives: alert_id, route, claims")
    team: str = Field(description="the team of the [[owners]] rule its dominant route matches, else the default")
    owner: str = Field(description="the assignee, else the rule's owner, else the team")
    assignee: str
    archive: ArchiveRead | None = Field(description="set while archived (state archived)")
    ticket_url: str
    resolved_in: dict[str, str] = Field(description="resolved: the versions that will carry the fix")
    first_seen: str | None
    last_seen: str | None
    clustered_at: str = Field(description="when clustering last saw it")
    routes: list[str] = Field(description="most claims first")
    keywords: list[str]
    trend: list[int] = Field(description="claims per hour, last 24 hours, oldest first")
    triaged: bool
    config: str = Field(description="the clustering configuration that made it")
    merged_into: str | None
    runbook_url: str


class RouteFigureRead(Read):
    route: str
    members: int = Field(description="the issue's failing claims on this route")
    share: float = Field(description="of the issue's claims whose route is known")
    own: bool = Field(description="holds enough of them for its alerts to count")
    window_minutes: int
    window_end: str | None
    rate: float | None = Field(description="the route's rate over the window")
    lo: float | None
    hi: float | None
    claims: int
    expected: float | None = Field(description="what the drift detector expects of the route now")
    expected_source: str
    alert_id: str | None
    alert_severity: str | None
    alert_rate: float | None
    learning: bool


class SignalFiguresRead(Read):
    events: int
    carried: dict[str, int] = Field(description="signal -> events that carried it")
    means: dict[str, float | None]
    cherry_pick_share: float
    cherry_pick_chunks: list[str]


class HourRead(Read):
    hour: str
    count: int


class IssueDetailRead(IssueRead):
    exemplars: list[dict] = Field(
        description="members of distinct traces, no near-duplicate questions (what `promote "
        "propose` proposes; eval_item: already one): claim, question, trace_id, route, verdict"
    )
    exemplars_from: str = Field(description='an open alert\'s window on its suspect version, or "" (the whole issue)')
    exemplars_note: str = Field(description='why fewer representatives than asked for are shown, or ""')
    activity: list[dict] = Field(
        description="a page of its changes, notes and merges, newest first: at, event, by "
        "(claimwatch for its own), summary, details"
    )
    activity_total: int = Field(description="activity entries in all")
    activity_offset: int = Field(description="how many newer entries come before this page")
    split_from: str | None
    hourly: list[HourRead]
    verdicts: dict[str, int]
    verdicts_counted: int
    route_figures: list[RouteFigureRead] = Field(description="each route's rate beside what is expected of it")
    headline: RouteFigureRead | None = Field(description="the route the runbook's summary is about")
    severity: str
    alert_ids: list[str] = Field(description="open alerts on the issue's own routes")
    events: int
    traces: int = Field(description="distinct traces behind the members")
    first_failed_stage: str
    stages: dict[str, int]
    signals: SignalFiguresRead
    notes: list[str] = Field(description="where a figure covers less than every member")
    alerts: list[dict] = Field(
        description="alerts it has failing claims behind: alert_id, route, state, state_text, "
        "share (of the excess), contribution, failed, window"
    )
    merge_candidates: list[dict] = Field(
        description=(
            "issues likely the same failure: issue_id, name, similarity (centroids' cosine), links, shared_words, "
            "needed"
        )
    )


class IssueMemberRead(Read):
    claim_key: str = Field(description="event_id:claim_idx")
    probability: float
    source: str
    x: float
    y: float
    trace_id: str
    event_id: str
    route: str
    verdict: str
    text: str
    span: str
    observed_at: str
    question: str


class IssueMapPointRead(Read):
    x: float
    y: float
    issue_id: str
    member: bool = Field(description="true for this issue's members, false for neighbouring issues")
    text: str
    claim_key: str


class IssueNameRead(Read):
    issue_id: str
    name: str


class IssueMapRead(Read):
    issue_id: str
    issues: list[IssueNameRead]
    points: list[IssueMapPointRead]
