"""The evaluator's state per route (issue 49), on the real chDB engine with the live writer.

It was one checkpoint value with every route's pickled detectors (about 320 KB a route): past about 1,500 routes
it passed ClickHouse's 1 GiB limit, every evaluation failed and alerting went blind. Now each route's state is
its own rows, a pass is one insert, and a restart (or a pass that failed) goes on exactly as an evaluator that
never stopped."""

from __future__ import annotations

import math
from datetime import timedelta

import orjson
import pytest

from services.alerts.evaluation.evaluator import PASS_ROUTE_MINUTES
from services.alerts.evaluation.stored_state import SNAPSHOT_MINUTES
from services.alerts.lifecycle.records import alert_repository
from services.app.compose import evaluator_for
from services.contract.decode import Decoder
from services.core.errors import StoreError
from services.store.dlq import DeadLetterRepository
from services.store.rates import RateRepository
from services.store.writer import EventWriter
from tests.support.regression_world import START, billing_regression, prompt_settings
from tests.unit.alerts.test_evaluator_restart import emptied
from tests.unit.alerts.test_fleet import same_state

BIGGEST_VALUE = 64 << 10  # no value the evaluator stores may be larger, however many routes there are


def quiet_routes(n: int, minutes: int, every: int = 1) -> list:
    """``n`` routes answering once every ``every`` minutes, one failed claim of two in a seventh of the answers."""
    decoder = Decoder()
    return [
        decoder.decode(
            orjson.dumps(
                {
                    "schema": "claimwatch.verdict/v1",
                    "event_id": f"q{i}-{m}",
                    "trace_id": f"q{i}-{m}",
                    "route": f"quiet-{i:05d}",
                    "observed_at": (START + timedelta(minutes=m, seconds=i % 60)).isoformat(),
                    "answer": {"action": "served"},
                    "versions": {"model": "m1"},
                    "query": {"query_type": "lookup", "stakes": "low", "answerable": True},
                    "claims": [
                        {"verdict": "supported"},
                        {"verdict": "contradicted" if (i + m) % 7 == 0 else "supported"},
                    ],
                }
            )
        )
        for m in range(0, minutes, every)
        for i in range(n)
    ]


def biggest_value(store) -> int:
    """The longest value in any table the evaluator writes."""
    return max(
        store.query("SELECT max(length(body)) AS n FROM alert_route_state")[0]["n"],
        store.query("SELECT max(length(basis)) AS n FROM route_expectations")[0]["n"],
    )


@pytest.mark.slow
def test_five_thousand_routes_are_stored_a_route_at_a_time_in_one_insert_a_pass(store):
    routes, minutes = 5_000, 12
    EventWriter(store).write(quiet_routes(routes, minutes))
    store.command("SYSTEM STOP MERGES alert_route_state")  # so each insert stays a part of its own
    settings = prompt_settings()
    evaluator = evaluator_for(
        settings, RateRepository(store), DeadLetterRepository(store), alert_repository(store), wall_clock=False
    )
    evaluator.evaluate(START + timedelta(minutes=6))
    evaluator.evaluate(START + timedelta(minutes=minutes))

    assert biggest_value(store) <= BIGGEST_VALUE
    stored = store.query(
        "SELECT uniqExact(route) AS routes, sum(length(body)) AS bytes, count() AS n "
        "FROM alert_route_state WHERE route != ''"
    )[0]
    assert stored["routes"] == routes and stored["bytes"] <= routes * 10_000
    assert stored["n"] <= routes * (SNAPSHOT_MINUTES + 1)  # a snapshot and a ring of inputs per route, no more
    assert store.query("SELECT uniqExact(route) AS n FROM route_expectations")[0]["n"] == routes
    parts = store.query("SELECT count() AS n FROM system.parts WHERE table = 'alert_route_state' AND active")[0]["n"]
    span = PASS_ROUTE_MINUTES // routes  # minutes a pass reads
    passes = math.ceil(7 / span) + math.ceil((minutes - 7) / span)  # minutes 0-6, then 7-11
    assert parts == passes  # each pass one insert: its rows are stored together or not at all

    resumed = evaluator_for(
        settings, RateRepository(store), DeadLetterRepository(store), alert_repository(store), wall_clock=False
    )
    resumed.restore()
    assert len(resumed.detectors) == routes and resumed.last_minute == START + timedelta(minutes=minutes - 1)
    for route in ("quiet-00000", "quiet-02718", "quiet-04999"):
        assert same_state(resumed.detectors.state(route), evaluator.detectors.state(route))


def traffic() -> list:
    """billing-faq's regression (a new model +7 points from minute 200) beside 300 quiet routes."""
    return sorted(billing_regression() + quiet_routes(300, 260, every=2), key=lambda e: e.observed_at)


def run(store, events, cuts, restart: bool, alerts=None):
    """Write and evaluate up to each cut in turn: one evaluator, or a fresh one (a restarted process) each time."""
    transitions, evaluator, done = [], None, START
    for cut in cuts:
        at = START + timedelta(minutes=cut)
        EventWriter(store).write([e for e in events if done <= e.observed_at < at])
        done = at
        if evaluator is None or restart:
            evaluator = evaluator_for(
                prompt_settings(),
                RateRepository(store),
                DeadLetterRepository(store),
                alerts or alert_repository(store),
                wall_clock=False,
            )
        transitions += [
            (a.alert_id, a.route, a.kind, a.recorded_state, a.transition_at) for a in evaluator.evaluate(at)
        ]
    return transitions, {route: evaluator.detectors.state(route) for route in evaluator.detectors.rows}


CUTS = [130, 171, 203, 209, 222, 260]  # restarts at minutes no snapshot falls on: each route replays its inputs


@pytest.mark.slow
def test_a_restarted_evaluator_goes_on_exactly_as_one_that_never_stopped(store):
    events = traffic()
    whole, whole_states = run(store, events, CUTS, restart=False)
    parts, part_states = run(emptied(store), events, CUTS, restart=True)
    assert parts == whole
    assert [(kind, state) for _, route, kind, state, _ in parts if route == "billing-faq"] == [
        ("hallucination_rate_rise", "pending"),
        ("hallucination_rate_rise", "firing"),
    ]
    alert_id = parts[-1][0]
    assert [t["state"] for t in alert_repository(store).transitions(alert_id)] == ["pending", "firing"]
    assert part_states.keys() == whole_states.keys() and len(part_states) == 301
    assert all(same_state(part_states[r], whole_states[r]) for r in whole_states)
    assert biggest_value(store) <= BIGGEST_VALUE


class Refusing:
    """The alert repository with a store that refuses one write: the first firing transition's."""

    def __init__(self, store):
        self.inner, self.refused = alert_repository(store), False

    def record_transition(self, alert):
        if alert.recorded_state == "firing" and not self.refused:
            self.refused = True
            raise StoreError("Code: 241. DB::Exception: Memory limit exceeded")
        return self.inner.record_transition(alert)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.slow
def test_a_pass_that_fails_midway_is_evaluated_again_from_the_stored_state(store):
    """A store error after some minutes were stepped: the next evaluation resumes from what the store holds,
    instead of stepping those minutes twice (which refused every later evaluation)."""
    events = traffic()
    whole, whole_states = run(store, events, CUTS, restart=False)
    alerts = Refusing(emptied(store))
    evaluator = evaluator_for(
        prompt_settings(), RateRepository(store), DeadLetterRepository(store), alerts, wall_clock=False
    )
    EventWriter(store).write(events)
    transitions, failed = [], 0
    for cut in [*CUTS[:-1], CUTS[-1], CUTS[-1]]:
        try:
            transitions += [
                (a.alert_id, a.route, a.kind, a.recorded_state, a.transition_at)
                for a in evaluator.evaluate(START + timedelta(minutes=cut))
            ]
        except StoreError:
            failed += 1
    assert alerts.refused and failed == 1
    assert [t for t in transitions if t[3] == "firing"] == [t for t in whole if t[3] == "firing"]
    assert [t["state"] for t in alert_repository(store).transitions(whole[-1][0])] == ["pending", "firing"]
    assert all(same_state(evaluator.detectors.state(r), whole_states[r]) for r in whole_states)
