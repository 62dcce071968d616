"""The alert rules state their own quality (issue 21, part D).

For each kind the evaluators open: what it means, its severity and whether it pages, the thresholds
in force (read from the configs the evaluators run with, each with the setting that changes it), and
the false-alarm rate and detection delay the benches measured (services/alerts/oncall/quality.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.health_engine import InputHealthConfig
from services.alerts.detection.slo_burn import DEFAULT_RULES, BurnRule
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
from services.alerts.oncall.thresholds import (
    AgreementRule,
    Threshold,
    agreement_thresholds,
    cardinality_thresholds,
    drift_thresholds,
    input_thresholds,
    pts,
    share,
    slo_thresholds,
)
from services.ingest.routes import MAX_ACTIVE

RULE_KINDS = KINDS + (AGREEMENT_KIND,) + INPUT_KINDS + (CARDINALITY_KIND, SLO_KIND)  # every kind an evaluator opens


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
class Rule:
    kind: str
    meaning: str
    severity: str  # in words: "warning", "critical", or "warning; critical from …"
    severities: tuple[str, ...]  # the severities it opens at
    pages: bool
    thresholds: tuple[Threshold, ...]
    quality: Quality = field(default_factory=Quality)
    promised: float | None = None  # false alarms per route per 90 days its thresholds derive from; None: none stated
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
            false_alarms_per_route_per_90_days=self.quality.false_alarms_per_route_per_90_days,
            promised_false_alarms_per_route_per_90d=self.promised,
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
    drift = drift_thresholds(detector, route_thresholds)
    stated = detector.kind == "cusum" and detector.cusum.h is None
    promised = detector.false_alarms_per_route_per_90d if stated else None
    mix = [
        Threshold(f"≥ {share(detector.mix_share)} of the rise is mix", "drift.detector.mix_share", detector.mix_share),
        *drift[:2],
        Threshold(f"otherwise as {DRIFT_KIND}, on the expectation not adjusted for the mix", None),
    ]
    found = {  # kind: (severity in words, the severities it opens at, thresholds)
        DRIFT_KIND: (
            f"warning; critical from +{pts(CRITICAL_THRESHOLDS * detector.threshold)}",
            ("warning", "critical"),
            drift,
        ),
        MIX_KIND: ("warning", ("warning",), mix),
        AGREEMENT_KIND: ("warning", ("warning",), agreement_thresholds(agreement)),
        SILENT_KIND: ("critical", ("critical",), input_thresholds(health, SILENT_KIND)),
        REJECTED_KIND: ("critical", ("critical",), input_thresholds(health, REJECTED_KIND)),
        ABSTENTION_KIND: (
            health.abstention_severity,
            (health.abstention_severity,),
            input_thresholds(health, ABSTENTION_KIND),
        ),
        CARDINALITY_KIND: ("critical", ("critical",), cardinality_thresholds(max_active)),
        SLO_KIND: ("ticket: warning; page: critical", ("warning", "critical"), slo_thresholds(slo_rules)),
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
            promised if kind in (DRIFT_KIND, MIX_KIND) else None,
            tuple(r for r in inhibit_rules if kind in r.source_kinds + r.target_kinds),
        )
        for kind in RULE_KINDS
        for text, severities, thresholds in [found[kind]]
    ]
