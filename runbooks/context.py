"""The one typed object a runbook is rendered from, and the rules that read it.

Everything here is plain data: the lead builds a ``RunbookContext`` from the
issue, rate, alert and claim tables; templates only read it. Text that came from
traces (questions, answers, claims, spans, issue names) is untrusted and is
escaped by the renderer, never here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from services.contract.model import FAILED_VERDICT_ORDER, FAILED_VERDICTS, STAGES

KINDS = (
    *FAILED_VERDICT_ORDER,  # one runbook kind per failed verdict
    "cherry_pick",
    "sycophancy",
    "evidence_admission",
    "unstable_generation",
)

# Signal thresholds for runbook_kind. Heuristics: an issue whose mean crosses one
# of these is explained by that mechanism better than by its verdict mix.
SAMPLE_DISAGREEMENT_HIGH = 0.4
CHERRY_PICK_SHARE_HIGH = 0.2
PREMISE_SIMILARITY_HIGH = 0.85
SUPPORT_DELTA_HIGH = 0.2


class ContextError(ValueError):
    """A runbook context field holds a bad value; the message names the field."""


@dataclass(frozen=True)
class IssueInfo:
    issue_id: str
    name: str
    state: str
    severity: str
    first_seen: datetime
    last_seen: datetime
    count: int  # failing claims in the issue
    hourly_trend: tuple[int, ...] = ()  # failing claims per hour, oldest first


@dataclass(frozen=True)
class Summary:
    """Claim-level hallucination rate of the affected traffic, with its 95% interval."""

    rate: float | None  # None: no route attributed yet, or no checkable claims in the window
    lo: float | None
    hi: float | None
    expected: float | None  # what the drift detector expects of the route now
    claims: int  # checkable claims behind the rate
    breakdown: Mapping[str, int] = field(default_factory=dict)  # verdict -> failing claims
    route: str = ""  # the route the rate is of ("" = the affected traffic)
    window_minutes: int | None = None  # the rate is the route's current rate over this window
    expected_source: str = ""  # where the expectation comes from, or why there is none
    alert_rate: float | None = None  # the rate the route's alert recorded
    counted: int | None = None  # members behind the breakdown, when fewer than the issue's

    @property
    def verdicts(self) -> list[tuple[str, int, float]]:
        """(verdict, count, share of failed claims), largest first."""
        failed = {v: n for v, n in self.breakdown.items() if v in FAILED_VERDICTS and n > 0}
        total = sum(failed.values()) or 1
        return [(v, n, n / total) for v, n in sorted(failed.items(), key=lambda kv: (-kv[1], kv[0]))]

    @property
    def dominant_verdict(self) -> str | None:
        verdicts = self.verdicts
        return verdicts[0][0] if verdicts else None


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    what: str


@dataclass(frozen=True)
class RouteImpact:
    route: str
    rate: float | None  # None: no checkable claims on the route in the window
    lo: float | None
    hi: float | None
    failing_claims: int
    expected: float | None = None  # what the drift detector expects of this route now
    expected_source: str = ""
    own: bool = True  # False: under 10% of the issue's claims; its alerts do not count
    learning: bool = False  # the expectation is a recent level: under a day of history


@dataclass(frozen=True)
class SuspectChange:
    """A versions key whose value changed around the onset: its share of the answers and its rate on each side
    (a value whose share fell is the one the change replaced)."""

    key: str
    value: str
    kind: Literal["system", "evidence"]
    rate_before: float | None
    rate_after: float | None
    share_before: float | None = None
    share_after: float | None = None


@dataclass(frozen=True)
class TraceExample:
    trace_id: str
    event_id: str
    route: str
    question: str
    answer_excerpt: str
    failing_claim: str
    evidence_span: str
    verdict: str
    source_versions: Mapping[str, str] = field(default_factory=dict)  # source_id -> version
    eval_item: str = ""  # the eval item it already is ("": not proposed yet)


@dataclass(frozen=True)
class IssueSignals:
    """The issue's events' signals, aggregated: share with a cherry-pick, means of the rest."""

    cherry_pick_share: float = 0.0
    cherry_pick_chunks: tuple[str, ...] = ()
    premise_similarity: float | None = None
    support_delta: float | None = None
    sample_disagreement: float | None = None
    events: int = 0  # the issue's events the signals were read from
    carried: Mapping[str, int] = field(default_factory=dict)  # signal -> events that carried it


@dataclass(frozen=True)
class NextAction:
    stage: str
    headline: str
    checklist: tuple[str, ...]


NEXT_ACTIONS = {
    "evidence_admission": NextAction(
        "evidence_admission",
        "Fix retrieval, permissions or freshness, not the prompt.",
        (
            "Run the failing questions through the retriever alone: is the source that answers them in the top k?",
            "Check access filters and permissions on the sources these questions need.",
            "Check index freshness: compare the corpus version in the traces with the latest published one.",
            "Leave the prompt alone until evidence admission passes; prompt edits cannot fix missing evidence.",
        ),
    ),
    "claim_generation": NextAction(
        "claim_generation",
        "Tighten generation and the claim gate.",
        (
            "Read each failing claim beside its evidence span in the traces below.",
            "Check the model and prompt changes listed under suspect changes against the onset.",
            "Tighten the claim gate on the affected routes: block or revise claims with these verdicts.",
            "Promote the traces into the eval set so the CI gate catches a return.",
        ),
    ),
    "generation_stability": NextAction(
        "generation_stability",
        "Look at decoding or prompt stability; this is not a source failure.",
        (
            "Check decoding settings (temperature, top_p, seed) and model changes around the onset.",
            "Re-sample the failing questions several times and compare the answers.",
            "Look for ambiguous or conflicting instructions in the prompt.",
            "Do not reindex or change retrieval for this issue: the evidence is not the cause.",
        ),
    ),
}
UNKNOWN_STAGE_ACTION = NextAction(
    "unknown",
    "The verifier reported no failed stage: start from the verdict breakdown and the suspect changes.",
    (
        "Read the failing claims beside their evidence spans in the traces below.",
        "Check the suspect changes against the onset in the timeline.",
        "Ask the verifier owners to report first_failed_stage for this route.",
    ),
)


@dataclass(frozen=True)
class RunbookContext:
    issue: IssueInfo
    summary: Summary
    timeline: tuple[TimelineEntry, ...]
    routes: tuple[RouteImpact, ...]
    suspect_changes: tuple[SuspectChange, ...]
    traces: tuple[TraceExample, ...]
    first_failed_stage: str  # one of STAGES, or "" when unknown
    signals: IssueSignals = field(default_factory=IssueSignals)
    alert_id: str | None = None
    base_url: str = "http://127.0.0.1:8080"
    trace_total: int | None = None  # distinct traces behind the issue's members, when known
    traces_from: str = ""  # the alert window the traces were picked from ("" = the whole issue)
    cli: str = "claimwatch"  # how the reader runs claimwatch (services/core/command.py)
    notes: tuple[TimelineEntry, ...] = ()  # the latest notes people left on the issue, newest first

    def __post_init__(self) -> None:
        if self.first_failed_stage not in (*STAGES, ""):
            raise ContextError(f"first_failed_stage must be one of {STAGES} or empty, got {self.first_failed_stage!r}")
        for name in ("timeline", "routes", "suspect_changes", "traces"):
            if not isinstance(getattr(self, name), tuple):
                raise ContextError(f"{name} must be a tuple (the context is immutable)")
        if not self.issue.issue_id:
            raise ContextError("issue.issue_id must not be empty")

    @property
    def next_action(self) -> NextAction:
        return NEXT_ACTIONS.get(self.first_failed_stage, UNKNOWN_STAGE_ACTION)

    @property
    def kind(self) -> str:
        return runbook_kind(self)


@dataclass(frozen=True)
class SloFacts:
    """What an SLO burn alert's runbook says of its SLO, in words (runbooks/alerts.py: slo_facts, from the SLO's
    report: services/alerts/oncall/slos.py)."""

    name: str
    promise: str  # "95.0% of claims good over 28d"
    routes: str  # the glob
    budget: str  # "106.2% of the budget spent (95% interval ...): overspent by 6.2%"
    burns: tuple[str, ...]  # "1h  5.0x", "3d  — too little history: 8h of 3d"
    top_routes: tuple[str, ...]  # "billing-faq: 80.0% of the budget (412 of 9,600 claims)"
    top_issues: tuple[tuple[str | None, str, str], ...]  # (issue id or None, its name, its share of the budget)
    drift: tuple[tuple[str, str], ...]  # (alert id, "hallucination_rate_rise on billing-faq, firing since ...")


@dataclass(frozen=True)
class AlertRunbookContext:
    """What the runbook of an alert on the monitor's own input reads (route_silent, events_rejected,
    abstention_rise): the alert, its figures already in words (runbooks/alerts.py builds it).
    ``route`` and ``details`` come from producers' events and are untrusted, like trace text."""

    alert_id: str
    route: str
    kind: str  # picks the template: <kind>.md.j2
    severity: str
    window: int  # minutes behind the figures
    onset: datetime | None
    rate: str  # in the alert's unit: "0.4/min", "35.0%"
    expected: str
    change: str  # signed: "-40.8/min", "+34.0 pts"
    count: int  # what the window held …
    counted: str  # … of what: events, answers
    expected_basis: str
    details: Mapping[str, object] = field(default_factory=dict)  # received, top_rule, sample_reason, …
    served: str = ""  # abstention_rise: the served share, now and before
    hallucination: str = ""  # … what the hallucination rate did meanwhile
    gaming: bool = False  # … it fell: said plainly
    refused: str = ""  # route_cardinality: what the route bound refused, and from whom
    also_from: tuple[str, ...] = ()  # … the other producers sending refused routes
    dlq_command: str = ""  # the command listing the route's dead letters, shell-quoted
    slo: SloFacts | None = None  # slo_burn: its SLO's budget, burns and spenders
    base_url: str = "http://127.0.0.1:8080"
    cli: str = "claimwatch"  # how the reader runs claimwatch (services/core/command.py)


def runbook_kind(ctx: RunbookContext) -> str:
    """Pick the failure kind, most specific mechanism first.

    Precedence (first match wins):
      1. unstable_generation  first failed stage is generation_stability, or mean
                              sample_disagreement >= 0.4: when samples disagree, the
                              verdict mix is a symptom of sampling, so read nothing else.
      2. cherry_pick          >= 20% of the issue's events have a non-empty
                              signals.cherry_pick: the contradicting evidence was retrieved
                              and ignored.
      3. sycophancy           mean premise_similarity >= 0.85 or mean support_delta >= 0.2:
                              the answer leans on the question, not on the evidence.
      4. stale / no_source    the dominant failed verdict names the evidence fault exactly.
      5. evidence_admission   first failed stage is evidence_admission (nothing relevant
                              was retrieved), whatever the verdicts.
      6. contradicted / overreach / unsupported   the dominant failed verdict.
      7. unsupported          fallback when no failed verdict is recorded.
    """
    signals, stage = ctx.signals, ctx.first_failed_stage
    dominant = ctx.summary.dominant_verdict
    if stage == "generation_stability" or _at_least(signals.sample_disagreement, SAMPLE_DISAGREEMENT_HIGH):
        return "unstable_generation"
    if signals.cherry_pick_share >= CHERRY_PICK_SHARE_HIGH:
        return "cherry_pick"
    if _at_least(signals.premise_similarity, PREMISE_SIMILARITY_HIGH) or _at_least(
        signals.support_delta, SUPPORT_DELTA_HIGH
    ):
        return "sycophancy"
    if dominant in ("stale", "no_source"):
        return dominant
    if stage == "evidence_admission":
        return "evidence_admission"
    if dominant in ("contradicted", "overreach", "unsupported"):
        return dominant
    return "unsupported"


def _at_least(value: float | None, threshold: float) -> bool:
    return value is not None and value >= threshold
