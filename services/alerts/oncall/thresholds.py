"""Each alert rule's thresholds in force, in words, with the setting that changes each (services/alerts/oncall/rules.py
lists them per kind)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from services.alerts.detection.config import SHARED_WITH_DRIFT, DetectorConfig
from services.alerts.detection.health_engine import InputHealthConfig
from services.alerts.detection.slo_burn import BurnRule
from services.alerts.evaluation.cardinality import WINDOW as CARDINALITY_WINDOW
from services.alerts.lifecycle.kinds import REJECTED_KIND, SILENT_KIND


class AgreementRule(Protocol):  # services.review.agreement_alerts.AgreementDropTest
    recent: timedelta
    alpha: float
    min_drop: float
    min_labels: int


@dataclass(frozen=True)
class Threshold:
    text: str  # what the rule requires, in words with the value in force
    setting: str | None  # where to change it (TOML path); None: fixed in code
    value: object = None


# -- the thresholds in force, per kind -------------------------------------------------------------------
def pts(x: float) -> str:
    """A setting in points, as exact as it was given: ``2 pts``, ``0.75 pts``."""
    return f"{100 * x:.3g} pts"


def share(x: float) -> str:
    return f"{100 * x:.3g}%"


def _drift_setting(name: str) -> str:
    return f"drift.{name}" if name in SHARED_WITH_DRIFT else f"drift.detector.{name}"


def _engine(d: DetectorConfig) -> list[Threshold]:
    """How the configured engine decides (services/alerts/detection/engines.py)."""

    def t(text: str, name: str) -> Threshold:
        return Threshold(text, _drift_setting(name), getattr(d.engine, name))

    if d.kind == "cusum":
        c = d.cusum  # d.engine, by its own type
        rate, design = d.false_alarms_per_route_per_90d, pts(c.design(d.threshold))
        fires = (
            Threshold(
                f"CUSUM fires at h = {c.h:g}, tuned for a +{pts(c.design(d.threshold))} rise", _drift_setting("h"), c.h
            )
            if c.h is not None
            else Threshold(
                f"CUSUM tuned for a +{design} rise fires at each route's own threshold: the one "
                f"that allows {rate:g} false alarm(s) per 90 days at the route's volume, answer clustering and "
                "baseline error",
                _drift_setting("false_alarms_per_route_per_90d"),
                rate,
            )
        )
        return [
            fires,
            t(f"resolves when the mirror CUSUM reaches {c.resolve_h:g}", "resolve_h"),
        ]
    if d.kind == "window":
        w = d.window
        minutes = "/".join(str(m) for m in w.windows)
        return [
            t(f"z ≥ {w.z_fire:g} on a {minutes}-minute window, held {w.window_for_minutes} min", "z_fire"),
            t(f"resolves when every window is below z {w.z_resolve:g} for {w.resolve_minutes} min", "z_resolve"),
        ]
    n = d.naive
    return [t(f"the {n.naive_window}-minute rate over the threshold for {n.for_minutes} min", "for_minutes")]


def drift_thresholds(d: DetectorConfig, route_thresholds: Mapping[str, float]) -> list[Threshold]:
    def t(text: str, name: str) -> Threshold:
        return Threshold(text, _drift_setting(name), getattr(d, name))

    own = f"; {len(route_thresholds)} route(s) have their own" if route_thresholds else ""
    season = (
        f"expected: the trailing {d.baseline_minutes // 60} h level plus the time of day over up to "
        f"{d.season_days} days"
        if d.season_days
        else f"expected: the trailing {d.baseline_minutes // 60} h level"
    )
    return [
        Threshold(f"rise ≥ +{pts(d.threshold)} over the expectation{own}", "drift.threshold", d.threshold),
        t(f"≥ {d.min_claims:,} claims behind the rise", "min_claims"),
        *_engine(d),
        t(
            f"the rise's {share(d.confidence)} upper bound reaches the threshold and its estimate "
            f"≥ {share(d.min_rise_fraction)} of it",
            "confidence",
        ),
        t(season, "season_days"),
        t(f"warm-up: no alarm before {d.min_baseline_claims:,} claims of history", "min_baseline_claims"),
        t(
            f"learning (under a day of history): the last {d.learning_level_minutes // 60} h level, and a rise must "
            f"clear the spread its finished hours show ({d.margin_spread:g} x; {pts(d.learning_margin)} before any)",
            "learning_margin",
        ),
    ]


def input_thresholds(h: InputHealthConfig, kind: str) -> list[Threshold]:
    def t(text: str, name: str) -> Threshold:
        return Threshold(text, f"drift.input_health.{name}", getattr(h, name))

    window = t(
        f"window ≥ {h.window_minutes} min, lengthened until {h.min_expected:g} events are expected "
        f"(at most {h.max_window_minutes} min)",
        "min_expected",
    )
    chance = t(f"{'Poisson' if kind == SILENT_KIND else 'binomial'} tail p < {h.p_value:g}", "p_value")
    pending = t(f"pending {h.for_minutes} min before firing", "for_minutes")
    if kind == SILENT_KIND:
        return [
            t(f"≤ {share(h.silent_ratio)} of the expected events arrived", "silent_ratio"),
            window,
            chance,
            pending,
            t(f"resolves once {share(h.resume_ratio)} of them arrive", "resume_ratio"),
            t(
                f"expected: this hour's events a minute over up to {h.profile_days} days; under a day of history, "
                f"the mean of the last {h.learning_minutes} min",
                "learning_minutes",
            ),
            t(f"no judgement before {h.min_history_minutes} min of history", "min_history_minutes"),
        ]
    if kind == REJECTED_KIND:
        return [
            t(f"dead-lettered share ≥ its usual share + {pts(h.rejected_rise)}", "rejected_rise"),
            t(f"≥ {h.min_rejected} dead-lettered events", "min_rejected"),
            window,
            chance,
            pending,
            Threshold(f"resolves below its usual share + {pts(h.rejected_rise / 2)}", None),
        ]
    return [
        t(
            f"abstained share of answers ≥ its usual share + {pts(h.abstention_rise)} over "
            f"{h.abstention_window_minutes} min",
            "abstention_rise",
        ),
        Threshold("the served share is below its usual share", None),
        t(f"≥ {h.min_answers} answers in the window and in the route's history", "min_answers"),
        chance,
        pending,
        Threshold(f"resolves below its usual share + {pts(h.abstention_rise / 2)}", None),
    ]


def agreement_thresholds(a: AgreementRule) -> list[Threshold]:
    days = a.recent.total_seconds() / 86400
    return [
        Threshold(
            f"agreement over the last {days:g} days below all older labels by ≥ {pts(a.min_drop)}", None, a.min_drop
        ),
        Threshold(f"one-sided two-proportion z-test p < {a.alpha:g}", None, a.alpha),
        Threshold(f"≥ {a.min_labels} labels on each side", None, a.min_labels),
    ]


def cardinality_thresholds(max_active: int) -> list[Threshold]:
    minutes = int(CARDINALITY_WINDOW / timedelta(minutes=1))
    refused = f"an event of a new route refused over the last {minutes} min, the route bound being full"
    resolves = f"resolves after {minutes} min without a refusal"
    return [Threshold(refused, "routes.max_active", max_active), Threshold(resolves, None)]


def slo_thresholds(rules: Sequence[BurnRule]) -> list[Threshold]:
    return [Threshold(f"{r.severity}: {r}", "slo_alerts.rules", r.factor) for r in rules]
