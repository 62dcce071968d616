"""Inhibition rules, as Alertmanager has them: while a source alert fires, the target alerts that share its ``equal``
labels are inhibited. They keep their state (the evaluator's transitions and stored alerts do not change); they are
shown as inhibited (``firing·inhibited``, inhibited by the source) and are not notified, as a silenced alert is not.

The rules are a setting (``[[notify.inhibit_rules]]``); the default one: a ``route_silent`` or ``events_rejected``
alert inhibits the same route's drift alerts, whose figures mean little while the route's input is missing or
rejected. When the source resolves, a target still firing and inhibited by nothing else is notified then
(services/alerts/notify/plan.py), as Alertmanager does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import (
    AGREEMENT_KIND,
    CARDINALITY_KIND,
    EVALUATED_KINDS,
    KINDS,
    REJECTED_KIND,
    SILENT_KIND,
    SLO_KIND,
)
from services.alerts.lifecycle.status import alert_state

SETTING = "notify.inhibit_rules"  # where the rules are set (TOML path)
KNOWN_KINDS = (*EVALUATED_KINDS, AGREEMENT_KIND, CARDINALITY_KIND, SLO_KIND)
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _or(words: Sequence[str], joiner: str) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {joiner} {words[-1]}"


class InhibitRule(BaseModel):
    """While an alert of one of ``source_kinds`` fires, the alerts of ``target_kinds`` whose ``equal`` labels
    (route, severity, service or an extra label) have the same values are inhibited. An alert never inhibits itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source_kinds: tuple[str, ...] = Field(min_length=1, description="the kinds that inhibit while they fire")
    target_kinds: tuple[str, ...] = Field(min_length=1, description="the kinds they inhibit")
    equal: tuple[str, ...] = Field(
        ("route",), min_length=1, description="the labels source and target must share (route: the same route)"
    )

    @field_validator("source_kinds", "target_kinds")
    @classmethod
    def _known_kinds(cls, kinds: tuple[str, ...]) -> tuple[str, ...]:
        for kind in kinds:
            if kind not in KNOWN_KINDS:
                raise ValueError(f"{kind!r} is not an alert kind; one of {', '.join(KNOWN_KINDS)}")
        return kinds

    @field_validator("equal")
    @classmethod
    def _label_names(cls, labels: tuple[str, ...]) -> tuple[str, ...]:
        for name in labels:
            if not _LABEL.fullmatch(name):
                raise ValueError(f"label name {name!r} must match [a-zA-Z_][a-zA-Z0-9_]*, such as route")
        return labels

    @model_validator(mode="after")
    def _not_both(self) -> InhibitRule:
        if both := sorted(set(self.source_kinds) & set(self.target_kinds)):
            raise ValueError(f"{both[0]} is both a source and a target kind: an alert would inhibit its own kind")
        return self

    def inhibits(self, source: Alert, target: Alert) -> bool:
        """Whether ``source``, were it firing, inhibits ``target`` under this rule (labels only, no time)."""
        if source.alert_id == target.alert_id or source.kind not in self.source_kinds:
            return False
        if target.kind not in self.target_kinds:
            return False
        theirs, ours = source.match_labels, target.match_labels
        return all(theirs.get(name, "") == ours.get(name, "") for name in self.equal)  # missing: "", as Alertmanager

    @property
    def text(self) -> str:
        """The rule in words: ``a firing route_silent or events_rejected alert inhibits the hallucination_rate_rise
        and mix_shift alerts with the same route``."""
        return (
            f"a firing {_or(self.source_kinds, 'or')} alert inhibits the {_or(self.target_kinds, 'and')} alerts "
            f"with the same {_or(self.equal, 'and')}: they show as inhibited and are not notified"
        )


INHIBIT_RULES = (InhibitRule(source_kinds=(SILENT_KIND, REJECTED_KIND), target_kinds=KINDS, equal=("route",)),)


@dataclass(frozen=True)
class Inhibition:
    """The rules in force over the alerts that fire now: which of them inhibit a given alert."""

    rules: tuple[InhibitRule, ...] = ()
    firing: tuple[Alert, ...] = ()  # the alerts firing now of a source kind: the only ones that inhibit

    @classmethod
    def at(cls, rules: Iterable[InhibitRule], alerts: Iterable[Alert], now: datetime) -> Inhibition:
        """The ``rules`` over ``alerts`` (the open alerts, say) as of ``now``: a pending or resolved one inhibits
        nothing."""
        rules = tuple(rules)
        sources = {k for r in rules for k in r.source_kinds}
        firing = {a.alert_id: a for a in alerts if a.kind in sources and alert_state(a, now) == "firing"}
        return cls(rules, tuple(firing.values()))

    def sources(self, alert: Alert) -> tuple[Alert, ...]:
        """The firing alerts that inhibit ``alert``, in the order given."""
        return tuple(s for s in self.firing if any(r.inhibits(s, alert) for r in self.rules))

    def inhibited_by(self, alert: Alert) -> tuple[str, ...]:
        return tuple(s.alert_id for s in self.sources(alert))

    def released(self, resolved: Alert, alerts: Iterable[Alert], now: datetime) -> list[Alert]:
        """The alerts among ``alerts`` firing at ``now`` that ``resolved`` (a source that has just resolved)
        inhibited and that nothing inhibits any longer: they are notified now."""
        return [
            a
            for a in alerts
            if alert_state(a, now) == "firing"
            and any(r.inhibits(resolved, a) for r in self.rules)
            and not self.sources(a)
        ]


def inhibitor_text(alert_id: str, kind: str, route: str) -> str:
    """How an inhibiting alert is named beside the alert it inhibits (notifications, the CLI):
    ``a-… (route_silent on billing-faq)``."""
    return f"{alert_id} ({kind} on {route})"


def inhibited_fields(inhibitors: Sequence[Alert]) -> dict[str, list[Any]]:
    """What an alert's read model says of the alerts that inhibit it: ``inhibited_by`` (their ids) and
    ``inhibitors`` (each one's id, kind, route and start)."""
    return {
        "inhibited_by": [a.alert_id for a in inhibitors],
        "inhibitors": [
            {
                "alert_id": a.alert_id,
                "kind": a.kind,
                "route": a.route,
                "starts_at": None if a.starts_at is None else a.starts_at.isoformat(),
            }
            for a in inhibitors
        ],
    }


NO_INHIBITION = Inhibition()

__all__ = [
    "INHIBIT_RULES",
    "NO_INHIBITION",
    "SETTING",
    "InhibitRule",
    "Inhibition",
    "inhibited_fields",
    "inhibitor_text",
]
