"""A restart while a route's baseline is still learning (issue 21) resumes the learning state from the checkpoint:
the same hours of history, the same local level, the same input-health history, the same transitions as an
evaluator that never stopped. Real chDB store, the live writer and evaluator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.alerts.detection.expectations import published
from services.alerts.evaluation.evaluator import MOVING_GRACE
from services.alerts.lifecycle.kinds import SILENT_KIND
from services.alerts.lifecycle.records import alert_repository
from services.app.compose import evaluator_for
from services.app.settings import load_settings
from services.client.simulate import Regression, Scenario, generate
from services.contract.decode import Decoder
from services.store.dlq import DeadLetterRepository
from services.store.rates import RateRepository
from services.store.writer import EventWriter

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
MINUTES, CUT, STEP_AT, SILENT_FROM = 300, 150, 200, 260
SETTINGS = load_settings(
    None, {"CLAIMWATCH_DRIFT__WATERMARK_SECONDS": "0"}, {"drift": {"detector": {"min_baseline_claims": 8000}}}
)


def emptied(store):
    """The same store with nothing in it (chDB opens one directory per process)."""
    for row in store.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree'"
    ):
        if row["name"] != "schema_migrations":
            store.command(f"TRUNCATE TABLE {row['name']}")
    return store


def traffic():
    """billing-faq: a new model +7 points from minute 200; hr-policy stops sending from minute 260."""
    demo = Scenario.demo()
    scenario = Scenario(
        routes=(demo.routes[0], demo.routes[2]),
        bad_fraction=0.0,
        duplicate_fraction=0.0,
        late_fraction=0.0,
        regressions=(Regression("billing-faq", STEP_AT, {"model": "gen-2026-11"}, 0.07),),
    )
    decoder = Decoder()
    return [
        e
        for e in (decoder.decode(s.raw) for s in generate(scenario, START, MINUTES, seed=4))
        if not (e.route == "hr-policy" and e.observed_at >= START + timedelta(minutes=SILENT_FROM))
    ]


def run(store, events, cuts):
    """Write and evaluate up to each cut in turn, a fresh evaluator (a restarted process) for each; at the end,
    once more after MOVING_GRACE, when the silent route no longer holds the watermark."""
    transitions, evaluator, done = [], None, START
    for cut in cuts:
        at = START + timedelta(minutes=cut)
        EventWriter(store).write([e for e in events if done <= e.observed_at < at])
        done = at
        evaluator = evaluator_for(
            SETTINGS, RateRepository(store), DeadLetterRepository(store), alert_repository(store), wall_clock=False
        )
        transitions += [(a.route, a.kind, a.recorded_state, a.transition_at) for a in evaluator.evaluate(at)]
    later = done + MOVING_GRACE + timedelta(minutes=1)
    transitions += [(a.route, a.kind, a.recorded_state, a.transition_at) for a in evaluator.evaluate(later)]
    return transitions, evaluator


@pytest.mark.slow
def test_a_restart_mid_learning_resumes_the_learning_state(store):
    events = traffic()
    whole, uninterrupted = run(store, events, [MINUTES])
    parts, resumed = run(emptied(store), events, [CUT, MINUTES])
    assert parts == whole
    kinds = {(route, kind) for route, kind, state, _ in whole if state == "firing"}
    assert kinds == {("billing-faq", "hallucination_rate_rise"), ("hr-policy", SILENT_KIND)}
    for route in ("billing-faq", "hr-policy"):
        a, b = uninterrupted.detectors.regression(route), resumed.detectors.regression(route)
        assert a.learning and b.learning and a.history_hours == b.history_hours == 4  # finished hours
        assert (a.baseline, a.expected_basis) == (b.baseline, b.expected_basis)
        assert a.expected_basis.startswith("learning: 4 h of history")
    # what the overview, `rates` and the route page read: the hours too ("6.0% (learning, 4 h)")
    stored = published(alert_repository(store))
    assert stored["billing-faq"].learning and stored["billing-faq"].history_hours == 4, stored["billing-faq"]
