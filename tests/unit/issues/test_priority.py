"""Which issues drive a firing alert: their share of its excess, when an explainer measures it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.alerts.explain.shares import AlertExplanation, Contribution
from services.alerts.lifecycle.alert import Alert
from services.issues.priority import DRIVING_SHARE, gather, is_escalating

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
FIRING = Alert(
    alert_id="a-1",
    route="billing",
    kind="hallucination_rate_rise",
    severity="warning",
    labels={},
    window=30,
    pending_since=NOW - timedelta(minutes=20),
    starts_at=NOW - timedelta(minutes=15),
    rate=0.15,
    baseline=0.05,
    delta=0.10,
    claims=1000,
)


class Members:
    """Both issues have failing claims on the route in the window."""

    def member_hours(self, since, until):
        return {}

    def members_on_route(self, route, since, until):
        return {"iss-cause": 90, "iss-usual": 50}


def explanation(excess_claims: int) -> AlertExplanation:
    failed = 50 + excess_claims
    cause = Contribution("iss-cause", 90, 0.0, float(excess_claims), 1.0 if excess_claims else None)
    usual = Contribution("iss-usual", 50, 50.0, 0.0, 0.0 if excess_claims else None)
    return AlertExplanation(
        "a-1",
        "billing",
        NOW - timedelta(minutes=45),
        NOW,
        1000,
        failed,
        0.05,
        (cause, usual),
        Contribution(None, 0, 0.0, 0.0, 0.0),
    )


def test_with_an_explainer_only_the_issues_behind_the_excess_drive_the_alert():
    signals = gather(Members(), [FIRING], NOW, lambda alert, now: explanation(90))
    assert signals.drives("iss-cause") == [{"alert_id": "a-1", "route": "billing", "claims": 90}]
    assert signals.drives("iss-usual") == []  # the route's usual failures, at its baseline: no share


def test_an_issue_drives_from_driving_share_of_the_excess_not_below_it():
    excess = 200.0  # 250 failing claims against 50 expected

    def shares(at: float, below: float):
        return lambda alert, now: AlertExplanation(
            "a-1",
            "billing",
            NOW - timedelta(minutes=45),
            NOW,
            1000,
            250,
            0.05,
            (
                Contribution("iss-at", 40, 0.0, at * excess, at),
                Contribution("iss-below", 30, 0.0, below * excess, below),
            ),
            Contribution(None, 0, 0.0, 0.0, 0.0),
        )

    signals = gather(Members(), [FIRING], NOW, shares(DRIVING_SHARE, DRIVING_SHARE * 0.99))
    assert signals.drives("iss-at") == [{"alert_id": "a-1", "route": "billing", "claims": 40}]
    assert signals.drives("iss-below") == []  # a small but real part of the excess: the route's noise


def test_without_a_measurable_excess_any_claims_on_the_route_count():
    signals = gather(Members(), [FIRING], NOW, lambda alert, now: explanation(0))
    assert signals.drives("iss-cause") and signals.drives("iss-usual")
    assert gather(Members(), [FIRING], NOW).drives("iss-usual")  # no explainer at all


def test_escalating_needs_a_history_to_rise_against():
    assert is_escalating({0: 30, 1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2})
    assert not is_escalating({0: 30})  # brand new: its state says new
    assert not is_escalating({0: 9, 1: 1})  # too few to be news
    assert not is_escalating({0: 30, **dict.fromkeys(range(1, 7), 12)})  # 2.5x its usual hour
