"""Routes in lockstep (issue 49): a route that joins a fleet late, or is moved into another fleet by its stored
state, goes on exactly as the detector it would be alone; and a route's state is small, in memory and stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.alerts.detection.config import KINDS, DetectorConfig
from services.alerts.detection.detector import DriftDetector, minute_number, slice_sums
from services.alerts.detection.fleet import DriftFleet
from services.alerts.detection.health_engine import InputHealthConfig, InputHealthEngine
from services.alerts.detection.input_health import HealthView, InputHealthDetector, health_input
from services.alerts.evaluation.route_state import decode_state, encode_state
from services.alerts.lifecycle.kinds import INPUT_KINDS
from services.rates.intervals import Counts

T0 = datetime(2026, 11, 2, 6, 0, tzinfo=UTC)
CONFIG = DetectorConfig(min_baseline_claims=2_000)


def stream(seed: int, minutes: int, rise_at: int | None = None, answers: float = 20.0):
    """Minute buckets with two mix slices: a base rate of 8% (easy) and 20% (hard), +6 points from ``rise_at``."""
    rng = np.random.default_rng(seed)
    out = []
    for m in range(minutes):
        slices = {}
        for name, rate in (("query_type=simple stakes=low", 0.08), ("query_type=multi_hop stakes=high", 0.20)):
            n = int(rng.poisson(answers / 2))
            claims = rng.integers(1, 6, n)
            failed = rng.binomial(claims, min(rate + (0.06 if rise_at is not None and m >= rise_at else 0.0), 1.0))
            slices[name] = Counts(
                events=n,
                claims=int(claims.sum()),
                failed=int(failed.sum()),
                claims_sq=int((claims**2).sum()),
                failed_sq=int((failed**2).sum()),
                failed_claims=int((failed * claims).sum()),
                served=n,
                answerable=n,
                abstained=int(rng.binomial(n, 0.05)),
            )
        total = Counts.zero()
        for c in slices.values():
            total = total + c
        out.append((total, slices))
    return out


def figures(view) -> tuple:
    return (
        view.state,
        view.statistic,
        view.rate,
        view.expected,
        view.baseline,
        view.delta,
        view.window_minutes,
        view.onset,
        view.mix_slice,
        view.expected_basis,
    )


def feed(fleet: DriftFleet, rows: dict[int, list], minute: int) -> None:
    x = np.zeros((fleet.n_routes, 20))
    slices = {}
    for row, minutes in rows.items():
        counts, named = minutes[minute]
        x[row] = counts.as_array()
        slices[row] = {k: slice_sums(c) for k, c in named.items()}
    fleet.step(x, minute_number(T0 + timedelta(minutes=minute)), slices)


def same_state(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a == b


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_route_that_joins_late_or_is_moved_by_its_state_is_the_detector_it_would_be_alone(kind):
    config = DetectorConfig(kind=kind, min_baseline_claims=2_000)
    early, late = stream(1, 1700), stream(2, 1700, rise_at=1500)
    join, move = 137, 1530  # mid-hour, and mid-rise (a pending run is held)
    alone = DriftDetector(config)
    fleet = DriftFleet(config)
    fleet.add_rows(1)
    other = DriftFleet(config)  # another fleet, 11 steps behind in its own count, at the same minute when moved
    other.add_rows(1)
    for m in range(1700):
        if m == join:
            fleet.add_rows(1)
        if m == move:
            state = decode_state(encode_state(fleet.row_state(1)))
            other.load_rows([int(other.add_rows(1)[0])], [state], minute_number(T0 + timedelta(minutes=m - 1)))
        feed(fleet, {0: early, **({1: late} if m >= join else {})}, m)
        if m >= 11:
            feed(other, {0: early, **({1: late} if m >= move else {})}, m)
        elif m == 10:
            other.last_minute = minute_number(T0 + timedelta(minutes=m))
        if m >= join:
            counts, named = late[m]
            alone.update(counts, T0 + timedelta(minutes=m), named)
            assert figures(fleet.regression_view(1)) == figures(alone.regression), m
            assert figures(fleet.mix_shift_view(1)) == figures(alone.mix_shift), m
        if m >= move:
            assert figures(other.regression_view(1)) == figures(alone.regression), m
    assert "firing" in {fleet.regression_view(1).state, alone.mix_shift.state} or kind != "cusum"
    assert same_state(other.row_state(1), alone.row_state(0))


@pytest.mark.slow
def test_an_input_health_route_that_joins_late_or_is_moved_is_the_detector_it_would_be_alone():
    minutes = stream(3, 1700)
    silent_from, join, move = 1600, 200, 1590
    fed = [
        (counts if m < silent_from else Counts.zero(), 2 if m % 7 == 0 else 0) for m, (counts, _) in enumerate(minutes)
    ]
    alone = InputHealthDetector()
    engine, other = InputHealthEngine(InputHealthConfig(), 1), InputHealthEngine(InputHealthConfig(), 1)
    for m in range(1700):
        minute = minute_number(T0 + timedelta(minutes=m))
        if m == join:
            engine.add_rows(1)
        if m == move:
            state = decode_state(encode_state(engine.row_state(1)))
            other.load_rows([int(other.add_rows(1)[0])], [state], minute - 1)
        x = np.zeros((engine.n_routes, 7))
        x[0] = health_input(*fed[(m + 500) % 1700])
        if m >= join:
            x[1] = health_input(*fed[m])
            alone.update(*fed[m], T0 + timedelta(minutes=m))
        engine.step(x, minute)
        if m >= move:
            other.step(x[: other.n_routes] if other.n_routes == 2 else x[:1], minute)
        elif m >= 23:
            other.step(x[:1], minute)
        for view in (HealthView(engine, 1), *((HealthView(other, 1),) if m >= move else ())):
            if m >= join:
                assert [view.view(k) for k in INPUT_KINDS] == [alone.view(k) for k in INPUT_KINDS], m
    assert alone.state(INPUT_KINDS[0]) == "firing"  # the route fell silent and both copies said so at once


@pytest.mark.slow
def test_a_routes_state_is_small_in_memory_and_smaller_stored():
    """A week of history at 3 answers a minute in two mix slices: about 62 KB of arrays (the pickled detectors
    were about 320 KB whatever their history), and under 10 KB stored: 10,000 such routes in about 100 MB."""
    detector, health = DriftDetector(CONFIG), InputHealthDetector()
    for m, (counts, slices) in enumerate(stream(4, 7 * 1440 + 90, answers=3.0)):
        at = T0 + timedelta(minutes=m)
        detector.update(counts, at, slices)
        health.update(counts, 0, at)
    state = {"drift": detector.row_state(0), "health": health.engine.row_state(0)}

    def nbytes(value) -> int:
        if isinstance(value, dict):
            return sum(nbytes(v) for v in value.values())
        if isinstance(value, list):
            return sum(nbytes(v) for v in value)
        return value.nbytes if isinstance(value, np.ndarray) else 8

    assert nbytes(state) <= 64_000
    assert len(encode_state(state)) <= 10_000
    assert same_state(decode_state(encode_state(state)), state)
