"""An alert explains itself: how much of the route's excess failing claims each issue accounts for.

Window W = [start, end] in whole minutes of event time: ``start`` is the alert's estimated onset (or,
without one, ``window`` minutes before it became active), ``end`` is when it resolved, or now.

  N, F     claims and failing claims on the route in W (minute buckets of rate_minute)
  b        the rate the alert expected (its time-of-day expectation; its baseline for an alert stored
           before expectations existed; the route's own rate over the baseline period B when it has neither)
  excess   E = F - b*N: the failing claims beyond what the baseline predicts

Issue i has c_i failing claims on the route in W (its members, by the members' event time). The
baseline's b*N expected failures are split by each issue's share of the route's failing claims in the
baseline period B = [start - baseline_minutes, start): s_i = c_i(B) / F(B). So

  contribution_i = c_i - b*N*s_i
  unclustered    = (F - sum c_i) - b*N*(1 - sum s_i)

and sum(contribution_i) + unclustered = F - b*N = E exactly; an issue's share is contribution_i / E
(shares add up to 1). An issue that failed at the same rate before the alert contributes about
nothing; a new one contributes all its claims; one that shrank contributes a negative amount. Without
failing claims in B the expected failures are split by the shares of W instead (s_i = c_i / F).

With sampled verification (sampling.rate < 1), N, F and c_i are the verified claims, while the alert's b is a
rate of the whole traffic (weighted). b is first brought to the verified sample's scale, b * (F/N) / (F_w/N_w)
with the window's weighted sums F_w, N_w, so that E / F is the traffic's relative excess (r_w - b) / r_w.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from services.alerts.config import DetectorConfig
from services.alerts.lifecycle import KINDS, Alert, alert_state, state_text
from services.core.numbers import plural
from services.rates.intervals import Counts

MINUTE = timedelta(minutes=1)
TOP = 3  # issues named in notifications; the API and the pages show up to SHOWN
SHOWN = 5


class NamedIssue(Protocol):
    """What the explainer reads of an issue (clustering.issue.IssueRecord)."""

    @property
    def issue_id(self) -> str: ...
    @property
    def name(self) -> str: ...


class IssueCounts(Protocol):
    """What the explainer reads from the issue repository (services.issues.records.IssueRecords)."""

    def members_on_route(self, route: str, since: datetime, until: datetime) -> dict[str, int]: ...
    def representatives_on_route(
        self, issue_ids: Sequence[str], route: str, since: datetime, until: datetime
    ) -> dict[str, dict[str, Any]]: ...
    def load(self, issue_ids: Sequence[str] | None = None) -> Sequence[NamedIssue]: ...
    def unassigned_on_route(self, route: str, since: datetime, until: datetime) -> int: ...


class RouteSums(Protocol):
    """What the explainer reads from the rate repository (services.store.rates.RateRepository)."""

    def route_slices(self, route: str, start: datetime, end: datetime) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Contribution:
    """One issue's part of an alert's excess (``issue_id`` None: failing claims no issue holds)."""

    issue_id: str | None
    failed: int  # failing claims on the route in the window
    expected: float  # what the baseline predicts for it
    contribution: float  # failed - expected
    share: float | None  # contribution / the route's excess; None when there is no excess
    name: str = ""
    claim: dict[str, Any] | None = None  # a representative failing claim: claim_key, text, trace_id, verdict
    runbook_url: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "issue_id": self.issue_id,
            "name": self.name,
            "failed": self.failed,
            "expected": round(self.expected, 2),
            "contribution": round(self.contribution, 2),
            "share": None if self.share is None else round(self.share, 4),
            "claim": self.claim,
            "runbook_url": self.runbook_url,
        }


def _share(contribution: float, excess: float) -> float | None:
    return contribution / excess if excess > 0 else None


def decompose(
    claims: int,
    failed: int,
    baseline: float,
    window_counts: Mapping[str, int],
    baseline_counts: Mapping[str, int],
    baseline_failed: int,
) -> tuple[list[Contribution], Contribution]:
    """Contributions of every issue (largest first) and of the unclustered rest; they add up to
    ``failed - baseline * claims`` exactly (see the module docstring)."""
    expected = baseline * claims
    excess = failed - expected
    ids = sorted(set(window_counts) | set(baseline_counts))
    if baseline_failed > 0:
        base = {i: baseline_counts.get(i, 0) for i in ids}
        denominator = max(baseline_failed, sum(base.values()))
    else:
        base = {i: window_counts.get(i, 0) for i in ids}
        denominator = max(failed, sum(base.values()))
    parts = {i: base[i] / denominator if denominator else 0.0 for i in ids}
    issues = []
    for i in ids:
        c = int(window_counts.get(i, 0))
        e = expected * parts[i]
        issues.append(Contribution(i, c, e, c - e, _share(c - e, excess)))
    issues.sort(key=lambda x: (-x.contribution, -x.failed, x.issue_id))
    rest_failed = failed - sum(x.failed for x in issues)
    rest_expected = expected * (1 - sum(parts.values()))
    rest = excess - sum(x.contribution for x in issues)  # == rest_failed - rest_expected, without rounding drift
    return issues, Contribution(None, rest_failed, rest_expected, rest, _share(rest, excess), name="unclustered")


@dataclass(frozen=True)
class AlertExplanation:
    alert_id: str
    route: str
    start: datetime
    end: datetime
    claims: int
    failed: int
    baseline: float
    issues: tuple[Contribution, ...]  # every issue with claims on the route in the window or baseline, largest first
    unclustered: Contribution
    baseline_start: datetime | None = None
    pending: int = 0  # failing claims of the window no assignment has seen yet (clustering is on its way)

    @property
    def status(self) -> str:
        """Says the explanation is still filling in, while the window's unseen claims would change it: before any
        issue is named, or while they are at least a tenth of the window's failing claims."""
        if self.pending and (not self.top() or self.pending * 10 >= self.failed):
            return f"clustering {self.pending:,} failing claims of this window"
        return ""

    @property
    def expected(self) -> float:
        return self.baseline * self.claims

    @property
    def excess(self) -> float:
        return self.failed - self.expected

    def top(self, n: int = TOP) -> tuple[Contribution, ...]:
        """The ``n`` issues contributing most (positive contributions only)."""
        return tuple(c for c in self.issues if c.contribution > 0)[:n]

    def other_issues(self, n: int = TOP) -> Contribution | None:
        """Every issue not in ``top(n)``, as one part (None when there is none)."""
        shown = {c.issue_id for c in self.top(n)}
        rest = [c for c in self.issues if c.issue_id not in shown]
        if not rest:
            return None
        total = sum(c.contribution for c in rest)
        name = plural(len(rest), "other issue")
        return Contribution(
            None,
            sum(c.failed for c in rest),
            sum(c.expected for c in rest),
            total,
            _share(total, self.excess),
            name=name,
        )

    def parts(self, n: int = SHOWN) -> list[Contribution]:
        """What a reader sees: the top issues, the other issues together, and the unclustered rest. Their
        contributions add up to the excess, and their shares to 1."""
        other = self.other_issues(n)
        return [*self.top(n), *([other] if other else []), self.unclustered]

    def as_dict(self, n: int = SHOWN) -> dict[str, Any]:
        other = self.other_issues(n)
        return {
            "window": [self.start.isoformat(), self.end.isoformat()],
            "baseline_since": self.baseline_start.isoformat() if self.baseline_start else None,
            "claims": self.claims,
            "failed": self.failed,
            "baseline": self.baseline,
            "expected": round(self.expected, 2),
            "excess": round(self.excess, 2),
            "pending": self.pending,
            "status": self.status,
            "issues": [c.as_dict() for c in self.top(n)],
            "other_issues": other.as_dict() if other else None,
            "unclustered": self.unclustered.as_dict(),
        }


@dataclass(frozen=True)
class IssueAlert:
    """An alert one issue contributes to, as the issue page lists it."""

    alert_id: str
    route: str
    state: str
    share: float | None
    contribution: float
    failed: int
    window: tuple[str, str] = field(default=("", ""))
    state_text: str = ""  # as people read it: cleared (never fired), firing·acked (lifecycle.state_text)

    def as_dict(self) -> dict[str, Any]:
        return {
            "alert_id": self.alert_id,
            "route": self.route,
            "state": self.state,
            "state_text": self.state_text or self.state,
            "share": None if self.share is None else round(self.share, 4),
            "contribution": round(self.contribution, 2),
            "failed": self.failed,
            "window": list(self.window),
        }


def _minute(ts: datetime) -> datetime:
    return ts.replace(second=0, microsecond=0)


def _route_counts(rows: Iterable[Mapping[str, Any]]) -> Counts:
    return Counts.from_row(next((r for r in rows if r.get("dim", "") == ""), {}))


def sample_scale(window: Counts) -> float:
    """What turns a rate of the whole traffic into one of the verified sample in ``window``: the stored rate
    over the weighted one (1 without sampling)."""
    rate = window.rate
    if not window.sampled or not rate:
        return 1.0
    return (window.failed / window.claims) / rate


def explainable(alert: Alert) -> bool:
    """Whether failing claims can account for the alert: only the kinds on the claims' failure rate. Not the
    input-health kinds, which count events and answers (a silent route or dead letters have no excess failing
    claims to split by issue), nor verifier agreement, whose rate is agreement with human labels."""
    return alert.kind in KINDS


def alert_window(alert: Alert, now: datetime) -> tuple[datetime, datetime]:
    """Where an alert's failing claims count: [onset, resolved or now] as whole minutes, both inclusive.

    Without an estimated onset, from ``window`` minutes before it went pending. One definition for the
    explanation and for which issues drive an alert (services/issues/priority.py).
    """
    active = alert.starts_at or alert.pending_since
    start = alert.onset or (alert.pending_since - timedelta(minutes=int(alert.window or 0)))
    start = min(start, active)
    end = alert.ends_at or now
    return _minute(start), _minute(max(end, start))


class AlertExplainer:
    """Splits an alert's excess failing claims by issue, from the store's counts (see the module docstring)."""

    def __init__(
        self,
        issues: IssueCounts,
        rates: RouteSums,
        base_url: str = "http://127.0.0.1:8080",
        baseline_minutes: int = DetectorConfig.model_fields["baseline_minutes"].default,
        shown: int = SHOWN,
    ):
        self.issues = issues
        self.rates = rates
        self.base_url = base_url.rstrip("/")
        self.baseline_minutes = baseline_minutes
        self.shown = shown

    def explain(self, alert: Alert, now: datetime) -> AlertExplanation:
        start, end = alert_window(alert, now)
        until = end + MINUTE - timedelta(milliseconds=1)  # the last minute bucket holds events up to here
        base_start = start - timedelta(minutes=self.baseline_minutes)
        window = _route_counts(self.rates.route_slices(alert.route, start, end))
        base = _route_counts(self.rates.route_slices(alert.route, base_start, start - MINUTE))
        claims, failed, base_failed = window.claims, window.failed, base.failed
        baseline = alert.tested_against
        if baseline is None:
            baseline = base.failed / base.claims if base.claims else 0.0
        else:  # a rate of the whole traffic: on the verified sample's scale (module docstring)
            baseline *= sample_scale(window)
        in_window = self.issues.members_on_route(alert.route, start, until)
        in_baseline = self.issues.members_on_route(alert.route, base_start, start - timedelta(milliseconds=1))
        issues, unclustered = decompose(claims, failed, baseline, in_window, in_baseline, base_failed)
        shown = [c for c in issues if c.contribution > 0][: self.shown]
        ids = [c.issue_id for c in shown if c.issue_id is not None]  # (each issue's part has its id)
        names = {r.issue_id: r.name for r in self.issues.load(ids)} if ids else {}
        claims_of = self.issues.representatives_on_route(ids, alert.route, start, until) if ids else {}
        named: dict[str | None, Contribution] = {  # looked up by any part's id, which may be None
            issue_id: Contribution(
                issue_id,
                c.failed,
                c.expected,
                c.contribution,
                c.share,
                name=names.get(issue_id, issue_id),
                claim=claims_of.get(issue_id),
                runbook_url=f"{self.base_url}/issues/{issue_id}?alert={alert.alert_id}",
            )
            for c in shown
            if (issue_id := c.issue_id) is not None
        }
        pending = self.issues.unassigned_on_route(alert.route, start, until)
        return AlertExplanation(
            alert.alert_id,
            alert.route,
            start,
            end,
            claims,
            failed,
            baseline,
            tuple(named.get(c.issue_id, c) for c in issues),
            unclustered,
            base_start,
            pending,
        )

    def alerts_of_issue(
        self,
        issue_id: str,
        alerts: Iterable[Alert],
        now: datetime,
        explain: Callable[[Alert], AlertExplanation] | None = None,
    ) -> list[IssueAlert]:
        """The alerts ``issue_id`` has failing claims behind, with its share of each one's excess. ``explain``:
        the caller's explanations, when it has read them already."""
        out = []
        for alert in filter(explainable, alerts):
            explanation = explain(alert) if explain is not None else self.explain(alert, now)
            mine = next((c for c in explanation.issues if c.issue_id == issue_id), None)
            if mine is None or mine.failed == 0:
                continue
            state = alert_state(alert, now)
            out.append(
                IssueAlert(
                    alert.alert_id,
                    alert.route,
                    state,
                    mine.share,
                    mine.contribution,
                    mine.failed,
                    (explanation.start.isoformat(), explanation.end.isoformat()),
                    state_text(state, alert.starts_at is not None, alert.acked_at is not None, False),
                )
            )
        return out
