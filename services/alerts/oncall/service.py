"""What engineers do with alerts (list, show, ack, silence, unsilence, their runbooks and the rules), shared by
the API and the CLI."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from services.alerts.detection.expectations import compare, published, sort_routes
from services.alerts.explain.calibrated import Calibration, calibrated_rise, calibration_suspect
from services.alerts.explain.explainer import AlertExplainer, explainable
from services.alerts.explain.shares import AlertExplanation
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.inhibition import INHIBIT_RULES, NO_INHIBITION, Inhibition, InhibitRule, inhibited_fields
from services.alerts.lifecycle.kinds import KINDS, MATCH_LABEL_NAMES
from services.alerts.lifecycle.records import AlertRecords
from services.alerts.lifecycle.silences import Silence, refuse_unknown_labels
from services.alerts.lifecycle.status import ack, state_text, status
from services.alerts.oncall.filters import ACTIVE_STATES, LIST_LIMIT, AlertFilter
from services.alerts.oncall.readmodel import AlertDetailRead, AlertRead, SilencePreviewRead, SilenceRead
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
    team: str | None = None  # its owners' team ([[owners]]), the `team` label Alertmanager gets
    inhibitors: tuple[Alert, ...] = ()  # the firing alerts that inhibit it (open alerts only; lifecycle/inhibition.py)

    @classmethod
    def of(
        cls,
        alert: Alert,
        silences: list[Silence],
        now: datetime,
        team: str | None = None,
        inhibition: Inhibition = NO_INHIBITION,
    ) -> AlertView:
        st = status(alert, silences, now)
        inhibitors = () if st.state == "resolved" else inhibition.sources(alert)
        return cls(alert, st.state, st.acked, tuple(st.silenced_by), team=team, inhibitors=inhibitors)

    def read(self) -> AlertRead:
        """The alert as the API, the CLI and the pages show it; in full (AlertDetailRead) when one alert is shown."""
        common = {
            **self.alert.as_dict(),
            "state": self.state,
            "acked": self.acked,
            "silenced_by": list(self.silenced_by),
            "team": self.team,
            **inhibited_fields(self.inhibitors),
            "state_text": state_text(
                self.state, self.alert.starts_at is not None, self.acked, bool(self.silenced_by), bool(self.inhibitors)
            ),
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


@dataclass(frozen=True)
class SilencePreview:
    """What a silence of ``matchers`` would silence now: the open alerts it matches, as listed, and how many
    resolved ones it matches too."""

    matchers: tuple[str, ...]
    alerts: tuple[AlertView, ...]
    resolved: int

    def read(self) -> SilencePreviewRead:
        return SilencePreviewRead(
            matchers=list(self.matchers),
            alerts=[v.read() for v in self.alerts],
            active=len(self.alerts),
            resolved=self.resolved,
            searched=LIST_LIMIT,
        )

    def as_dict(self) -> dict[str, Any]:
        return self.read().as_dict()


LIST_ORDER = {"firing": 0, "pending": 1, "resolved": 2}  # what needs a person first
PREVIEW_FOR = "1h"  # a preview's silence is never stored; it needs an end to be made at all


class AlertsService:
    def __init__(
        self,
        alerts: AlertRecords,
        explainer: AlertExplainer | None = None,
        explain_newest: int = 20,
        calibration: Callable[[str, timedelta, datetime], Calibration | None] | None = None,
        rules: Callable[[], list[Rule]] | None = None,
        runbook: Callable[[Alert, str], str | None] | None = None,
        owner_labels: Callable[[Alert], Mapping[str, str]] | None = None,
        inhibit_rules: Sequence[InhibitRule] = INHIBIT_RULES,
    ):
        self.alerts = alerts
        self.inhibit_rules = tuple(inhibit_rules)  # notify.inhibit_rules: which alerts show as inhibited
        self.owner_labels = owner_labels  # alert -> its owners' labels (services/issues/owners.py): team, owner
        self.rules_in_force = rules  # () -> every kind's rule: the configs in force and the benches' figures
        self.write_runbook = runbook  # (alert, "md" | "html") -> its runbook, or None (runbooks/alerts.py)
        self.calibration = calibration  # (route, window, now) -> the route's calibrated rate (services/review)
        self.explainer = explainer
        self.explain_newest = explain_newest  # a list explains its newest alerts only (each costs a few queries)

    def explain(self, alert: Alert, now: datetime) -> AlertExplanation | None:
        return None if self.explainer is None or not explainable(alert) else self.explainer.explain(alert, now)

    def team(self, alert: Alert) -> str | None:
        return None if self.owner_labels is None else self.owner_labels(alert).get("team")

    def inhibition(self, now: datetime) -> Inhibition:
        """The inhibition rules over the open alerts now, as the notifier applies them (notify/plan.py)."""
        return Inhibition.at(self.inhibit_rules, self.alerts.open_alerts() if self.inhibit_rules else (), now)

    def list(
        self,
        now: datetime,
        route: str | None = None,
        state: str | None = None,
        explain: bool = False,
        *,
        kind: str | None = None,
        team: str | None = None,
    ) -> list[AlertView]:
        """Alerts, firing before pending before resolved, each newest first (the stored order): the LIST_LIMIT
        newest that ``route``, ``kind`` and ``state`` keep (AlertFilter: state "active" is pending or firing; an
        unknown state or kind is a ValueError naming the choices), then those of ``team``; with ``explain``, the
        first ``explain_newest`` carry their explanation."""
        kept = AlertFilter(state, kind, route, team)
        silences = self.alerts.silences()
        found = self.alerts.list(route, LIST_LIMIT, kind=kind, states=kept.states, at=now)
        inhibition = self.inhibition(now)
        views = [AlertView.of(a, silences, now, self.team(a), inhibition) for a in found]
        views = sorted(
            (v for v in views if kept.keeps(v.state, v.alert.kind, v.alert.route, v.team)),
            key=lambda v: LIST_ORDER[v.state],
        )
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
        alert = self.alerts.get(alert_id)
        view = AlertView.of(alert, self.alerts.silences(), now, self.team(alert), self.inhibition(now))
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
            view.team,
            view.inhibitors,
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
        return AlertView.of(acked, self.alerts.silences(), now, self.team(acked), self.inhibition(now))

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

    def preview(self, matchers: builtins.list[str], now: datetime) -> SilencePreview:
        """What a silence of ``matchers`` made now would silence, and nothing is stored: the silence is made and
        checked as ``silence`` makes it (a malformed matcher, or one on a label no alert carries, is a ValueError
        naming it) and matched as the alerts' status matches every silence (Silence.matches)."""
        probe = Silence.create(matchers, now, duration=PREVIEW_FOR, created_by="preview", comment="preview")
        refuse_unknown_labels(probe.matchers, self.label_names())
        silences, inhibition = self.alerts.silences(), self.inhibition(now)

        def matching(states: tuple[str, ...]) -> builtins.list[AlertView]:
            found = self.alerts.list(None, LIST_LIMIT, states=states, at=now)
            found = [a for a in found if probe.matches(a.match_labels, now)]
            views = [AlertView.of(a, silences, now, self.team(a), inhibition) for a in found]
            return [v for v in views if v.state in states]  # the stored times, read as of now

        open_ones = sorted(matching(ACTIVE_STATES), key=lambda v: LIST_ORDER[v.state])
        return SilencePreview(tuple(map(str, probe.matchers)), tuple(open_ones), len(matching(("resolved",))))

    def label_names(self) -> set[str]:
        """The labels a silence can match: those every alert has, and any extra label a stored alert carries."""
        return {*MATCH_LABEL_NAMES, *(name for a in self.alerts.list() for name in a.labels)}

    def unsilence(self, silence_id: str, by: str, now: datetime) -> Silence:
        silence = self.alerts.silence(silence_id).expire(now, by)
        self.alerts.save_silence(silence)
        return silence

    def silences(self, now: datetime, active_only: bool = False) -> builtins.list[SilenceView]:
        return [SilenceView(s, s.is_active(now)) for s in self.alerts.silences(now if active_only else None)]


__all__ = ["AlertView", "AlertsService", "NotFound", "SilencePreview", "SilenceView"]
