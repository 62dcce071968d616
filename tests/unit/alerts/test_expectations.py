"""Worst means furthest above the expectation: routes with a firing alert first, then by how far the rate's 95%
interval lies above what the drift detector expects, then routes it cannot judge yet (by rate). And an alert that
ended without ever firing reads `cleared`, one that fired `resolved`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.alerts.detection.detector import DriftDetector
from services.alerts.detection.expectations import (
    NO_HISTORY,
    NOT_EVALUATED,
    Expectation,
    compare,
    publish,
    published,
    sort_routes,
)
from services.alerts.explain.figures import expected_text
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.status import alert_state, state_text
from services.rates.intervals import Counts


def entry(route: str, rate: float | None, interval: tuple[float, float] | None, claims: int = 1000) -> dict:
    return {"route": route, "rate": rate, "interval": list(interval) if interval else None, "claims": claims}


def test_a_firing_route_comes_first_then_the_surest_rise_over_its_expectation():
    rows = [
        compare(entry("legal-terms", 0.133, (0.12, 0.146)), Expectation(0.131, "time of day", False)),  # normal for it
        compare(entry("parcel-status", 0.097, (0.085, 0.11)), Expectation(0.046, "time of day", False), ["a-parcel"]),
        compare(entry("billing-faq", 0.09, (0.07, 0.11)), Expectation(0.05, "time of day", False)),  # +2.0 sure
        compare(entry("hr-policy", 0.12, (0.04, 0.20)), Expectation(0.07, "time of day", False)),  # -3.0 sure: noisy
        compare(entry("new-route", 0.30, (0.2, 0.4)), Expectation(None, NO_HISTORY, True)),
        compare(entry("quiet-route", None, None, claims=0), None),
    ]
    assert [r["route"] for r in sort_routes(rows, "priority")] == [
        "parcel-status",
        "billing-faq",
        "legal-terms",
        "hr-policy",
        "new-route",
        "quiet-route",
    ]
    assert [r["route"] for r in sort_routes(rows, "rate")][:3] == ["new-route", "legal-terms", "hr-policy"]
    with pytest.raises(ValueError, match="priority, rate"):
        sort_routes(rows, "delta")


def test_the_delta_is_the_rate_minus_the_expectation_and_none_is_invented():
    row = compare(entry("parcel-status", 0.097, (0.085, 0.11)), Expectation(0.046, "time of day", False), ["a-1"])
    assert row["delta"] == pytest.approx(0.051) and row["delta_lo"] == pytest.approx(0.039)
    assert row["firing_alerts"] == ["a-1"] and expected_text(row) == "4.6%"
    learning = compare(entry("new-route", 0.3, (0.2, 0.4)), Expectation(None, NO_HISTORY, True))
    assert learning["delta"] is None and learning["delta_lo"] is None and expected_text(learning) == "learning"
    # a learning level is what the detector compares with (and its alerts carry), marked as not yet a time-of-day
    # expectation: the rates table read "learning" beside an alert that said 6.7% expected
    level = compare(entry("young-route", 0.09, (0.07, 0.11)), Expectation(0.05, "learning: 5 h of history", True, 5))
    assert expected_text(level) == "5.0% (learning, 5 h)"
    unseen = compare(entry("other", 0.1, (0.05, 0.15)), None)
    assert unseen["expected_basis"] == NOT_EVALUATED and expected_text(unseen) == "—" and not unseen["firing_alerts"]


class Stored:
    """Expectations as the store keeps them: a row per route, the newest write wins."""

    def __init__(self):
        self.rows: dict[str, dict] = {}
        self.writes: list[set[str]] = []

    def expectations(self, routes=None):
        return {r: e for r, e in self.rows.items() if routes is None or r in routes}

    def save_expectations(self, minute, expectations):
        self.rows.update(expectations)
        self.writes.append(set(expectations))


def test_the_published_expectation_is_the_detectors_own_and_only_changes_are_written():
    start = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    detector, fresh = DriftDetector(), DriftDetector()
    for minute in range(150):  # two finished hours: a learning level
        detector.update(Counts.from_row({"events": 30, "claims": 100, "failed": 8}), start + timedelta(minutes=minute))
    fresh.update(Counts.from_row({"events": 30, "claims": 100, "failed": 8}), start)
    stored = Stored()
    assert published(stored) == {}
    now = {"billing-faq": Expectation.of(detector.regression), "new-route": Expectation.of(fresh.regression)}
    publish(stored, now, start + timedelta(minutes=149))
    found = published(stored)
    assert (
        found["billing-faq"].expected == pytest.approx(detector.regression.expected) and found["billing-faq"].learning
    )
    assert found["billing-faq"].basis == detector.regression.expected_basis
    assert found["new-route"] == Expectation(None, NO_HISTORY, True, 0)
    assert (
        found["billing-faq"].history_hours == 2
        and expected_text(compare(entry("billing-faq", 0.1, None), found["billing-faq"])) == "8.0% (learning, 2 h)"
    )
    assert published(stored, ["new-route"]) == {"new-route": found["new-route"]}
    for minute in range(150, 181):  # into the next hour: the level moves
        detector.update(Counts.from_row({"events": 30, "claims": 100, "failed": 30}), start + timedelta(minutes=minute))
    later = {**now, "billing-faq": Expectation.of(detector.regression)}
    assert later["billing-faq"] != now["billing-faq"]
    publish(stored, later, start + timedelta(minutes=180), now)
    assert stored.writes[-1] == {"billing-faq"}  # the unchanged route is not written again


# -- cleared and resolved ----------------------------------------------------------------------------
AT = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


def alert(**times) -> Alert:
    return Alert(
        alert_id="a-1",
        route="parcel-status",
        kind="hallucination_rate_rise",
        severity="warning",
        labels={},
        window=30,
        pending_since=AT,
        **times,
    )


@pytest.mark.parametrize(
    "times, acked, silenced, text",
    [
        ({"ends_at": AT + timedelta(minutes=5)}, False, False, "cleared"),  # only ever pending
        ({"starts_at": AT + timedelta(minutes=2), "ends_at": AT + timedelta(minutes=9)}, False, False, "resolved"),
        ({"starts_at": AT + timedelta(minutes=2)}, True, False, "firing·acked"),
        ({"starts_at": AT + timedelta(minutes=2)}, True, True, "firing·acked·silenced"),
        ({}, False, False, "pending"),
    ],
)
def test_an_alert_that_never_fired_is_cleared_not_resolved(times, acked, silenced, text):
    a = alert(**times)
    state = alert_state(a, AT + timedelta(minutes=10))
    assert state in ("pending", "firing", "resolved")  # the machine state stays what the API always said
    assert state_text(state, a.starts_at is not None, acked, silenced) == text


def test_the_store_keeps_how_many_hours_a_learning_route_has(store):
    """The overview, `rates` and the route page say "8.0% (learning, 2 h)": the hours survive the store (without them in
    the store, every surface read a bare "learning")."""
    from services.alerts.lifecycle.records import alert_repository

    alerts, minute = alert_repository(store), datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    learning, learned = Expectation(0.08, "a local level", True, 2, 0.0275), Expectation(0.05, "time of day", False)
    quiet = Expectation(0.05, "time of day", False, None, 0.049)  # 5 answers a minute: it sees +4.9 points in an hour
    publish(alerts, {"billing-faq": learning, "hr-policy": learned, "quiet": quiet}, minute)
    found = published(alerts)
    assert found == {"billing-faq": learning, "hr-policy": learned, "quiet": quiet}
    text = {route: expected_text(compare(entry(route, 0.1, None), found[route])) for route in found}
    assert text == {
        "billing-faq": "8.0% (learning, 2 h; sees +2.8 pts in 1 h)",
        "hr-policy": "5.0%",
        "quiet": "5.0% (sees +4.9 pts in 1 h)",
    }
    publish(alerts, {"billing-faq": Expectation(0.08, "a local level", True, 3)}, minute + timedelta(hours=1))
    assert published(alerts, ["billing-faq"])["billing-faq"].history_hours == 3  # the newest row wins
