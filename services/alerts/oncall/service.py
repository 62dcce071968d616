"""What engineers do with alerts (list, show, ack, silence, unsilence, their runbooks and the rules), shared by
the API and the CLI."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from services.alerts.detection.expectations import compare, published, sort_routes
from services.alerts.explain.calibrated import Calibration, calibrated_rise, calibration_suspect
from services.alerts.explain.explainer import AlertExplainer, explainable
from services.alerts.explain.shares import AlertExplanation
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import KINDS, MATCH_LABEL_NAMES
from services.alerts.lifecycle.records import AlertRecords
from services.alerts.lifecycle.silences import Silence, refuse_unknown_labels
from services.alerts.lifecycle.status import ack, state_text, status
from services.alerts.oncall.readmodel import AlertDetailRead, AlertRead, SilenceRead
from services.alerts.oncall.rules import Rule
from services.core.errors import NotFound


@dataclass(frozen=True)
class AlertView:
    """An alert as an engineer sees it now: its record, its state under silences and acks, and its history."""

    alert: Alert
    state: str
    acked: bool
    silenced_by: tuple[str, ...]
    transitions: tuple[dict[str, Any], ...] | None = None  # only when one alert is shown
    explanation: AlertExplanation | None = None  # the issues behind its excess (services/alerts/explain/shares.py)
    calibration: Calibration | None = None  # the route's calibration now (rate alerts, one alert shown)
    runbook: str | None = None  # Markdown, input-health kinds (RUNBOOK_KINDS), one alert shown

    @classmethod
    def of(cls, alert: Alert, silences: list[Silence], now: datetime) -> AlertView:
        st = status(alert, silences, now)
        return cls(alert, st.state, st.acked, tuple(st.silenced_by))

    def read(self) -> AlertRead:
        """The alert as the API, the CLI and the pages show it; in full (AlertDetailRead) when one alert is shown."""
        common = {
            **self.alert.as_dict(),
            "state": self.state,
            "acked": self.acked,
            "silenced_by": list(self.silenced_by),
            "state_text": state_text(self.state, self.alert.starts_at is not None, self.acked, bool(self.silenced_by)),
            "explanation": None if self.explanation is None else self.explanation.as_dict(),
        }
        if self.transitions is None:
            return AlertRead(**common)
        calibrated = None
        if self.alert.kind in KINDS:
            calibrated = calibrated_rise(self.alert, self.calibration)
            suspect = calibration_suspect(self.calibration)
            if suspect:
                common["suspect_changes"] = [suspect, *common["suspect_changes"]]
        return AlertDetailRead(
            **common, transitions=list(self.transitions), calibrated=calibrated, runbook=self.runbook
        )

    def as_dict(self) -> dict[str, Any]:
        return self.read().as_dict()


@dataclass(frozen=True)
class SilenceView:
    silence: Silence
    active: bool

    def read(self) -> SilenceRead:
        return SilenceRead(**self.silence.as_dict(), active=self.active)

    def as_dict(self) -> dict[str, Any]:
        return self.read().as_dict()


LIST_ORDER = {"firing": 0, "pending": 1, "resolved": 2}  # what needs a person first


class AlertsService:
    def __init__(
        self,
        alerts: AlertRecords,
        explainer: AlertExplainer | None = None,
        explain_newest: int = 20,
        calibration: Callable[[str, timedelta, datetime], Calibration | None] | None = None,
        rules: Callable[[], list[Rule]] | None = None,
        runbook: Callable[[Alert, str], str | None] | None = None,
    ):
        self.alerts = alerts
        self.rules_in_force = rules  # () -> every kind's rule: the configs in force and the benches' figures
        self.write_runbook = runbook  # (alert, "md" | "html") -> its runbook, or None (runbooks/alerts.py)
        self.calibration = calibration  # (route, window, now) -> the route's calibrated rate (services/review)
        self.explainer = explainer
        self.explain_newest = explain_newest  # a list explains its newest alerts only (each costs a few queries)

    def explain(self, alert: Alert, now: datetime) -> AlertExplanation | None:
        return None if self.explainer is None or not explainable(alert) else self.explainer.explain(alert, now)

    def list(
        self, now: datetime, route: str | None = None, state: str | None = None, explain: bool = False
    ) -> list[AlertView]:
        """Alerts, firing before pending before resolved, each newest first (the stored order); with ``explain``,
        the first ``explain_newest`` carry their explanation."""
        silences = self.alerts.silences()
        views = [AlertView.of(a, silences, now) for a in self.alerts.list(route)]
        views = sorted((v for v in views if state is None or v.state == state), key=lambda v: LIST_ORDER[v.state])
        if explain and self.explainer is not None:
            views = [
                replace(v, explanation=self.explain(v.alert, now)) if i < self.explain_newest else v
                for i, v in enumerate(views)
            ]
        return views

    # builtins.list from here on: in the class body, list is the method above
    def compare_rates(
        self, entries: builtins.list[dict[str, Any]], now: datetime, sort: str = "priority"
    ) -> builtins.list[dict[str, Any]]:
        """Rate entries beside each route's expectation and firing alerts, sorted
        (services/alerts/detection/expectations.py)."""
        return sort_routes(list(map(self.comparison(now), entries)), sort)

    def comparison(self, now: datetime) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """What sets a rate entry beside its route's expectation and firing alerts (expectations.compare), read
        once for every entry it is given."""
        expectations = published(self.alerts)
        firing: dict[str, list[str]] = {}
        for view in self.list(now, state="firing"):
            firing.setdefault(view.alert.route, []).append(view.alert.alert_id)
        return lambda e: compare(e, expectations.get(e["route"]), firing.get(e["route"], ()))

    def get(self, alert_id: str) -> Alert:
        """The stored alert (NotFound for an unknown id)."""
        return self.alerts.get(alert_id)

    def show(self, alert_id: str, now: datetime) -> AlertView:
        view = AlertView.of(self.alerts.get(alert_id), self.alerts.silences(), now)
        calibration = None
        if self.calibration is not None and view.alert.kind in KINDS:
            calibration = self.calibration(view.alert.route, timedelta(minutes=view.alert.window), now)
        return AlertView(
            view.alert,
            view.state,
            view.acked,
            view.silenced_by,
            tuple(self.alerts.transitions(alert_id)),
            self.explain(view.alert, now),
            calibration,
            self.runbook(view.alert, "md"),
        )

    def runbook(self, alert: Alert, fmt: str = "md") -> str | None:
        """The alert's own runbook (input-health kinds); None for a drift alert, whose runbooks are its issues'."""
        return None if self.write_runbook is None else self.write_runbook(alert, fmt)

    def rules(self) -> builtins.list[Rule]:
        """Every alert kind's rule: meaning, severity, thresholds in force and measured quality."""
        if self.rules_in_force is None:
            raise NotFound("the alert rules are not available in this process")
        return self.rules_in_force()

    def ack(self, alert_id: str, by: str, note: str, now: datetime) -> AlertView:
        alert = self.alerts.get(alert_id)  # NotFound for an unknown id: an error, not a no-op
        acked = ack(alert, by, now, note)
        self.alerts.save_ack(acked)
        return AlertView.of(acked, self.alerts.silences(), now)

    def silence(
        self,
        matchers: builtins.list[str],
        by: str,
        comment: str,
        now: datetime,
        duration: str | None = None,
        ends_at: datetime | None = None,
    ) -> Silence:
        silence = Silence.create(matchers, now, ends_at=ends_at, duration=duration, created_by=by, comment=comment)
        refuse_unknown_labels(silence.matchers, self.label_names())
        self.alerts.save_silence(silence)
        return silence

    def label_names(self) -> set[str]:
        """The labels a silence can match: those every alert has, and any extra label a stored alert carries."""
        return {*MATCH_LABEL_NAMES, *(name for a in self.alerts.list() for name in a.labels)}

    def unsilence(self, silence_id: str, by: str, now: datetime) -> Silence:
        silence = self.alerts.silence(silence_id).expire(now, by)
        self.alerts.save_silence(silence)
        return silence

    def silences(self, now: datetime, active_only: bool = False) -> builtins.list[SilenceView]:
        return [SilenceView(s, s.is_active(now)) for s in self.alerts.silences(now if active_only else None)]


__all__ = ["AlertView", "AlertsService", "NotFound", "SilenceView"]
