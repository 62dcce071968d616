"""The alert rules state their own quality (issue 21, part D).

For each kind the evaluators open: what it means, its severity and whether it pages, the thresholds
in force (read from the configs the evaluators run with, each with the setting that changes it), and
the false-alarm rate and detection delay the benches measured (services/alerts/oncall/quality.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.health_engine import InputHealthConfig
from services.alerts.detection.slo_burn import DEFAULT_RULES, BurnRule
from services.alerts.evaluation.cardinality import WINDOW as CARDINALITY_WINDOW
from services.alerts.lifecycle.inhibition import INHIBIT_RULES, SETTING, InhibitRule
from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    AGREEMENT_KIND,
    CARDINALITY_KIND,
    DRIFT_KIND,
    INPUT_KINDS,
    KINDS,
    MIX_KIND,
    REJECTED_KIND,
    SILENT_KIND,
    SLO_KIND,
)
from services.alerts.lifecycle.transitions import CRITICAL_THRESHOLDS
from services.alerts.oncall.quality import Quality
from services.alerts.oncall.readmodel import InhibitionRead, RuleRead, RuleThresholdRead
from services.ingest.routes import MAX_ACTIVE

RULE_KINDS = KINDS + (AGREEMENT_KIND,) + INPUT_KINDS + (CARDINALITY_KIND, SLO_KIND)  # every kind an evaluator opens


class AgreementRule(Protocol):  # services.review.agreement_alerts.AgreementDropTest
    recent: timedelta
    alpha: float
    min_drop: float
    min_labels: int


# Warnings of these kinds go to a chat receiver, never the pager (dashboards/alertmanager/alertmanager.yml;
# tests/unit/alerts/test_rules.py checks the two agree). Every other alert reaches the on-call receiver.
QUIET_WARNINGS = (MIX_KIND, ABSTENTION_KIND, SLO_KIND)  # an SLO's warning is its ticket
MEANINGS = {
    DRIFT_KIND: "the claim hallucination rate rose above what this time of day predicts, on the same mix of "
    "questions: a regression",
    MIX_KIND: "the rate rose, but mostly because the mix moved to questions that fail more often",
    AGREEMENT_KIND: "the verifier agrees with human labels less than it did: calibrated rates may be off",
    SILENT_KIND: "the route's verdict events fell far below what its time of day predicts: the monitor is blind",
    REJECTED_KIND: "a larger share of the route's events is dead-lettered (broke the event contract)",
    ABSTENTION_KIND: "the route abstains on more answers while serving fewer; a falling hallucination rate "
    "meanwhile is the gaming case",
    CARDINALITY_KIND: "events of new routes are refused over routes.max_active: those routes are not monitored; "
    "the alert names the producer creating them",
    SLO_KIND: "an SLO's error budget burns faster than its window can afford: a page for a fast burn, a ticket for "
    "a slow one",
}


def pages(kind: str, severity: str) -> bool:
    """Whether an alert of ``kind`` at ``severity`` reaches the pager under the shipped Alertmanager routing."""
    return severity == "critical" or kind not in QUIET_WARNINGS


@dataclass(frozen=True)
class Threshold:
    text: str  # what the rule requires, in words with the value in force
    setting: str | None  # where to change it (TOML path); None: fixed in code
    value: object = None


@dataclass(frozen=True)
class Rule:
    kind: str
    meaning: str
    severity: str  # in words: "warning", "critical", or "warning; critical from …"
    severities: tuple[str, ...]  # the severities it opens at
    pages: bool
    thresholds: tuple[Threshold, ...]
    quality: Quality = field(default_factory=Quality)
    inhibition: tuple[InhibitRule, ...] = ()  # the inhibition rules it takes part in, as source or target

    def read(self) -> RuleRead:
        return RuleRead(
            kind=self.kind,
            meaning=self.meaning,
            severity=self.severity,
            severities=list(self.severities),
            pages=self.pages,
            thresholds=[RuleThresholdRead(text=t.text, setting=t.setting, value=t.value) for t in self.thresholds],
            **asdict(self.quality),
            inhibition=[
                InhibitionRead(
                    source_kinds=list(r.source_kinds),
                    target_kinds=list(r.target_kinds),
                    equal=list(r.equal),
                    text=r.text,
                    setting=SETTING,
                )
                for r in self.inhibition
            ],
        )

    def as_dict(self) -> dict[str, Any]:
        return self.read().as_dict()


# -- the thresholds in force, per kind -------------------------------------------------------------------
def _pts(x: float) -> str:
    """A setting in points, as exact as it was given: ``2 pts``, ``0.75 pts``."""
    return f"{100 * x:.3g} pts"


def _share(x: float) -> str:
    return f"{100 * x:.3g}%"


def _drift_setting(name: str) -> str:
    return f"drift.{name}" if name in ("threshold", "min_claims", "baseline_minutes") else f"drift.detector.{name}"


def _engine(d: DetectorConfig) -> list[Threshold]:
    """How the configured engine decides (services/alerts/detection/engines.py)."""

    def t(text: str, name: str) -> Threshold:
        return Threshold(text, _drift_setting(name), getattr(d.engine, name))

    if d.kind == "cusum":
        c = d.cusum  # d.engine, by its own type
        return [
            t(f"CUSUM fires at h = {c.h:g}, tuned for a +{_pts(c.design(d.threshold))} rise", "h"),
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


def _drift(d: DetectorConfig, route_thresholds: Mapping[str, float]) -> list[Threshold]:
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
        Threshold(f"rise ≥ +{_pts(d.threshold)} over the expectation{own}", "drift.threshold", d.threshold),
        t(f"≥ {d.min_claims:,} claims behind the rise", "min_claims"),
        *_engine(d),
        t(
            f"the rise's {_share(d.confidence)} upper bound reaches the threshold and its estimate "
            f"≥ {_share(d.min_rise_fraction)} of it",
            "confidence",
        ),
        t(season, "season_days"),
        t(f"warm-up: no alarm before {d.min_baseline_claims:,} claims of history", "min_baseline_claims"),
        t(
            f"learning (under a day of history): the last {d.learning_level_minutes // 60} h level, and a rise must "
            f"clear it by {_pts(d.learning_margin)} more",
            "learning_margin",
        ),
    ]


def _input(h: InputHealthConfig, kind: str) -> list[Threshold]:
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
            t(f"≤ {_share(h.silent_ratio)} of the expected events arrived", "silent_ratio"),
            window,
            chance,
            pending,
            t(f"resolves once {_share(h.resume_ratio)} of them arrive", "resume_ratio"),
            t(
                f"expected: this hour's events a minute over up to {h.profile_days} days; under a day of history, "
                f"the mean of the last {h.learning_minutes} min",
                "learning_minutes",
            ),
            t(f"no judgement before {h.min_history_minutes} min of history", "min_history_minutes"),
        ]
    if kind == REJECTED_KIND:
        return [
            t(f"dead-lettered share ≥ its usual share + {_pts(h.rejected_rise)}", "rejected_rise"),
            t(f"≥ {h.min_rejected} dead-lettered events", "min_rejected"),
            window,
            chance,
            pending,
            Threshold(f"resolves below its usual share + {_pts(h.rejected_rise / 2)}", None),
        ]
    return [
        t(
            f"abstained share of answers ≥ its usual share + {_pts(h.abstention_rise)} over "
            f"{h.abstention_window_minutes} min",
            "abstention_rise",
        ),
        Threshold("the served share is below its usual share", None),
        t(f"≥ {h.min_answers} answers in the window and in the route's history", "min_answers"),
        chance,
        pending,
        Threshold(f"resolves below its usual share + {_pts(h.abstention_rise / 2)}", None),
    ]


def _agreement(a: AgreementRule) -> list[Threshold]:
    days = a.recent.total_seconds() / 86400
    return [
        Threshold(
            f"agreement over the last {days:g} days below all older labels by ≥ {_pts(a.min_drop)}", None, a.min_drop
        ),
        Threshold(f"one-sided two-proportion z-test p < {a.alpha:g}", None, a.alpha),
        Threshold(f"≥ {a.min_labels} labels on each side", None, a.min_labels),
    ]


def _cardinality(max_active: int) -> list[Threshold]:
    minutes = int(CARDINALITY_WINDOW / timedelta(minutes=1))
    refused = f"an event of a new route refused over the last {minutes} min, the route bound being full"
    resolves = f"resolves after {minutes} min without a refusal"
    return [Threshold(refused, "routes.max_active", max_active), Threshold(resolves, None)]


def _slo(rules: Sequence[BurnRule]) -> list[Threshold]:
    return [Threshold(f"{r.severity}: {r}", "slo_alerts.rules", r.factor) for r in rules]


def alert_rules(
    detector: DetectorConfig,
    health: InputHealthConfig,
    agreement: AgreementRule,
    quality: Mapping[str, Quality],
    route_thresholds: Mapping[str, float] | None = None,
    max_active: int = MAX_ACTIVE,
    inhibit_rules: Sequence[InhibitRule] = INHIBIT_RULES,
    slo_rules: Sequence[BurnRule] = DEFAULT_RULES,
) -> list[Rule]:
    """Every kind's rule, in RULE_KINDS order, from the configs the evaluators run with; each with the inhibition
    rules it takes part in."""
    route_thresholds = route_thresholds or {}
    drift = _drift(detector, route_thresholds)
    mix = [
        Threshold(f"≥ {_share(detector.mix_share)} of the rise is mix", "drift.detector.mix_share", detector.mix_share),
        *drift[:2],
        Threshold(f"otherwise as {DRIFT_KIND}, on the expectation not adjusted for the mix", None),
    ]
    found = {  # kind: (severity in words, the severities it opens at, thresholds)
        DRIFT_KIND: (
            f"warning; critical from +{_pts(CRITICAL_THRESHOLDS * detector.threshold)}",
            ("warning", "critical"),
            drift,
        ),
        MIX_KIND: ("warning", ("warning",), mix),
        AGREEMENT_KIND: ("warning", ("warning",), _agreement(agreement)),
        SILENT_KIND: ("critical", ("critical",), _input(health, SILENT_KIND)),
        REJECTED_KIND: ("critical", ("critical",), _input(health, REJECTED_KIND)),
        ABSTENTION_KIND: (health.abstention_severity, (health.abstention_severity,), _input(health, ABSTENTION_KIND)),
        CARDINALITY_KIND: ("critical", ("critical",), _cardinality(max_active)),
        SLO_KIND: ("ticket: warning; page: critical", ("warning", "critical"), _slo(slo_rules)),
    }
    return [
        Rule(
            kind,
            MEANINGS[kind],
            text,
            severities,
            all(pages(kind, s) for s in severities),
            tuple(thresholds),
            quality.get(kind, Quality()),
            tuple(r for r in inhibit_rules if kind in r.source_kinds + r.target_kinds),
        )
        for kind in RULE_KINDS
        for text, severities, thresholds in [found[kind]]
    ]
