"""What the alert use cases (services/alerts/oncall/service.py) return: an alert as an engineer sees it now, one
alert in full, a silence, a rule. Defined once (services/core/readmodel.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from services.core.readmodel import Read


class InhibitorRead(Read):
    alert_id: str
    kind: str
    route: str
    starts_at: str | None = Field(description="firing since")


class AlertRead(Read):
    alert_id: str
    route: str
    kind: str
    severity: str
    labels: dict[str, str]
    window: int | None
    pending_since: str | None
    starts_at: str | None
    ends_at: str | None
    acked_at: str | None
    acked_by: str | None
    ack_note: str | None
    rate: float | None
    rate_interval: list[float] | None
    baseline: float | None
    baseline_interval: list[float] | None
    delta: float | None
    claims: int
    onset: str | None
    driving_verdict: str | None
    suspect_changes: list[dict[str, Any]]
    updated_at: str | None
    expected: float | None = Field(
        description="the rate expected over the window at this time of day (while the "
        "route is learning: its recent level); null when the alert has none"
    )
    expected_basis: str = Field(description="what the expectation rests on")
    mix_effect: float | None = Field(description="the part of delta the slice mix explains (more hard questions)")
    rate_effect: float | None = Field(description="the part of delta on the same mix (worse answers)")
    mix_slice: str | None = Field(description="the slice whose share moved most, with its shares")
    unit: Literal["share", "per_minute", "burn"] = Field(
        description=(
            "what rate, expected, baseline and delta measure: a share (of claims, answers or events), events a "
            "minute (route_silent), or an SLO's burn rate (slo_burn: 1 spends its budget exactly over its window)"
        )
    )
    details: dict[str, Any] = Field(
        description=(
            "kind-specific figures: route_silent received, expected_events; events_rejected rejected, received, "
            "top_rule, top_rule_count, sample_reason, sample_source; abstention_rise served_share, "
            "served_share_before, hallucination_rate, hallucination_rate_before, hallucination_fell"
        )
    )
    state: Literal["pending", "firing", "resolved"]
    state_text: str = Field(
        description="the state as people read it: cleared (ended without ever firing) rather "
        "than resolved, and an open alert's ack, silence and inhibition: firing·acked, firing·inhibited"
    )
    acked: bool
    silenced_by: list[str]
    inhibited_by: list[str] = Field(
        default_factory=list,
        description="the firing alerts that inhibit it (notify.inhibit_rules: a route_silent or events_rejected alert "
        "inhibits the same route's drift alerts): it is not notified while they fire; empty once it is resolved",
    )
    inhibitors: list[InhibitorRead] = Field(
        default_factory=list, description="the alerts of inhibited_by, in the same order: their kind, route and start"
    )
    team: str | None = Field(
        None,
        description="the team that owns it: the first [[owners]] rule matching its route and top suspect version, "
        "else the default team; the `team` label it carries to Alertmanager (null where no owners are known)",
    )
    explanation: dict[str, Any] | None = Field(
        None,
        description=(
            "which issues account for the route's excess failing claims in the alert's window (excess = failed - "
            "baseline x claims): the top issues with their share, a representative claim and runbook URL, the other "
            "issues together and the unclustered rest; contributions add up to the excess, shares to 1. While the "
            "window's failing claims are still being clustered: pending (how many) and status (\"clustering N failing "
            'claims of this window"; empty once they are). A list explains its newest alerts only'
        ),
    )


class AlertDetailRead(AlertRead):
    transitions: list[dict[str, Any]]
    calibrated: dict[str, Any] | None = Field(
        description=(
            "rate alerts: whether the rise holds on the rate corrected for the verifier's errors against human labels "
            "(holds: true, false, or null when it cannot tell; status: no labels yet, stale or current; rate, "
            "expected, delta, sensitivity, specificity, labels, false_positive_floor, stale, reasons)"
        )
    )
    runbook: str | None = Field(
        description=(
            "input-health kinds (route_silent, events_rejected, abstention_rise) and slo_burn: the alert's runbook "
            "as Markdown"
        )
    )


class SilenceRead(Read):
    silence_id: str
    matchers: list[str]
    starts_at: str
    ends_at: str
    created_by: str
    comment: str
    ended_by: str = Field(description="who ended it early; empty while it runs or when it ran its course")
    active: bool = Field(description="whether it holds now")


class SilencePreviewRead(Read):
    matchers: list[str] = Field(description="the matchers as a silence would store them")
    alerts: list[AlertRead] = Field(description="the open (pending or firing) alerts they would silence, as listed")
    active: int = Field(description="how many open alerts they match: the length of alerts")
    resolved: int = Field(description="how many resolved alerts they match too (a silence changes nothing for those)")
    searched: int = Field(description="the bound: the newest this many open alerts, and as many resolved, were matched")


class RuleThresholdRead(Read):
    text: str = Field(description="what the rule requires, with the value in force")
    setting: str | None = Field(description="the setting that changes it (TOML path); null: fixed")
    value: object = None


class InhibitionRead(Read):
    source_kinds: list[str] = Field(description="the kinds that inhibit while they fire")
    target_kinds: list[str] = Field(description="the kinds they inhibit")
    equal: list[str] = Field(description="the labels source and target share (route: the same route)")
    text: str = Field(description="the rule in words")
    setting: str = Field(description="where the rules are set (TOML path)")


class RuleRead(Read):
    kind: str
    meaning: str
    severity: str = Field(description="in words, e.g. warning; critical from +4 pts")
    severities: list[str] = Field(description="the severities it opens at")
    pages: bool = Field(description="whether it reaches the pager under dashboards/alertmanager/alertmanager.yml")
    thresholds: list[RuleThresholdRead]
    false_alarms_per_route_per_60_days: float | None = Field(description="as the bench measured it; null: not measured")
    median_delay_minutes: dict[str, float | str] | None = Field(
        description='median minutes from onset to firing per condition (e.g. +3 pts), or "missed" when most '
        "changes were not caught within the bench's horizon; null: not measured"
    )
    false_alarms_per_route_per_90_days: float | None = Field(
        default=None, description="the same, per 90 days: the scale a rule's promise is stated on"
    )
    false_alarms_by_volume: dict[str, float] | None = Field(
        default=None, description="false alarms per route per 90 days at each volume the bench ran; null: not run"
    )
    promised_false_alarms_per_route_per_90d: float | None = Field(
        default=None,
        description="the rate the rule's thresholds derive from (drift.false_alarms_per_route_per_90d); null: the "
        "rule states none",
    )
    measured_by: str | None
    measured_on: str | None
    note: str
    inhibition: list[InhibitionRead] = Field(
        default_factory=list, description="the inhibition rules this kind takes part in, as source or target"
    )


# SLOs (services/alerts/oncall/slos.py)
class BurnRead(Read):
    window: str
    minutes: int
    rate: float | None = Field(description="the burn rate: 1 spends the budget exactly over the SLO's window")
    interval: list[float] | None
    units: int = Field(description="claims (or served answers) in the window")
    reason: str = Field(description="why there is no rate: too little history, or too few units to tell")


class SpenderRead(Read):
    issue_id: str | None = Field(description="null: failing claims in no issue yet")
    name: str
    failed: float = Field(description="its failing claims in the window, weighted as the rates are")
    budget_spent: float | None = Field(description="the share of the whole budget those claims spent")


class RouteSpendRead(Read):
    route: str
    units: float = Field(description="its claims (or served answers) in the window, weighted")
    bad: float = Field(description="the bad ones among them, weighted")
    budget_spent: float | None = Field(description="the share of the whole budget they spent")


class RelatedAlertRead(Read):
    alert_id: str
    route: str
    kind: str
    state: str
    starts_at: str | None
    ends_at: str | None


class SloAlertRead(Read):
    alert_id: str
    severity: str
    state: str
    starts_at: str | None


class SloRead(Read):
    name: str
    routes: str
    sli: str
    objective: float
    window: str
    description: str
    team: str
    at: str | None = Field(description="the minute the figures describe: the newest the store holds")
    history_minutes: int = Field(description="minutes of the SLO's traffic within its window")
    budget_spent: float | None = Field(description="share of the error budget spent over the window (1: all of it)")
    budget_spent_interval: list[float] | None
    budget_remaining: float | None
    bad_share: float | None = Field(description="the SLI's bad share over the window, weighted")
    units: int = Field(description="claims (or served answers) over the window")
    burns: list[BurnRead]
    alerts: list[SloAlertRead]


class SloDetailRead(SloRead):
    spenders: list[SpenderRead] = Field(description="issues by the budget their failing claims spent, most first")
    routes_spending: list[RouteSpendRead] = Field(description="the SLO's routes by the budget they spent, most first")
    drift_alerts: list[RelatedAlertRead] = Field(
        description="drift alerts on the SLO's routes active in the longest burn window (3d): what changed"
    )
    burndown: list[list[Any]] = Field(
        description="[time, budget remaining] from the window's start: the failing units so far against those the "
        "whole window allows"
    )
