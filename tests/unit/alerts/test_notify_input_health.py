"""What a page says about the monitor's own input: a silent route, dead-lettered events, an abstention rise.
Each has its own alertname, says its figures in its unit, and names what to do next."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.alerts.lifecycle.alert import Alert
from services.alerts.notify.payloads import alertmanager_payload, webhook_payload

NOW = datetime(2026, 11, 21, 14, 0, tzinfo=UTC)
URL = "https://claimwatch.example"
GAMING = (
    "the hallucination rate fell from 7.8% to 7.1% at the same time: abstaining may be hiding failures "
    "(the gaming case)"
)


def alert(kind: str, severity: str = "critical", **fields) -> Alert:
    return Alert(
        alert_id="a-1",
        route="billing-faq",
        kind=kind,
        severity=severity,
        labels={"service": "claimwatch"},
        window=45,
        pending_since=NOW,
        starts_at=NOW,
        **fields,
    )


def page(a: Alert) -> dict:
    return alertmanager_payload(a, URL, NOW, timedelta(minutes=5))


def test_a_silent_route_pages_with_events_a_minute():
    silent = alert(
        "route_silent",
        unit="per_minute",
        rate=0.4,
        expected=41.2,
        baseline=41.2,
        delta=-40.8,
        claims=18,
        expected_basis="time of day: this hour's events per minute over 3.0 days",
        details={"received": 18, "expected_events": 1854.0},
    )
    payload = page(silent)
    assert payload["labels"] == {
        "alertname": "ClaimRouteSilent",
        "route": "billing-faq",
        "kind": "route_silent",
        "severity": "critical",
        "service": "claimwatch",
    }
    notes = payload["annotations"]
    assert notes["summary"] == (
        "billing-faq: route silent, 18 events in 45 min vs 1,854 expected (0.4/min vs 41.2/min)"
    )
    assert notes["description"].startswith(
        "Received 18 events in 45 min (0.4/min); expected 1,854 (41.2/min; "
        "time of day: this hour's events per minute over 3.0 days)."
    )
    assert "silenced like any other alert" in notes["description"] and "kind=route_silent" in notes["description"]
    assert notes["expected"] == "41.2/min" and "%" not in notes["summary"] + notes["expected"]
    assert notes["runbook_url"] == f"{URL}/alerts/a-1"
    assert "mix_effect" not in notes and "rate_effect" not in notes


def test_rejected_events_page_with_the_top_rule_a_sample_and_the_dlq_command():
    rejected = alert(
        "events_rejected",
        rate=0.35,
        expected=0.01,
        baseline=0.01,
        delta=0.34,
        claims=1000,
        details={
            "rejected": 350,
            "received": 1000,
            "top_rule": "claims.verdict.unknown",
            "top_rule_count": 341,
            "sample_reason": "claims[0].verdict 'halluc' is not a verdict",
            "sample_source": "claimwatch.verdicts/0/1234",
        },
    )
    payload = page(rejected)
    assert payload["labels"]["alertname"] == "ClaimEventsRejected" and payload["labels"]["severity"] == "critical"
    notes = payload["annotations"]
    assert notes["summary"] == (
        "billing-faq: 35.0% of its events dead-lettered vs 1.0% usually (+34.0 pts; top rule claims.verdict.unknown)"
    )
    assert (
        "350 of 1,000 events dead-lettered in 45 min (35.0%); usually 1.0% (the route's history). "
        "Top rule: claims.verdict.unknown (341 events). Sample: claims[0].verdict 'halluc' is not a verdict at "
        "claimwatch.verdicts/0/1234. List them: claimwatch dlq --route billing-faq"
    ) == notes["description"]
    assert (
        notes["top_rule"] == "claims.verdict.unknown" and notes["dlq_command"] == "claimwatch dlq --route billing-faq"
    )


def test_an_abstention_rise_is_a_warning_that_says_the_gaming_case():
    abstaining = alert(
        "abstention_rise",
        "warning",
        rate=0.31,
        expected=0.12,
        baseline=0.12,
        delta=0.19,
        claims=620,
        details={
            "served_share": 0.62,
            "served_share_before": 0.81,
            "hallucination_rate": 0.071,
            "hallucination_rate_before": 0.078,
            "hallucination_fell": True,
        },
    )
    payload = page(abstaining)
    assert payload["labels"]["alertname"] == "ClaimAbstentionRise" and payload["labels"]["severity"] == "warning"
    notes = payload["annotations"]
    assert notes["summary"] == (
        "billing-faq: abstains on 31.0% of answers vs 12.0% usually (+19.0 pts), serving "
        f"62.0% of answers (81.0% before); {GAMING}"
    )
    assert notes["description"].endswith(f"Served: 62.0% of answers (81.0% before). {GAMING[0].upper()}{GAMING[1:]}.")
    assert GAMING in webhook_payload(abstaining, "new firing", URL)["text"]
    honest = alert(
        "abstention_rise",
        "warning",
        rate=0.31,
        expected=0.12,
        delta=0.19,
        claims=620,
        details={**abstaining.details, "hallucination_rate": 0.09, "hallucination_fell": False},
    )
    notes = page(honest)["annotations"]
    assert "gaming" not in notes["summary"] and "did not fall (7.8% before, 9.0% now)" in notes["description"]
