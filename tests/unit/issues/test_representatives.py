"""Which alert's window an issue's representative traces come from, when the issue has members in two."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from clustering.issue import IssueRecord
from services.alerts.lifecycle.alert import Alert
from services.issues.service import IssuesService

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
ISSUE = IssueRecord(
    "iss-numbers",
    "invented numbers",
    ("numbers",),
    "default",
    NOW - timedelta(days=1),
    NOW,
    routes={"billing-faq": 900, "parcel-status": 40},
)


def firing(alert_id: str, route: str, key: str, value: str) -> Alert:
    return Alert(
        alert_id=alert_id,
        route=route,
        kind="hallucination_rate_rise",
        severity="warning",
        labels={},
        window=30,
        pending_since=NOW - timedelta(minutes=40),
        starts_at=NOW - timedelta(minutes=35),
        onset=NOW - timedelta(minutes=45),
        suspect_changes=({"key": key, "value": value},),
    )


BILLING = firing("a-2", "billing-faq", "model", "gen-2026-11")
PARCEL = firing("a-1", "parcel-status", "corpus", "carrier-docs@2026-11-15")


class Members:
    """The issue is most of billing-faq's failing claims, and a small share of parcel-status's larger volume."""

    def __init__(self, parcel_status: dict[str, int]):
        self.on_route = {"billing-faq": {"iss-numbers": 600, "iss-other": 100}, "parcel-status": parcel_status}

    versions = {"billing-faq": {"model": "gen-2026-11"}, "parcel-status": {"corpus": "carrier-docs@2026-11-15"}}

    def members_on_route(self, route, since, until):
        return self.on_route[route]

    def members_in_window(self, issue_id, route, since, until, limit):
        n = min(limit, self.on_route[route][issue_id])
        return [
            {
                "claim_key": f"{route}-{i}:0",
                "event_id": f"{route}-{i}",
                "trace_id": f"t-{route}-{i}",
                "route": route,
                "versions": self.versions[route],
                "question": f"q{i}",
            }
            for i in range(n)
        ]

    def members(self, issue_id, limit):  # the whole issue, most typical first: before either alert
        return [
            {**m, "versions": {"model": "gen-2026-10"}, "route": "whole-issue"}
            for m in self.members_in_window(issue_id, "billing-faq", None, None, limit)
        ]


class Open:
    def __init__(self, *alerts: Alert):
        self.alerts = alerts

    def open_alerts(self):
        return list(self.alerts)


def representatives(*alerts: Alert, parcel_status: dict[str, int], explainer=None) -> list[dict]:
    service = IssuesService(
        Members(parcel_status), rates=None, alerts=Open(*alerts), clock=lambda: NOW, explainer=explainer
    )
    return service.representatives(ISSUE)


class Explainer:
    """Each alert's issues with their share of its excess, as services.alerts.explain.shares gives them."""

    shares = {
        "billing-faq": {"iss-numbers": 0.45, "iss-other": 0.30},
        "parcel-status": {"iss-stale": 0.70, "iss-numbers": 0.25},
    }

    def explain(self, alert, now):
        return SimpleNamespace(
            issues=[SimpleNamespace(issue_id=i, share=v) for i, v in self.shares[alert.route].items()]
        )


def test_they_come_from_the_alert_the_issue_explains_most_not_the_one_it_has_most_claims_in():
    for order in ((BILLING, PARCEL), (PARCEL, BILLING)):
        chosen = representatives(*order, parcel_status={"iss-numbers": 700, "iss-stale": 5000})  # 12%
        assert chosen and {m["route"] for m in chosen} == {"billing-faq"}, order


def test_with_an_explainer_they_come_from_the_alert_whose_excess_the_issue_leads():
    """The issue leads billing-faq's excess and is second on parcel-status's, though it is a larger share of
    parcel-status's clustered failing claims: the alert page names it first on billing-faq, so does this."""
    for order in ((BILLING, PARCEL), (PARCEL, BILLING)):
        chosen = representatives(*order, parcel_status={"iss-numbers": 700, "iss-stale": 100}, explainer=Explainer())
        assert chosen and {m["route"] for m in chosen} == {"billing-faq"}, order


def test_an_alert_where_the_issue_is_only_the_routes_usual_noise_is_passed_over():
    chosen = representatives(PARCEL, parcel_status={"iss-numbers": 30, "iss-stale": 2000})  # 1.5%
    assert chosen and {m["route"] for m in chosen} == {"whole-issue"}
