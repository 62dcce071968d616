"""Multi-window, multi-burn-rate alerts on an SLO (the SRE workbook's, as Sloth and Pyrra generate them): a rule fires
when the burn rate exceeds its factor over both its long window (enough budget spent to matter) and its short one
(still burning now, so the alert resolves soon after the burn stops).

By default: **page** above 14.4 over 1h and 5m (2% of a 28-day budget in an hour), or above 6 over 6h and 30m (5% in
six hours); **ticket** above 1 over 3d and 6h (10% in three days). The short window confirms the long one, so an
alert fires at the minute both hold, with no pending time, and resolves at the minute no rule holds.

Pure: the burns of a minute in (services/rates/slo.py), the alert out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.alerts.lifecycle.alert import Alert, make_alert_id
from services.alerts.lifecycle.kinds import SERVICE_LABELS, SLO_KIND
from services.alerts.lifecycle.transitions import merge
from services.rates.slo import BURN_WINDOWS, Budget, Burn, Slo

SEVERITIES = {"page": "critical", "ticket": "warning"}  # a rule's severity as the alert's label (Alertmanager routes)


@dataclass(frozen=True)
class BurnRule:
    severity: str  # page or ticket
    factor: float
    long: str  # a BURN_WINDOWS name
    short: str

    def holds(self, burns: Mapping[str, Burn]) -> bool:
        return burns[self.long].exceeds(self.factor) and burns[self.short].exceeds(self.factor)

    def __str__(self) -> str:
        return f"burn above {self.factor:g}x over both {self.long} and {self.short}"


DEFAULT_RULES = (
    BurnRule("page", 14.4, "1h", "5m"),
    BurnRule("page", 6.0, "6h", "30m"),
    BurnRule("ticket", 1.0, "3d", "6h"),
)


def check_rules(rules: Sequence[BurnRule]) -> None:
    """ValueError for a rule no SLO alert could use."""
    for rule in rules:
        if rule.severity not in SEVERITIES:
            raise ValueError(f"{rule.severity} rule: severity must be one of {', '.join(SEVERITIES)}")
        for window in (rule.long, rule.short):
            if window not in BURN_WINDOWS:
                raise ValueError(f"{rule}: window {window!r} is not one of {', '.join(BURN_WINDOWS)}")
        if BURN_WINDOWS[rule.short] >= BURN_WINDOWS[rule.long]:
            raise ValueError(f"{rule}: the short window must be shorter than the long one")
        if rule.factor <= 0:
            raise ValueError(f"{rule}: the factor must be above 0")


def firing_rule(burns: Mapping[str, Burn], rules: Sequence[BurnRule] = DEFAULT_RULES) -> BurnRule | None:
    """The rule that holds at this minute, pages before tickets (the first listed of each); None if none does."""
    holding = [r for r in rules if r.holds(burns)]
    return min(holding, key=lambda r: (r.severity != "page", rules.index(r)), default=None)


def burn_details(burns: Mapping[str, Burn], budget: Budget | None) -> dict[str, Any]:
    """What an SLO alert carries of its minute: every burn window (rate, interval, units, or why none) and the
    budget over the SLO's window."""
    out: dict[str, Any] = {
        "burn": {
            name: {
                "rate": b.rate,
                "interval": None if b.interval is None else [b.interval.lo, b.interval.hi],
                "units": b.units,
                "reason": b.reason,
            }
            for name, b in burns.items()
        }
    }
    if budget is not None:
        out["budget_spent"] = budget.spent
        out["budget_remaining"] = budget.remaining
    return out


def slo_alert(
    slo: Slo,
    rule: BurnRule,
    burns: Mapping[str, Burn],
    minute: datetime,
    labels: Mapping[str, str],
    previous: Alert | None,
    budget: Budget | None = None,
) -> Alert:
    """The SLO's alert at ``minute`` under ``rule``: the open one carried on (its id, start and ack), or a new one."""
    long = burns[rule.long]
    details = {
        "slo": slo.name,
        "rule": f"{rule.severity}: {rule}",
        "objective": slo.objective,
        **burn_details(burns, budget),
    }
    observed = Alert(
        alert_id=make_alert_id(f"slo:{slo.name}", SLO_KIND, minute),
        route=slo.routes,
        kind=SLO_KIND,
        severity=SEVERITIES[rule.severity],
        labels={**SERVICE_LABELS, **labels, "slo": slo.name},
        window=long.minutes,
        pending_since=minute,
        starts_at=minute,
        rate=long.rate,
        rate_interval=long.interval,
        expected=rule.factor,
        delta=None if long.rate is None else long.rate - rule.factor,
        claims=long.units,
        unit="burn",
        updated_at=minute,
        expected_basis=f"the {rule.severity} rule: {rule}",
        details=details,
    )
    return merge(previous, observed)
