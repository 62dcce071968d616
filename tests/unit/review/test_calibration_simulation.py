"""Coverage of the calibrated rate by simulation, through the product's Calibrator on in-memory data.

The world (tests/support/calibration_world.py): three routes whose verifiers err asymmetrically and
differently (Se/Sp 0.70/0.97, 0.92/0.90, 0.80/0.99), claims of one answer correlated, review labels sampled
stratified by the verifier's verdict with the product's allocation, two reviewers each wrong 5% of the time
and an adjudicator (as wrong) settling their disputes. The interval must cover the route's true rate.

500 seeded repetitions take about 6 s. The bootstrap uses 250 draws here instead of the product's 1000 to keep
it fast: at 1000 draws the same repetitions cover equally (94.9% over all routes against 94.9%).
"""
from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from services.review.calibration import Calibrator
from tests.support.calibration_world import NOW, World, raw_interval

REPETITIONS = 500


@pytest.fixture(scope="module")
def coverage():
    world = World(answers=1000, labels=160)
    rng = np.random.default_rng(16)
    calibrated = {t.route: 0 for t in world.routes}
    raw = dict(calibrated)
    for rep in range(REPETITIONS):
        traffic, claims = world.draw(rng)
        rates = Calibrator(30, timedelta(days=90), n_boot=250, seed=rep).calibrate_all(traffic, claims, NOW)
        for t, truth in zip(traffic, world.routes):
            found = rates[t.route]
            assert not found.pooled and not found.stale, found.reasons  # 160 labels a route: each stands alone
            lo, hi = found.interval
            calibrated[t.route] += lo <= truth.true_rate <= hi
            raw_lo, raw_hi = raw_interval(t)
            raw[t.route] += raw_lo <= truth.true_rate <= raw_hi
    return ({r: n / REPETITIONS for r, n in calibrated.items()}, {r: n / REPETITIONS for r, n in raw.items()})


def test_the_calibrated_interval_covers_the_true_rate_95_percent_of_the_time(coverage):
    calibrated, _ = coverage
    assert all(0.93 <= share <= 0.97 for share in calibrated.values()), calibrated


def test_the_raw_interval_misses_when_the_verifier_errs_asymmetrically(coverage):
    _, raw = coverage
    assert all(share < 0.5 for share in raw.values()), raw
