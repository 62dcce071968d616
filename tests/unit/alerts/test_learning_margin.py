"""A young route's margin is the one its hours earn, and a quiet route says how large a rise it can see (issue 55).

While under a day of history the expectation is the last two hours' level, which lags a rate that moves with the
time of day; each test adds a margin for that lag. The margin is earned: ``learning_margin`` (0.75 points) before
any hour is seen, then 1.25 times the spread of each finished hour around the two before it, beyond sampling noise.
Noise-free minutes make every figure exact."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.detector import DriftDetector
from services.alerts.detection.expectations import Expectation, compare
from services.alerts.explain.figures import expected_text
from tests.unit.alerts.test_detector import BASE, T0, expected_minute, first, minute_stream, replay

HELD = DetectorConfig(margin_prior_hours=1e9)  # the margin stays the prior's 0.75 points: the detector before issue 55


def margins(detector: DriftDetector, stream: list, every: int = 60) -> list[float]:
    """The margin in points at the start of each hour while replaying ``stream``."""
    seen = []
    for i, counts in enumerate(stream):
        detector.update(counts, T0 + timedelta(minutes=i))
        if i % every == 0:
            seen.append(round(float(detector._engine.baseline.margin[0]) * 100, 3))
    return seen


def test_a_flat_route_loses_its_margin_within_its_first_hours_and_pages_sooner():
    flat = [expected_minute(BASE, answers=60)] * 600 + [expected_minute(BASE + 0.03, answers=60)] * 60
    earned = margins(DriftDetector(), flat)
    assert earned[:3] == [0.75, 0.75, 0.75]  # hours 0-2: no hour yet has two before it
    assert earned[3:6] == [0.45, 0.288, 0.152] and earned[6:] == [0.0] * 5  # no spread: gone by hour 6
    assert first(replay(DriftDetector(), flat), "firing") == 610  # +3 points at hour 10
    assert first(replay(DriftDetector(HELD), flat), "firing") == 619  # with the prior's margin kept


def test_a_swinging_route_keeps_the_margin_its_hours_show():
    t = np.arange(720)
    swing = BASE + 0.01 * np.sin(2 * np.pi * t / 1440 - 1.0)
    earned = margins(DriftDetector(), [expected_minute(r, answers=60) for r in swing])
    assert earned[:3] == [0.75, 0.75, 0.75]
    # ±1 point a day moves each hour from the two before it by up to a third of a point: the margin stays, and
    # eases as the rate levels off towards its peak at hour 10
    assert earned[3:] == [0.556, 0.465, 0.412, 0.404, 0.355, 0.332, 0.279, 0.219, 0.158]
    # with noise, the same swing and a +3-point step at hour 10: quiet until the step, which pages within minutes;
    # the same route without any margin pages on the swing alone, at 04:26
    noisy = minute_stream(47, swing + np.where(t >= 600, 0.03, 0.0))
    states = replay(DriftDetector(), noisy)
    assert first(states[:600], "firing") is None and first(states, "firing") == 608
    assert first(replay(DriftDetector(DetectorConfig(margin_spread=0.0)), noisy), "firing") == 266


def test_a_quiet_route_states_the_rise_it_can_see_within_an_hour():
    day_two = 2 * 1440
    t = np.arange(day_two + 90)
    stream = minute_stream(4, BASE + np.where(t >= day_two, 0.058, 0.0), answers_per_minute=5)
    quiet = DriftDetector()
    replay(quiet, stream[:day_two])  # 5 answers (22.5 claims) a minute for two days
    view = quiet.regression
    assert view.warm and not view.learning
    assert view.detectable_rise == pytest.approx(0.0584, abs=1e-4)  # well above the 2-point threshold
    shown = compare({"route": "quiet", "rate": 0.08, "interval": None, "claims": 100}, Expectation.of(view))
    assert expected_text(shown) == f"{view.expected:.1%} (sees +5.8 pts in 1 h)"
    busy = DriftDetector()
    replay(busy, minute_stream(4, np.full(day_two, BASE)))  # 60 answers a minute
    assert busy.regression.detectable_rise is None  # it sees the 2-point threshold within the hour: nothing to say
    # a rise of that size on the quiet route: it pages, within the hour
    states = replay(quiet, stream[day_two:], start=day_two)
    assert first(states, "firing") == 44
