"""The drift benchmark's yardstick (bench/oracle.py): a CUSUM that knows the true rate. At one false alarm per route
per 60 days its delays are issue 55's (about 9 minutes for +3 points and 4 for +5 at 60 answers a minute), and a
simulation of that very CUSUM agrees with Siegmund's approximation (services/alerts/detection/run_length.py)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.oracle import MINUTES_PER_DAY, Oracle, average_run_length, design_effect, minute_sd
from services.alerts.detection.run_length import exact_run_length, threshold

# bench/drift.py's traffic: 60 answers a minute, 1 to 8 claims each (uniform), intra-answer correlation 0.1, 8%.
CLAIMS = range(1, 9)
MEAN, MEAN_SQ = float(np.mean(CLAIMS)), float(np.mean([m * m for m in CLAIMS]))
DEFF = design_effect(MEAN, MEAN_SQ, 0.1)
ORACLE = Oracle(0.08, 60 * MEAN, DEFF, 60 * MINUTES_PER_DAY)


def test_the_limit_is_the_issues_about_9_minutes_for_3_points_and_4_for_5():
    assert DEFF == pytest.approx(1 + (25.5 / 4.5 - 1) * 0.1)
    assert minute_sd(0.08, 60 * MEAN, DEFF) == pytest.approx(0.02, abs=0.001)  # "about 2 points"
    assert ORACLE.delay(0.03) == pytest.approx(9.3, abs=0.3)
    assert ORACLE.delay(0.05) == pytest.approx(3.7, abs=0.3)
    # Less traffic, a slower limit: at a tenth of the volume +3 points takes several times as long.
    assert Oracle(0.08, 6 * MEAN, DEFF, 60 * MINUTES_PER_DAY).delay(0.03) > 5 * ORACLE.delay(0.03)
    # A daily volume swing slows the average: the trough's half volume costs more than the peak saves.
    swinging = Oracle(0.08, 60 * MEAN, DEFF, 60 * MINUTES_PER_DAY, volume_swing=0.5)
    assert swinging.delay(0.03) > ORACLE.delay(0.03) * 1.05


def test_the_threshold_gives_the_stated_in_control_run_length():
    quiet = 0.8  # a small reference: Siegmund's approximation is the run length
    h = float(threshold(quiet, 60 * MINUTES_PER_DAY)) / quiet  # in the increments' standard deviations
    assert float(average_run_length(-quiet / 2, h)) == pytest.approx(60 * MINUTES_PER_DAY, rel=1e-6)
    assert float(average_run_length(0.0, h)) == pytest.approx((h + 1.166) ** 2)
    assert exact_run_length(-quiet / 2, h) == pytest.approx(60 * MINUTES_PER_DAY, rel=0.03)
    for busy in (1.5, 2.5, 3.6):  # up to 500 answers a minute: Siegmund overstates by up to 1.4x, corrected
        h = float(threshold(busy, 60 * MINUTES_PER_DAY)) / busy
        assert float(average_run_length(-busy / 2, h)) > 60 * MINUTES_PER_DAY * (1.1 if busy > 2 else 1.0)
        assert exact_run_length(-busy / 2, h) == pytest.approx(60 * MINUTES_PER_DAY, rel=0.03)


def test_a_simulated_cusum_detects_as_fast_as_the_approximation_says():
    rng = np.random.default_rng(55)
    sd = float(minute_sd(0.08, 60 * MEAN, DEFF))
    shift = 0.03
    k = shift / sd / 2
    h = float(threshold(2 * k, 60 * MINUTES_PER_DAY)) / (2 * k)
    delays = []
    for _ in range(2000):
        s, t = 0.0, 0
        while s < h:
            t += 1
            z = rng.normal(shift / sd, 1.0)  # the minute's rate after the change, standardized
            s = max(0.0, s + z - k)
        delays.append(t)
    assert np.mean(delays) == pytest.approx(ORACLE.delay(shift), rel=0.12)
