"""One evaluation pass as a pure step: every route's detectors stepped through the pass's inputs a minute at a
time, and each alert they watch stepped with them (services/alerts/lifecycle/transitions.py).

The step reads and writes nothing. It is a function of the state (the detectors, advanced in place, and the open
alerts) and of the inputs (read once by services/alerts/evaluation/inputs.py), and gives the transitions, the open
alerts after the pass and, with a ``StateWriter``, the rows that store that state. What an alert carries that only
the store knows (the suspect changes around a drift alert's onset, the top rule of a dead-letter alert) is asked
for (``Ask``) and filled in afterwards (services/alerts/evaluation/enrich.py): nothing the step decides depends on
it, so the transitions, their ids and the detectors' state are those of a step that read it on the way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.health_engine import InputHealthConfig
from services.alerts.detection.input_health import Finding
from services.alerts.detection.minutes import minute_number
from services.alerts.detection.route_detectors import RouteDetectors, RouteMinute
from services.alerts.detection.route_view import RouteView
from services.alerts.evaluation.inputs import Inputs
from services.alerts.evaluation.stored_state import StateWriter
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    DRIFT_KIND,
    INPUT_KINDS,
    MIX_KIND,
    REJECTED_KIND,
    SERVICE_LABELS,
)
from services.alerts.lifecycle.transitions import next_alert, severity_for

MINUTE = timedelta(minutes=1)
TOP_RULE_KEYS = ("top_rule", "top_rule_count", "sample_reason", "sample_source")  # an events_rejected alert's details
OpenAlerts = dict[tuple[str, str], Alert]  # (route, kind) -> its open alert


@dataclass(frozen=True)
class SuspectsAsk:
    """A drift or mix alert changed state at ``minute``: the version values whose share moved around ``onset``."""

    route: str
    kind: str
    minute: datetime
    onset: datetime


@dataclass(frozen=True)
class TopRuleAsk:
    """An events_rejected alert's figures are fresh at ``minute`` (it changed state, or they are saved): the rule
    most of the window's dead letters broke, the window starting at ``start``, its count scaled to the ``counted``
    dead letters the detector saw."""

    route: str
    kind: str
    minute: datetime
    start: datetime
    counted: int | None


Ask = SuspectsAsk | TopRuleAsk


@dataclass
class Stepped:
    """What a pass's step gives: the transitions (oldest first), the open alerts after it, the routes it stepped
    (whose open alerts the stored state holds), and what its alerts ask of the store (in the order asked).

    An ask holds for its alert from its minute on, until the next ask for the same route and kind: in between the
    step carries the open alert's own figures over."""

    transitions: list[Alert] = field(default_factory=list)
    open: OpenAlerts = field(default_factory=dict)
    routes: set[str] = field(default_factory=set)
    asks: list[Ask] = field(default_factory=list)


class AlertStep:
    """The evaluator's step. An alert's severity follows from the detector settings of its route
    (``config_for``: their thresholds) and the input-health settings."""

    def __init__(self, config_for: Callable[[str], DetectorConfig], health_config: InputHealthConfig):
        self.config_for = config_for
        self.health_config = health_config

    def run(
        self,
        detectors: RouteDetectors,
        open_alerts: Mapping[tuple[str, str], Alert],
        inputs: Inputs,
        start: datetime,
        stop: datetime,
        end: datetime,
        writer: StateWriter | None = None,
    ) -> Stepped:
        """Step ``detectors`` (in place) and the alerts through the minutes ``start``..``stop`` of ``inputs``, a part
        of an evaluation up to ``end`` (where every open alert's figures are saved). A route first seen in
        ``inputs`` joins the detectors; ``writer`` logs each minute's inputs and the snapshots due."""
        seen = {route for minute, by_route in inputs.items() if start <= minute <= stop for route in by_route}
        new = sorted(seen - set(detectors.rows))
        detectors.add(new)
        if writer is not None:
            writer.joined(new)
        out = Stepped(open=dict(open_alerts))
        minute = start
        while minute <= stop:
            given = inputs.get(minute, {})
            detectors.step(minute_number(minute), given)
            if writer is not None:  # a route that joined is logged at its first minute, fed or not
                logged = {**dict.fromkeys(new, RouteMinute()), **given} if minute == start else given
                writer.minute(minute, logged, detectors)
            watched = sorted(detectors.watched() | {route for route, _ in out.open})
            for route in watched:
                self._step_route(detectors, route, minute, minute == end, out)
            out.routes.update(watched)
            minute += MINUTE
        return out

    def _step_route(self, detectors: RouteDetectors, route: str, minute: datetime, last: bool, out: Stepped) -> None:
        health = detectors.health_view(route)
        watched = [k for k in INPUT_KINDS if health.state(k) != "ok" or (route, k) in out.open]
        views: list[tuple[str, RouteView | Finding]] = [
            (DRIFT_KIND, detectors.regression(route)),
            (MIX_KIND, detectors.mix_shift(route)),
            *((k, health.view(k)) for k in watched),
        ]
        for kind, view in views:
            self._step_alert(route, kind, view, minute, last, out)

    def _step_alert(
        self, route: str, kind: str, view: RouteView | Finding, minute: datetime, last: bool, out: Stepped
    ) -> None:
        previous = out.open.get((route, kind))
        if previous is None and view.state == "ok":
            return
        if kind in INPUT_KINDS:
            severity: str = self.health_config.abstention_severity if kind == ABSTENTION_KIND else "critical"
            if kind == REJECTED_KIND and isinstance(view, Finding) and view.state != "ok":
                view = _top_rule(route, view, minute, last, previous, out.asks)
        else:
            effect = view.rate_effect if kind == DRIFT_KIND else view.delta
            severity = severity_for(effect, self.config_for(route).threshold, kind)
        current = next_alert(previous, route, view, minute, kind=kind, severity=severity, labels=dict(SERVICE_LABELS))
        if current is None:
            return
        changed = previous is None or previous.recorded_state != current.recorded_state
        if changed and current.recorded_state != "resolved" and kind not in INPUT_KINDS:
            out.asks.append(SuspectsAsk(route, kind, minute, view.onset or minute))
        if current.ends_at is None:
            out.open[(route, kind)] = current
        else:
            out.open.pop((route, kind), None)
        if changed:
            out.transitions.append(current)


def _top_rule(
    route: str, view: Finding, minute: datetime, last: bool, previous: Alert | None, asks: list[Ask]
) -> Finding:
    """A dead-letter finding with its top rule: asked for where the alert changes state or its figures are saved (it
    costs a query), else carried over from the open alert."""
    details = view.details
    assert details is not None  # the rejected-events test's finding always carries its counts
    if last or previous is None or previous.recorded_state != view.state:
        start = minute - timedelta(minutes=view.window_minutes - 1)
        asks.append(TopRuleAsk(route, REJECTED_KIND, minute, start, details.get("rejected")))
        return view
    return replace(view, details={**details, **{k: v for k, v in previous.details.items() if k in TOP_RULE_KEYS}})
