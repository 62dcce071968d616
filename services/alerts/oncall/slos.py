"""What every surface says of an SLO (issue 54): its error budget over the window, each burn window, its open burn
alerts, what spends the budget (issues, by the failing claims they hold), and the budget's burn-down. One report, so
the CLI, the API, the pages, ``/metrics`` and the runbook give the same figures.

An SLO is read at the newest minute the store holds of any traffic (``at``): the same minute from any process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any, Protocol

from services.alerts.evaluation.slo_watch import LONGEST, SloReader, version_of
from services.alerts.explain.explainer import NamedIssue
from services.alerts.lifecycle.kinds import KINDS, SLO_KIND
from services.alerts.lifecycle.records import AlertRecords
from services.alerts.oncall.readmodel import (
    BurnRead,
    RelatedAlertRead,
    RouteSpendRead,
    SloAlertRead,
    SloDetailRead,
    SloRead,
    SpenderRead,
)
from services.core.errors import NotFound
from services.core.numbers import pct
from services.rates.intervals import Counts
from services.rates.slo import MinuteSeries, Slo, budget, counts_of

MINUTE = timedelta(minutes=1)
SPENDERS = 10  # issues (and routes, and drift alerts) listed beside the budget
DRIFT_ALERTS_READ = 200  # the newest drift alerts of each kind looked through for the SLO's routes
BURNDOWN_POINTS = 200  # at most this many points on the burn-down


class IssueSpend(Protocol):  # services.issues.records.IssueRecords
    def failing_by_issue(self, routes: str, since: datetime, until: datetime) -> tuple[dict[str, float], float]: ...
    def load(self, issue_ids: Sequence[str] | None = None) -> Sequence[NamedIssue]: ...


def budget_text(remaining: float | None) -> str:
    """The budget left as every surface says it: ``62.0% left``, ``overspent by 31.0%``, or ``no traffic yet``."""
    if remaining is None:
        return "no traffic yet"
    return f"{pct(remaining)} left" if remaining >= 0 else f"overspent by {pct(-remaining)}"


def spent_text(spent: float | None, interval: Sequence[float] | None) -> str:
    """The budget spent as every surface says it: ``76.3% of the budget spent (95% interval 73.0% to 79.8%)``."""
    if spent is None:
        return "no traffic yet"
    return f"{pct(spent)} of the budget spent" + (
        f" (95% interval {pct(interval[0])} to {pct(interval[1])})" if interval is not None else ""
    )


def window_text(minutes: int) -> str:
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}d" if not rest else f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


class SloReport:
    def __init__(
        self,
        slos: Sequence[Slo],
        reader: SloReader,
        latest: Callable[[], datetime | None],
        alerts: AlertRecords,
        team_of: Callable[[Slo], str],
        spend: IssueSpend | None = None,
        min_claims: int = 30,
    ):
        self.slos = {s.name: s for s in slos}
        self.reader, self.latest, self.alerts, self.team_of, self.spend = reader, latest, alerts, team_of, spend
        self.min_claims = min_claims

    def all(self, burns: bool = True) -> list[SloRead]:
        """Every SLO; without ``burns``, only its budget (what the overview's column reads)."""
        at = self.latest()
        open_alerts = self._open_alerts()
        return [self._read(slo, at, open_alerts, burns) for slo in self.slos.values()]

    def find(self, name: str) -> SloDetailRead | None:
        """The SLO in full, or None when none has that name (any more: an alert can outlive its SLO)."""
        return self.get(name) if name in self.slos else None

    def get(self, name: str) -> SloDetailRead:
        slo = self.slos.get(name)
        if slo is None:
            known = ", ".join(sorted(self.slos)) or "none are set ([[slo]] in the config file)"
            raise NotFound(f"no SLO named {name!r}; the SLOs: {known}")
        at = self.latest()
        read = self._read(slo, at, self._open_alerts())
        if at is None or read.at is None:
            return SloDetailRead(**read.model_dump(), spenders=[], burndown=[], routes_spending=[], drift_alerts=[])
        return SloDetailRead(
            **read.model_dump(),
            spenders=self._spenders(slo, at, read.budget_spent),
            burndown=self._burndown(slo, at),
            routes_spending=self._routes(slo, at, read.history_minutes),
            drift_alerts=self._drift_alerts(slo, at),
        )

    def _routes(self, slo: Slo, at: datetime, history: int) -> list[RouteSpendRead]:
        found = self.reader.slo_routes(slo.routes, version_of(slo), at - (max(history, 1) - 1) * MINUTE, at)
        per_route = [(route, *units_and_bad(counts_of(sums), slo)) for route, sums in found]
        allowed = slo.budget * sum(units for _, units, _ in per_route)
        ranked = sorted(per_route, key=lambda r: (-r[2], r[0]))[:SPENDERS]
        return [
            RouteSpendRead(route=r, units=u, bad=b, budget_spent=b / allowed if allowed > 0 else None)
            for r, u, b in ranked
        ]

    def _drift_alerts(self, slo: Slo, at: datetime) -> list[RelatedAlertRead]:
        since = at - LONGEST * MINUTE
        return [
            RelatedAlertRead(
                alert_id=a.alert_id,
                route=a.route,
                kind=a.kind,
                state=a.recorded_state,
                starts_at=None if a.starts_at is None else a.starts_at.isoformat(),
                ends_at=None if a.ends_at is None else a.ends_at.isoformat(),
            )
            for kind in KINDS
            for a in self.alerts.list(kind=kind, limit=DRIFT_ALERTS_READ)
            if fnmatchcase(a.route, slo.routes) and (a.ends_at is None or a.ends_at >= since)
        ][:SPENDERS]

    def _open_alerts(self) -> dict[str, list[SloAlertRead]]:
        found: dict[str, list[SloAlertRead]] = {}
        for a in self.alerts.open_alerts():
            if a.kind == SLO_KIND:
                read = SloAlertRead(
                    alert_id=a.alert_id,
                    severity=a.severity,
                    state=a.recorded_state,
                    starts_at=None if a.starts_at is None else a.starts_at.isoformat(),
                )
                found.setdefault(a.labels.get("slo", ""), []).append(read)
        return found

    def _read(
        self, slo: Slo, at: datetime | None, open_alerts: Mapping[str, list[SloAlertRead]], with_burns: bool = True
    ) -> SloRead:
        base: dict[str, Any] = dict(
            name=slo.name,
            routes=slo.routes,
            sli=slo.sli,
            objective=slo.objective,
            window=window_text(slo.window_minutes),
            description=slo.description,
            team=self.team_of(slo),
            alerts=open_alerts.get(slo.name, []),
        )
        first = None if at is None else self.reader.slo_first_minute(slo.routes, version_of(slo))
        if at is None or first is None:
            return SloRead(
                **base, at=None, history_minutes=0, budget_spent=None, budget_spent_interval=None,
                budget_remaining=None, bad_share=None, units=0, burns=[],
            )  # fmt: skip
        history = min(int((at - first) / MINUTE) + 1, slo.window_minutes)
        spent = budget(
            counts_of(self.reader.slo_sums(slo.routes, version_of(slo), at - (history - 1) * MINUTE, at)), slo
        )
        burns = []
        if with_burns:  # the last 3 days a minute at a time: not for the overview, which shows the budget alone
            since = at - LONGEST * MINUTE
            series = MinuteSeries(since, at, self.reader.slo_minutes(slo.routes, version_of(slo), since, at), first)
            burns = [
                BurnRead(
                    window=b.window,
                    minutes=b.minutes,
                    rate=b.rate,
                    interval=None if b.interval is None else b.interval.as_list(),
                    units=b.units,
                    reason=b.reason,
                )
                for b in series.burns(slo, at, self.min_claims).values()
            ]
        return SloRead(
            **base,
            at=at.isoformat(),
            history_minutes=history,
            budget_spent=spent.spent,
            budget_spent_interval=None if spent.spent_interval is None else spent.spent_interval.as_list(),
            budget_remaining=spent.remaining,
            bad_share=spent.bad_share,
            units=spent.units,
            burns=burns,
        )

    def _spenders(self, slo: Slo, at: datetime, spent: float | None) -> list[SpenderRead]:
        if self.spend is None or slo.version_key is not None:  # issues are not counted per version
            return []
        since = at - (slo.window_minutes - 1) * MINUTE
        by_issue, total = self.spend.failing_by_issue(slo.routes, since, at + MINUTE)
        if total <= 0:
            return []
        top = sorted(by_issue.items(), key=lambda kv: (-kv[1], kv[0]))[:SPENDERS]
        names = {issue.issue_id: issue.name for issue in self.spend.load([i for i, _ in top])}
        share = (lambda failed: None) if spent is None else (lambda failed: spent * failed / total)
        out = [SpenderRead(issue_id=i, name=names.get(i, i), failed=f, budget_spent=share(f)) for i, f in top]
        unclustered = total - sum(by_issue.values())
        if unclustered > 0.5:
            out.append(
                SpenderRead(
                    issue_id=None, name="not in an issue yet", failed=unclustered, budget_spent=share(unclustered)
                )
            )
        return out

    def _burndown(self, slo: Slo, at: datetime) -> list[list[Any]]:
        """Remaining budget at each point from the window's start: 1 - (bad units so far) / (the bad units the
        objective allows the window's units up to ``at``). Its last point is 1 - budget_spent."""
        start = at - (slo.window_minutes - 1) * MINUTE
        minutes = self.reader.slo_minutes(slo.routes, version_of(slo), start, at)
        totals = counts_of([sum(v) for v in zip(*(row for _, row in minutes))]) if minutes else None
        allowed = 0.0 if totals is None else slo.budget * units_and_bad(totals, slo)[0]
        if allowed <= 0:
            return []
        step = max(1, len(minutes) // BURNDOWN_POINTS)
        points, running = [], [0.0] * len(minutes[0][1])
        for n, (minute, row) in enumerate(minutes):
            running = [a + b for a, b in zip(running, row)]
            if n % step == 0 or n == len(minutes) - 1:
                points.append([minute.isoformat(), 1.0 - units_and_bad(counts_of(running), slo)[1] / allowed])
        return points


def units_and_bad(c: Counts, slo: Slo) -> tuple[float, float]:
    """The SLI's units and bad units, weighted (as its bad share counts them)."""
    if slo.sli == "claims":
        w_claims, w_failed = c.weighted[:2]
        return w_claims, w_failed
    bad, whole, _ = c.weighted_share("served_unsafe", "served")
    return whole, bad
