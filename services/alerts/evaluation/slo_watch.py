"""SLO burn alerts (issue 54), stepped a minute at a time over the minutes the drift evaluator has evaluated, so the
live cycle and `claimwatch backtest` see the same minutes and give the same transitions.

Each SLO has two alerts, as Sloth generates them: ``page`` and ``ticket`` (services/alerts/detection/slo_burn.py),
each with its own lifecycle. A pass reads each SLO's minutes once (the longest burn window before its first minute
through its last) and steps them with prefix sums (services/rates/slo.py: MinuteSeries).

A first start (no SLO alert stored yet) steps every minute the evaluator's first pass walked, as the backtest does.
A restart takes up at the evaluator's newest minute with the open alerts the store holds: a burn that started and
stopped while it was down is not replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from services.alerts.detection.slo_burn import DEFAULT_RULES, SEVERITIES, BurnRule, slo_alert
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import SLO_KIND
from services.alerts.lifecycle.records import AlertRecords
from services.alerts.lifecycle.transitions import resolve
from services.rates.slo import BURN_WINDOWS, DEFAULT_MIN_CLAIMS, Budget, Burn, MinuteSeries, Slo, budget, counts_of

MINUTE = timedelta(minutes=1)
LONGEST = max(BURN_WINDOWS.values())


class SloReader(Protocol):  # services.store.rates.RateRepository
    def slo_minutes(
        self, routes: str, version: tuple[str, str] | None, start: datetime, end: datetime
    ) -> list[tuple[datetime, list[float]]]: ...

    def slo_first_minute(self, routes: str, version: tuple[str, str] | None) -> datetime | None: ...

    def slo_sums(self, routes: str, version: tuple[str, str] | None, start: datetime, end: datetime) -> list[float]: ...

    def slo_routes(
        self, routes: str, version: tuple[str, str] | None, start: datetime, end: datetime
    ) -> list[tuple[str, list[float]]]: ...


def version_of(slo: Slo) -> tuple[str, str] | None:
    return None if slo.version_key is None or slo.version_pattern is None else (slo.version_key, slo.version_pattern)


def series_for(reader: SloReader, slo: Slo, start: datetime, end: datetime, span: int) -> MinuteSeries | None:
    """The SLO's minutes from ``span`` minutes before ``start`` through ``end``; None before it has any traffic."""
    first = reader.slo_first_minute(slo.routes, version_of(slo))
    if first is None:
        return None
    since = start - span * MINUTE
    return MinuteSeries(since, end, reader.slo_minutes(slo.routes, version_of(slo), since, end), first)


class SloWatch:
    """The alert cycle's hook (services/alerts/evaluation/cycle.py: AlertHook). ``evaluated()``: the newest minute
    the drift evaluator has evaluated (None before its first pass); ``labels_of``: an SLO's owner labels."""

    def __init__(
        self,
        slos: Sequence[Slo],
        reader: SloReader,
        alerts: AlertRecords,
        evaluated: Callable[[], datetime | None],
        labels_of: Callable[[Slo], Mapping[str, str]],
        rules: Sequence[BurnRule] = DEFAULT_RULES,
        min_claims: int = DEFAULT_MIN_CLAIMS,
        first: Callable[[], datetime | None] = lambda: None,
    ):
        self.slos = tuple(slos)
        self.reader, self.alerts, self.evaluated, self.labels_of = reader, alerts, evaluated, labels_of
        self.first = first  # the first minute the evaluator walked from the stored history, if it did
        self.rules = tuple(rules)
        self.min_claims = min_claims
        self.open: dict[str, Alert] = {}  # "<slo>/<severity>" -> its open alert
        self.last_minute: datetime | None = None

    def evaluate(self, now: datetime) -> list[Alert]:
        end = self.evaluated()
        if end is None or not self.slos or (self.last_minute is not None and end <= self.last_minute):
            return []
        if self.last_minute is None:  # a start: the open alerts the store holds, then the newest minute
            self.open = {key(a.labels.get("slo", ""), a): a for a in self.alerts.open_alerts() if a.kind == SLO_KIND}
            fresh = not self.alerts.list(kind=SLO_KIND, limit=1)  # never alerted: the whole history, as backtest
            start = (self.first() or end) if fresh else end
        else:
            start = self.last_minute + MINUTE
        transitions = self.step(start, end)
        for alert in transitions:
            self.alerts.save(alert)
            self.alerts.record_transition(alert)
        by_name = {s.name: s for s in self.slos}
        self.open = {
            name: with_budget(a, self.budget(by_name[a.labels["slo"]], end)) if a.labels.get("slo") in by_name else a
            for name, a in self.open.items()
        }
        self.alerts.save_all(self.open.values())
        self.last_minute = end
        return transitions

    def budget(self, slo: Slo, end: datetime) -> Budget:
        """The budget spent over the SLO's window up to ``end``."""
        start = end - (slo.window_minutes - 1) * MINUTE
        return budget(counts_of(self.reader.slo_sums(slo.routes, version_of(slo), start, end)), slo)

    def step(self, start: datetime, end: datetime) -> list[Alert]:
        """Step every SLO through the minutes ``start``..``end``; the transitions, oldest first. Reads, never
        writes."""
        transitions: list[Alert] = []
        for slo in self.slos:
            series = series_for(self.reader, slo, start, end, LONGEST)
            if series is None:
                continue
            labels = self.labels_of(slo)
            minute = start
            while minute <= end:
                burns = series.burns(slo, minute, self.min_claims)
                for severity in ("page", "ticket"):
                    rule = next((r for r in self.rules if r.severity == severity and r.holds(burns)), None)
                    changed = self._step(slo, severity, rule, burns, minute, labels)
                    if changed is not None:
                        transitions.append(changed)
                minute += MINUTE
        return sorted(transitions, key=lambda a: a.transition_at)

    def _step(
        self,
        slo: Slo,
        severity: str,
        rule: BurnRule | None,
        burns: Mapping[str, Burn],
        minute: datetime,
        labels: Mapping[str, str],
    ) -> Alert | None:
        """The transition of one of the SLO's alerts at ``minute``, if it has one; the open alert kept up to date."""
        name = f"{slo.name}/{severity}"
        previous = self.open.get(name)
        if rule is None:
            if previous is None:
                return None
            del self.open[name]
            return resolve(previous, minute)
        current = slo_alert(slo, rule, burns, minute, labels, previous)
        self.open[name] = current
        return current if previous is None else None


def key(slo: str, alert: Alert) -> str:
    return f"{slo}/{'page' if alert.severity == SEVERITIES['page'] else 'ticket'}"


def with_budget(alert: Alert, spent: Budget) -> Alert:
    """The alert with the budget it stands against now (its details)."""
    return replace(alert, details={**alert.details, "budget_spent": spent.spent, "budget_remaining": spent.remaining})
