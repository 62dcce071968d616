"""What a notification says of an alert in words: its summary and description, each figure as notifications write
it (``n/a`` when unknown). services/alerts/notify/payloads.py puts them into the payloads.
"""

from __future__ import annotations

from services.alerts.explain.figures import (
    REFUSED_REMEDY,
    counted,
    dlq_command,
    figure,
    hallucination_sentence,
    other_sources,
    refused_sentence,
    served_sentence,
)
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    AGREEMENT_KIND,
    CARDINALITY_KIND,
    MIX_KIND,
    REJECTED_KIND,
    SILENT_KIND,
    SLO_KIND,
)
from services.rates.intervals import Interval


def pct_text(x: float | None) -> str:
    """A share as a notification writes it: ``12.5%``, or ``n/a`` when unknown."""
    return figure(x, missing="n/a")


def pts_text(x: float | None) -> str:
    """A change of share as a notification writes it: ``+2.0 pts``, or ``n/a`` when unknown."""
    return figure(x, change=True, missing="n/a")


def figure_text(alert: Alert, x: float | None, change: bool = False) -> str:
    """One of the alert's own figures (rate, expected, baseline, delta) in its unit."""
    return figure(x, alert.unit, change, missing="n/a")


def _count(x: object) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def _input_summary(alert: Alert) -> str:
    """route_silent, events_rejected, abstention_rise: one line with the figures that made it fire."""
    d = alert.details
    if alert.kind == SILENT_KIND:
        return (
            f"{alert.route}: route silent, {_count(d.get('received'))} events in {alert.window} min vs "
            f"{_count(d.get('expected_events'))} expected ({figure_text(alert, alert.rate)} vs "
            f"{figure_text(alert, alert.expected)})"
        )
    if alert.kind == REJECTED_KIND:
        top = f"; top rule {d['top_rule']}" if d.get("top_rule") else ""
        return (
            f"{alert.route}: {figure_text(alert, alert.rate)} of its events dead-lettered vs "
            f"{figure_text(alert, alert.expected)} usually ({figure_text(alert, alert.delta, True)}{top})"
        )
    served = served_sentence(d)
    fell = f"; {hallucination_sentence(d)}" if d.get("hallucination_fell") else ""
    return (
        f"{alert.route}: abstains on {figure_text(alert, alert.rate)} of answers vs "
        f"{figure_text(alert, alert.expected)} usually ({figure_text(alert, alert.delta, True)})"
        + (f", serving {served}" if served else "")
        + fell
    )


def _input_description(alert: Alert) -> str:
    d, basis = alert.details, alert.expected_basis or "the route's history"
    if alert.kind == SILENT_KIND:
        return (
            f"Received {_count(d.get('received'))} events in {alert.window} min ({figure_text(alert, alert.rate)}); "
            f"expected {_count(d.get('expected_events'))} ({figure_text(alert, alert.expected)}; {basis}). "
            "No events means no rates: "
            "every other alert on this route is blind until it sends again. Check the verifier and producer, "
            "consumer lag and recent deploys. A retired route is silenced like any other alert (match route and "
            f"kind={SILENT_KIND}; the runbook has the command)."
        )
    if alert.kind == REJECTED_KIND:
        parts = [
            f"{_count(d.get('rejected'))} of {_count(d.get('received'))} events dead-lettered in {alert.window} min "
            f"({figure_text(alert, alert.rate)}); usually {figure_text(alert, alert.expected)} ({basis})."
        ]
        if d.get("top_rule"):
            parts.append(f"Top rule: {d['top_rule']} ({_count(d.get('top_rule_count'))} events).")
        if d.get("sample_reason"):
            parts.append(
                f"Sample: {d['sample_reason']}" + (f" at {d['sample_source']}." if d.get("sample_source") else ".")
            )
        return " ".join(parts + [f"List them: {dlq_command(alert.route)}"])
    parts = [
        f"Abstained on {figure_text(alert, alert.rate)} of {alert.claims:,} {counted(alert.kind)} in "
        f"{alert.window} min; "
        f"usually {figure_text(alert, alert.expected)} ({basis})."
    ]
    if served_sentence(d):
        parts.append(f"Served: {served_sentence(d)}.")
    sentence = hallucination_sentence(d)
    if sentence:
        parts.append(f"{sentence[0].upper()}{sentence[1:]}.")
    return " ".join(parts)


def _slo_summary(alert: Alert) -> str:
    d = alert.details
    return (
        f"SLO {d.get('slo', '?')} ({alert.route}): error budget burning {figure_text(alert, alert.rate)} its pace "
        f"over {alert.window} min ({d.get('rule') or alert.expected_basis})"
    )


def _slo_description(alert: Alert) -> str:
    d = alert.details
    burns = d.get("burn") or {}
    by_window = ", ".join(
        f"{name} {figure_text(alert, b.get('rate'))}" for name, b in burns.items() if b.get("rate") is not None
    )
    left = d.get("budget_remaining")
    budget = "" if left is None else f" Budget left over the SLO's window: {pct_text(left)}."
    return (
        f"{_slo_summary(alert)}. Objective: {pct_text(d.get('objective'))} good."
        + (f" Burn by window: {by_window}." if by_window else "")
        + budget
        + f" See it in full: claimwatch slo show {d.get('slo', '')}"
    )


def summary(alert: Alert) -> str:
    if alert.kind == SLO_KIND:
        return _slo_summary(alert)
    if alert.kind == CARDINALITY_KIND:
        return f"every route: {refused_sentence(alert.details)} in {alert.window} min"
    if alert.kind in (SILENT_KIND, REJECTED_KIND, ABSTENTION_KIND):
        return _input_summary(alert)
    if alert.kind == AGREEMENT_KIND:
        return (
            f"{alert.route}: the verifier agrees with human labels on {pct_text(alert.rate)} of {alert.claims} recent "
            f"labels vs {pct_text(alert.baseline)} before ({pts_text(alert.delta)}); calibrated rates may be off"
        )
    expected = alert.expected
    head = (
        f"{alert.route}: claim hallucination rate {pct_text(alert.rate)} vs {pct_text(expected)} expected "
        f"({pts_text(alert.delta)}"
    )
    if alert.kind == MIX_KIND:
        return f"{head}, mostly the question mix: {alert.mix_slice or 'a slice'})"
    if alert.rate_effect is not None and alert.mix_effect is not None:
        return (
            f"{head}: {pts_text(alert.rate_effect)} on the same questions, {pts_text(alert.mix_effect)} from the mix)"
        )
    return head + ")"


def effects(alert: Alert) -> str:
    """The rise split into its mix and rate effects, one sentence."""
    if alert.mix_effect is None or alert.rate_effect is None:
        return ""
    mix_slice = f"; the slice that moved most: {alert.mix_slice}" if alert.mix_slice else ""
    return (
        f"Of the {pts_text(alert.delta)} rise, {pts_text(alert.mix_effect)} is mix (more of the questions that fail "
        f"more often{mix_slice}) and {pts_text(alert.rate_effect)} is rate (worse on the same questions)."
    )


def description(alert: Alert) -> str:
    if alert.kind == SLO_KIND:
        return _slo_description(alert)
    if alert.kind == CARDINALITY_KIND:
        others = other_sources(alert.details)
        also = [f"Also from: {'; '.join(others)}."] if others else []
        return " ".join([f"{summary(alert)}.", *also, REFUSED_REMEDY, f"List them: {dlq_command('')}"])
    if alert.kind in (SILENT_KIND, REJECTED_KIND, ABSTENTION_KIND):
        return _input_description(alert)
    if alert.kind == AGREEMENT_KIND:
        versions = ", ".join(f"{s.get('value')}" for s in alert.suspect_changes)
        return f"{summary(alert)}. {alert.expected_basis}." + (
            f" New verifier versions among the labels: {versions}." if versions else ""
        )

    def lo_hi(i: Interval | None) -> str:
        return f"[{pct_text(i.lo)}, {pct_text(i.hi)}]" if i else ""

    parts = [
        f"Rate {pct_text(alert.rate)} {lo_hi(alert.rate_interval)} over {alert.window} min and {alert.claims} claims; "
        f"expected {pct_text(alert.expected)} ({alert.expected_basis or 'trailing level'}); "
        f"baseline {pct_text(alert.baseline)} {lo_hi(alert.baseline_interval)}.",
        effects(alert),
    ]
    if alert.onset:
        parts.append(f"Estimated onset {alert.onset.isoformat()}.")
    if alert.driving_verdict:
        parts.append(f"Driven by '{alert.driving_verdict}' claims.")
    if alert.suspect_changes:
        top = alert.suspect_changes[0]
        parts.append(
            f"First suspect: {top.get('key')}={top.get('value')} ({top.get('kind')} change), rate "
            f"{pct_text(top.get('rate_before'))} -> {pct_text(top.get('rate_after'))}."
        )
    return " ".join(p for p in parts if p)
