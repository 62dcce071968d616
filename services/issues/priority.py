"""The issue list's default order (Sentry's "priority" sort) and the escalating flag.

Tiers, first to last:
  0. issues that drive a firing alert: they account for at least ``DRIVING_SHARE`` of its excess failing
     claims (services/alerts/explain/shares.py); without an explainer, any failing claims on the alert's route
     inside its window (services.alerts.explain.explainer.alert_window, event time) count;
  1. regressed or escalating issues;
  2. the rest.
Within a tier, recent volume decides (members in the last ``RECENT_HOURS`` hours, event time), then all
members, then the id.

Escalating: the issue's failing claims in the last hour (event time, members' observed_at) are at least
``ESCALATION_FACTOR`` times the mean of the ``ESCALATION_HISTORY_HOURS`` hours before, and at least
``ESCALATION_MIN_CLAIMS`` (a jump from 1 to 3 claims is not news). An issue with no claims in those hours is
new, not escalating: there is no history to rise against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from services.alerts.explain.explainer import alert_window, explainable
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.status import alert_state

ESCALATION_FACTOR = 3.0
ESCALATION_HISTORY_HOURS = 6
ESCALATION_MIN_CLAIMS = 10
RECENT_HOURS = 24
DRIVING_SHARE = 0.05  # an issue behind 5% of an alert's excess drives it; the route's usual noise does not
ALERT, REGRESSED_OR_ESCALATING, REST = 0, 1, 2


class MemberCounts(Protocol):
    """What priority needs from the issue repository (services.store.issues.IssueRepository)."""

    def member_hours(self, since: datetime, until: datetime) -> dict[str, dict[int, int]]: ...
    def members_on_route(self, route: str, since: datetime, until: datetime) -> dict[str, int]: ...


def is_escalating(
    hours_ago: Mapping[int, int],
    factor: float = ESCALATION_FACTOR,
    history: int = ESCALATION_HISTORY_HOURS,
    minimum: int = ESCALATION_MIN_CLAIMS,
) -> bool:
    """``hours_ago``: members per whole hour before now (0 is the last hour)."""
    last = hours_ago.get(0, 0)
    before = sum(hours_ago.get(h, 0) for h in range(1, history + 1)) / history
    return before > 0 and last >= minimum and last >= factor * before  # a brand-new issue is new, not escalating


@dataclass(frozen=True)
class PrioritySignals:
    hours: Mapping[str, Mapping[int, int]] = field(default_factory=dict)  # issue -> hours ago -> members
    driving: Mapping[str, tuple[dict, ...]] = field(default_factory=dict)  # issue -> {alert_id, route, claims}

    def escalating(self, issue_id: str) -> bool:
        return is_escalating(self.hours.get(issue_id, {}))

    def recent(self, issue_id: str) -> int:
        return sum(n for ago, n in self.hours.get(issue_id, {}).items() if ago < RECENT_HOURS)

    def drives(self, issue_id: str) -> list[dict]:
        return list(self.driving.get(issue_id, ()))


def gather(
    issues: MemberCounts,
    open_alerts: Iterable[Alert],
    now: datetime,
    explain: Callable[[Alert, datetime], object] | None = None,
) -> PrioritySignals:
    """Hourly member counts of every issue over the last day, and which issues drive which firing alert.

    ``explain(alert, now)`` (an AlertExplainer's) decides by each issue's share of the alert's excess.
    """
    hours = issues.member_hours(now - timedelta(hours=RECENT_HOURS), now)
    driving: dict[str, list[dict]] = {}
    for alert in sorted(open_alerts, key=lambda a: a.alert_id):
        if alert_state(alert, now) != "firing" or not explainable(alert):  # no issue drives a silent route
            continue
        for issue_id, n in _drivers(issues, alert, now, explain):
            driving.setdefault(issue_id, []).append({"alert_id": alert.alert_id, "route": alert.route, "claims": n})
    return PrioritySignals(hours, {k: tuple(v) for k, v in driving.items()})


def _drivers(issues: MemberCounts, alert: Alert, now: datetime, explain) -> list[tuple[str, int]]:
    explanation = explain(alert, now) if explain is not None else None
    if explanation is not None and explanation.excess > 0:
        return [
            (c.issue_id, c.failed)
            for c in explanation.issues
            if c.issue_id and c.share is not None and c.share >= DRIVING_SHARE
        ]
    # No measurable excess (no minute buckets for the window): any failing claims on the route count.
    since, until = alert_window(alert, now)
    return [
        (issue_id, n) for issue_id, n in sorted(issues.members_on_route(alert.route, since, until).items()) if n > 0
    ]


def tier(view: Mapping) -> int:
    if view.get("drives_alerts"):
        return ALERT
    if view.get("state") == "regressed" or view.get("escalating"):
        return REGRESSED_OR_ESCALATING
    return REST


def priority_key(view: Mapping) -> tuple:
    """Sort key, ascending: tier, then claims behind firing alerts, recent volume, all members, id."""
    behind_alerts = sum(d["claims"] for d in view.get("drives_alerts") or ())
    return (
        tier(view),
        -behind_alerts,
        -int(view.get("recent_count") or 0),
        -int(view.get("count") or 0),
        view["issue_id"],
    )
