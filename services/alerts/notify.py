"""What a notification says: the Alertmanager and webhook payloads of an alert, pure.

services/alerts/dispatch.py decides what to send and sends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from services.alerts.explain import TOP, AlertExplanation, Contribution
from services.alerts.figures import (
    REFUSED_REMEDY,
    counted,
    dlq_command,
    figure,
    hallucination_sentence,
    other_sources,
    refused_sentence,
    served_sentence,
)
from services.alerts.lifecycle import (
    ABSTENTION_KIND,
    AGREEMENT_KIND,
    CARDINALITY_KIND,
    MIX_KIND,
    REJECTED_KIND,
    SILENT_KIND,
    Alert,
)
from services.core.numbers import thousands, utc_minute
from services.rates.intervals import Interval

ALERTNAME = "ClaimHallucinationRateRise"
ALERTNAMES = {
    MIX_KIND: "ClaimQuestionMixShift",
    AGREEMENT_KIND: "ClaimVerifierAgreementDrop",  # others: ALERTNAME
    SILENT_KIND: "ClaimRouteSilent",
    REJECTED_KIND: "ClaimEventsRejected",
    ABSTENTION_KIND: "ClaimAbstentionRise",
    CARDINALITY_KIND: "ClaimRouteCardinality",
}


def _pct(x: float | None) -> str:
    return figure(x, missing="n/a")


def _pts(x: float | None) -> str:
    return figure(x, change=True, missing="n/a")


def _fig(alert: Alert, x: float | None, change: bool = False) -> str:
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
            f"{_count(d.get('expected_events'))} expected ({_fig(alert, alert.rate)} vs {_fig(alert, alert.expected)})"
        )
    if alert.kind == REJECTED_KIND:
        top = f"; top rule {d['top_rule']}" if d.get("top_rule") else ""
        return (
            f"{alert.route}: {_fig(alert, alert.rate)} of its events dead-lettered vs {_fig(alert, alert.expected)} "
            f"usually ({_fig(alert, alert.delta, True)}{top})"
        )
    served = served_sentence(d)
    fell = f"; {hallucination_sentence(d)}" if d.get("hallucination_fell") else ""
    return (
        f"{alert.route}: abstains on {_fig(alert, alert.rate)} of answers vs {_fig(alert, alert.expected)} usually "
        f"({_fig(alert, alert.delta, True)})" + (f", serving {served}" if served else "") + fell
    )


def _input_description(alert: Alert) -> str:
    d, basis = alert.details, alert.expected_basis or "the route's history"
    if alert.kind == SILENT_KIND:
        return (
            f"Received {_count(d.get('received'))} events in {alert.window} min ({_fig(alert, alert.rate)}); expected "
            f"{_count(d.get('expected_events'))} ({_fig(alert, alert.expected)}; {basis}). No events means no rates: "
            "every other alert on this route is blind until it sends again. Check the verifier and producer, "
            "consumer lag and recent deploys. A retired route is silenced like any other alert (match route and "
            f"kind={SILENT_KIND}; the runbook has the command)."
        )
    if alert.kind == REJECTED_KIND:
        parts = [
            f"{_count(d.get('rejected'))} of {_count(d.get('received'))} events dead-lettered in {alert.window} min "
            f"({_fig(alert, alert.rate)}); usually {_fig(alert, alert.expected)} ({basis})."
        ]
        if d.get("top_rule"):
            parts.append(f"Top rule: {d['top_rule']} ({_count(d.get('top_rule_count'))} events).")
        if d.get("sample_reason"):
            parts.append(
                f"Sample: {d['sample_reason']}" + (f" at {d['sample_source']}." if d.get("sample_source") else ".")
            )
        return " ".join(parts + [f"List them: {dlq_command(alert.route)}"])
    parts = [
        f"Abstained on {_fig(alert, alert.rate)} of {alert.claims:,} {counted(alert.kind)} in {alert.window} min; "
        f"usually {_fig(alert, alert.expected)} ({basis})."
    ]
    if served_sentence(d):
        parts.append(f"Served: {served_sentence(d)}.")
    sentence = hallucination_sentence(d)
    if sentence:
        parts.append(f"{sentence[0].upper()}{sentence[1:]}.")
    return " ".join(parts)


def summary(alert: Alert) -> str:
    if alert.kind == CARDINALITY_KIND:
        return f"every route: {refused_sentence(alert.details)} in {alert.window} min"
    if alert.kind in (SILENT_KIND, REJECTED_KIND, ABSTENTION_KIND):
        return _input_summary(alert)
    if alert.kind == AGREEMENT_KIND:
        return (
            f"{alert.route}: the verifier agrees with human labels on {_pct(alert.rate)} of {alert.claims} recent "
            f"labels vs {_pct(alert.baseline)} before ({_pts(alert.delta)}); calibrated rates may be off"
        )
    expected = alert.tested_against
    head = (
        f"{alert.route}: claim hallucination rate {_pct(alert.rate)} vs {_pct(expected)} expected ({_pts(alert.delta)}"
    )
    if alert.kind == MIX_KIND:
        return f"{head}, mostly the question mix: {alert.mix_slice or 'a slice'})"
    if alert.rate_effect is not None and alert.mix_effect is not None:
        return f"{head}: {_pts(alert.rate_effect)} on the same questions, {_pts(alert.mix_effect)} from the mix)"
    return head + ")"


def effects(alert: Alert) -> str:
    """The rise split into its mix and rate effects, one sentence."""
    if alert.mix_effect is None or alert.rate_effect is None:
        return ""
    mix_slice = f"; the slice that moved most: {alert.mix_slice}" if alert.mix_slice else ""
    return (
        f"Of the {_pts(alert.delta)} rise, {_pts(alert.mix_effect)} is mix (more of the questions that fail "
        f"more often{mix_slice}) and {_pts(alert.rate_effect)} is rate (worse on the same questions)."
    )


def description(alert: Alert) -> str:
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
        return f"[{_pct(i.lo)}, {_pct(i.hi)}]" if i else ""

    parts = [
        f"Rate {_pct(alert.rate)} {lo_hi(alert.rate_interval)} over {alert.window} min and {alert.claims} claims; "
        f"expected {_pct(alert.expected)} ({alert.expected_basis or 'trailing level'}); "
        f"baseline {_pct(alert.baseline)} {lo_hi(alert.baseline_interval)}.",
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
            f"{_pct(top.get('rate_before'))} -> {_pct(top.get('rate_after'))}."
        )
    return " ".join(p for p in parts if p)


def _claim_text(c: Contribution, limit: int = 300) -> str:
    text = " ".join(str((c.claim or {}).get("text") or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def top_issues(explanation: AlertExplanation | None, external_url: str, n: int = TOP) -> list[dict[str, Any]]:
    """The ``n`` issues behind most of the alert's excess: id, name, share, a representative claim, runbook URL."""
    if explanation is None:
        return []
    return [
        {
            "issue_id": c.issue_id,
            "name": c.name,
            "share": None if c.share is None else round(c.share, 4),
            "failed": c.failed,
            "contribution": round(c.contribution, 2),
            "claim": _claim_text(c),
            "trace_id": (c.claim or {}).get("trace_id"),
            "runbook_url": f"{external_url}/issues/{c.issue_id}?alert={explanation.alert_id}",
        }
        for c in explanation.top(n)
    ]


def explanation_text(explanation: AlertExplanation, external_url: str, n: int = TOP) -> str:
    """One paragraph: the excess, then each top issue's share with its runbook, the rest, the unclustered."""
    parts = [f"{_pct(c.share)} {c.name} ({external_url}/issues/{c.issue_id})" for c in explanation.top(n)]
    other = explanation.other_issues(n)
    if other is not None and abs(other.contribution) >= 0.5:
        parts.append(f"{_pct(other.share)} {other.name}")
    parts.append(f"{_pct(explanation.unclustered.share)} unclustered")
    pending = f" Still {explanation.status}; the issues fill in within seconds." if explanation.status else ""
    return (
        f"{thousands(explanation.excess)} failing claims more than expected ({thousands(explanation.failed)} of "
        f"{thousands(explanation.claims)} claims since {utc_minute(explanation.start)}): "
        + "; ".join(parts)
        + "."
        + pending
    )


def issue_annotations(explanation: AlertExplanation | None, external_url: str, n: int = TOP) -> dict[str, str]:
    """Alertmanager annotations (strings) for the top issues: ``explanation`` and ``issue_<k>``,
    ``issue_<k>_share``, ``issue_<k>_claim``, ``issue_<k>_runbook_url`` for k = 1..n."""
    if explanation is None:
        return {}
    out = {"explanation": explanation_text(explanation, external_url, n)}
    for k, issue in enumerate(top_issues(explanation, external_url, n), 1):
        out[f"issue_{k}"] = issue["name"]
        out[f"issue_{k}_share"] = _pct(issue["share"])
        out[f"issue_{k}_claim"] = issue["claim"]
        out[f"issue_{k}_runbook_url"] = issue["runbook_url"]
    return out


def alertmanager_payload(
    alert: Alert,
    external_url: str,
    now: datetime,
    resend_every: timedelta,
    explanation: AlertExplanation | None = None,
    owner: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One alert in Alertmanager API v2 form. Firing alerts carry an endsAt a few resends ahead,
    so Alertmanager resolves them by itself if claimwatch stops sending. With an ``explanation``
    the annotations name the top three issues behind the excess (``issue_annotations``); ``owner``: the
    labels that route it to its team (``team``, ``owner``; services/issues/owners.py)."""
    ends = min(alert.ends_at, now) if alert.ends_at else now + 4 * resend_every
    return {
        "labels": {
            "alertname": ALERTNAMES.get(alert.kind, ALERTNAME),
            "route": alert.route,
            "kind": alert.kind,
            "severity": alert.severity,
            **{k: v for k, v in alert.labels.items() if k not in ("alertname", "route", "kind", "severity")},
            **(owner or {}),
        },
        "annotations": {
            "summary": summary(alert),
            "description": description(alert),
            "runbook_url": f"{external_url}/alerts/{alert.alert_id}",
            **_effect_annotations(alert),
            **issue_annotations(explanation, external_url),
        },
        "startsAt": (alert.starts_at or alert.pending_since).isoformat(),
        "endsAt": ends.isoformat(),
        "generatorURL": f"{external_url}/alerts/{alert.alert_id}",
    }


def _effect_annotations(alert: Alert) -> dict[str, str]:
    """The expectation and both parts of the rise, as Alertmanager annotations (strings); for a
    dead-letter alert its top rule and the command that lists the route's dead letters."""
    values = {
        "expected": _fig(alert, alert.expected),
        "expected_basis": alert.expected_basis,
        "mix_effect": _pts(alert.mix_effect),
        "rate_effect": _pts(alert.rate_effect),
        "mix_slice": alert.mix_slice,
    }
    if alert.kind == REJECTED_KIND:
        values |= {"top_rule": alert.details.get("top_rule"), "dlq_command": dlq_command(alert.route)}
    return {k: v for k, v in values.items() if v and v != "n/a"}


def webhook_payload(
    alert: Alert, reason: str, external_url: str, explanation: AlertExplanation | None = None
) -> dict[str, Any]:
    state = alert.recorded_state.upper()
    text = f"[{state}] {summary(alert)} — {external_url}/alerts/{alert.alert_id}"
    if explanation is not None:
        text += "\n" + explanation_text(explanation, external_url)
    body: dict[str, object] = {"text": text, "reason": reason, "alert": alert.as_dict()}
    if explanation is not None:
        body["explanation"] = {**explanation.as_dict(TOP), "issues": top_issues(explanation, external_url)}
    return body
