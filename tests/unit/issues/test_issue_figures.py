"""Which open alert an issue's figures are measured against, route by route (services/issues/figures.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.alerts.explain.explainer import explainable
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    AGREEMENT_KIND,
    DRIFT_KIND,
    MIX_KIND,
    REJECTED_KIND,
    SILENT_KIND,
)
from services.issues.figures import newest_alert_per_route

T0 = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


def alert(alert_id: str, kind: str, minutes: int, firing: bool = True, route: str = "billing-faq", **fields) -> Alert:
    at = T0 + timedelta(minutes=minutes)
    return Alert(
        alert_id=alert_id,
        route=route,
        kind=kind,
        severity="critical",
        labels={},
        window=30,
        pending_since=at,
        starts_at=at if firing else None,
        **fields,
    )


def test_a_silent_route_or_an_agreement_drop_newer_than_the_regression_does_not_replace_it():
    """The demo's minute after a page: billing-faq's verifier stopped after its regression fired, and the runbook
    measured the issue against the silent-route alert: "a baseline of 4268.3%" (42.7 events a minute)."""
    regression = alert("a-regression", DRIFT_KIND, 0, rate=0.12, baseline=0.07)
    later = [
        alert("a-silent", SILENT_KIND, 40, rate=0.0, baseline=42.7, unit="per_minute"),
        alert("a-rejected", REJECTED_KIND, 41),
        alert("a-abstains", ABSTENTION_KIND, 42),
        alert("a-agreement", AGREEMENT_KIND, 43, rate=0.81, baseline=0.93),
    ]
    assert newest_alert_per_route([regression, *later]) == {"billing-faq": regression}
    assert newest_alert_per_route(later) == {}


def test_the_alert_the_reader_came_from_wins_over_a_newer_or_firing_one_on_its_route():
    mix = alert("a-mix", MIX_KIND, 0, firing=False)
    regression = alert("a-regression", DRIFT_KIND, 10)
    other = alert("a-parcels", DRIFT_KIND, 5, route="parcel-status")
    assert newest_alert_per_route([mix, regression, other]) == {"billing-faq": regression, "parcel-status": other}
    assert newest_alert_per_route([mix, regression, other], "a-mix") == {"billing-faq": mix, "parcel-status": other}
    assert newest_alert_per_route([mix, regression], "a-silent-elsewhere") == {"billing-faq": regression}


def test_only_alerts_on_the_claims_failure_rate_are_explained_by_failing_claims():
    assert [
        k
        for k in (DRIFT_KIND, MIX_KIND, SILENT_KIND, REJECTED_KIND, ABSTENTION_KIND, AGREEMENT_KIND)
        if explainable(alert("a", k, 0))
    ] == [DRIFT_KIND, MIX_KIND]
