"""What a notification is: the Alertmanager and webhook payloads of an alert, and the issues they name, pure.

services/alerts/notify/dispatch.py decides what to send and sends it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from services.alerts.explain.figures import dlq_command
from services.alerts.explain.shares import TOP, AlertExplanation, Contribution
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.inhibition import inhibitor_text
from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    AGREEMENT_KIND,
    CARDINALITY_KIND,
    MIX_KIND,
    REJECTED_KIND,
    SILENT_KIND,
    SLO_KIND,
)
from services.alerts.notify.summary import description, figure_text, pct_text, pts_text, summary
from services.core.numbers import thousands, utc_minute

ALERTNAME = "ClaimHallucinationRateRise"
ALERTNAMES = {
    MIX_KIND: "ClaimQuestionMixShift",
    AGREEMENT_KIND: "ClaimVerifierAgreementDrop",  # others: ALERTNAME
    SILENT_KIND: "ClaimRouteSilent",
    REJECTED_KIND: "ClaimEventsRejected",
    ABSTENTION_KIND: "ClaimAbstentionRise",
    CARDINALITY_KIND: "ClaimRouteCardinality",
    SLO_KIND: "ClaimSLOBurn",
}


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
    parts = [f"{pct_text(c.share)} {c.name} ({external_url}/issues/{c.issue_id})" for c in explanation.top(n)]
    other = explanation.other_issues(n)
    if other is not None and abs(other.contribution) >= 0.5:
        parts.append(f"{pct_text(other.share)} {other.name}")
    parts.append(f"{pct_text(explanation.unclustered.share)} unclustered")
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
        out[f"issue_{k}_share"] = pct_text(issue["share"])
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
    inhibitors: Sequence[Alert] = (),
) -> dict[str, Any]:
    """One alert in Alertmanager API v2 form. Firing alerts carry an endsAt a few resends ahead,
    so Alertmanager resolves them by itself if claimwatch stops sending. With an ``explanation``
    the annotations name the top three issues behind the excess (``issue_annotations``); ``owner``: the
    labels that route it to its team (``team``, ``owner``; services/issues/owners.py); ``inhibitors``: the firing
    alerts that inhibit it (a resolution told though inhibited), named in the ``inhibited_by`` annotation."""
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
            **(
                {"inhibited_by": "; ".join(inhibitor_text(a.alert_id, a.kind, a.route) for a in inhibitors)}
                if inhibitors
                else {}
            ),
        },
        "startsAt": (alert.starts_at or alert.pending_since).isoformat(),
        "endsAt": ends.isoformat(),
        "generatorURL": f"{external_url}/alerts/{alert.alert_id}",
    }


def _effect_annotations(alert: Alert) -> dict[str, str]:
    """The expectation and both parts of the rise, as Alertmanager annotations (strings); for a
    dead-letter alert its top rule and the command that lists the route's dead letters."""
    values = {
        "expected": figure_text(alert, alert.expected),
        "expected_basis": alert.expected_basis,
        "mix_effect": pts_text(alert.mix_effect),
        "rate_effect": pts_text(alert.rate_effect),
        "mix_slice": alert.mix_slice,
    }
    if alert.kind == REJECTED_KIND:
        values |= {"top_rule": alert.details.get("top_rule"), "dlq_command": dlq_command(alert.route)}
    return {k: v for k, v in values.items() if v and v != "n/a"}


def webhook_payload(
    alert: Alert,
    reason: str,
    external_url: str,
    explanation: AlertExplanation | None = None,
    inhibitors: Sequence[Alert] = (),
) -> dict[str, Any]:
    state = alert.recorded_state.upper()
    text = f"[{state}] {summary(alert)} — {external_url}/alerts/{alert.alert_id}"
    if inhibitors:
        text += "\nInhibited by " + "; ".join(inhibitor_text(a.alert_id, a.kind, a.route) for a in inhibitors) + "."
    if explanation is not None:
        text += "\n" + explanation_text(explanation, external_url)
    body: dict[str, object] = {"text": text, "reason": reason, "alert": alert.as_dict()}
    if inhibitors:
        body["inhibited_by"] = [a.alert_id for a in inhibitors]
    if explanation is not None:
        body["explanation"] = {**explanation.as_dict(TOP), "issues": top_issues(explanation, external_url)}
    return body
