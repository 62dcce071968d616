"""``AlertExplainer``: an alert's window, the store's counts in it, and their split by issue (the arithmetic and
what it means: services/alerts/explain/shares.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from services.alerts.detection.config import DetectorConfig
from services.alerts.explain.shares import SHOWN, AlertExplanation, Contribution, IssueAlert, decompose
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import KINDS
from services.alerts.lifecycle.status import alert_state, state_text
from services.rates.intervals import Counts

MINUTE = timedelta(minutes=1)


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
    """Splits an alert's excess failing claims by issue, from the store's counts (services/alerts/explain/shares.py)."""

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
        baseline = alert.expected
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
