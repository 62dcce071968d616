"""The expectation drift detection tests against: time of day, mix, the short-history fallback, an
unbiased level and a restart that resumes it exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.alerts.detection.baseline import SeasonalBaseline
from services.alerts.detection.columns import CLAIMS, FAILED, FIRING, OK, PENDING
from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.detector import DriftDetector
from services.alerts.detection.engines import make_engine
from services.alerts.evaluation.route_state import decode_state, encode_state
from services.rates.intervals import Counts
from services.store.rates import COUNT_FIELDS

CONFIG = DetectorConfig(season_days=2, min_baseline_claims=1)
DAY = 1440


def minute_row(claims: float, failed: float) -> np.ndarray:
    row = np.zeros((1, 6))
    row[0, CLAIMS], row[0, FAILED] = claims, failed
    return row


def feed(baseline: SeasonalBaseline, minutes: range, failed_at) -> None:
    """Every minute: 100 claims, failed_at(minute) failed, admitted as an ok minute."""
    for m in minutes:
        baseline.roll(m)
        baseline.admit(minute_row(100, failed_at(m)), None, np.zeros(1), np.array([OK]))


def failures(m: int) -> float:
    """A made-up history: the hour of day sets the failures, and the second day has one more each minute."""
    return 4 + (m // 60) % 24 % 5 + (m // DAY)


def test_time_of_day_expectation_has_exact_values_on_a_constructed_history():
    b = SeasonalBaseline(CONFIG, 1, 6)
    feed(b, range(2 * DAY + 1), failures)  # two full days; the minute 2*DAY opens day three's first block
    assert b.seasonal
    per_minute = {(d, h): failures(d * DAY + h * 60) for d in (0, 1) for h in range(24)}
    slot = {h: sum(per_minute[d, h] for d in (0, 1)) * 60 for h in range(24)}  # failures per hour slot, both days
    claims = 2 * 60 * 100  # claims per slot
    pooled = sum(slot.values()) / (24 * claims)
    smoothed = {h: (0.25 * slot[(h - 1) % 24] + 0.5 * slot[h] + 0.25 * slot[(h + 1) % 24]) / claims for h in range(24)}
    level = sum(per_minute[1, h] for h in range(24)) * 60 / (24 * 60 * 100)  # the trailing day only
    offset = {h: smoothed[h] - pooled for h in range(24)}

    # the history is float32 (services/alerts/detection/rows.py HISTORY): whole counts exact, ratios to 7 digits
    exact = 1e-7
    at_centre = 2 * DAY + 10 * 60 + 30  # 10:30, the centre of slot 10
    assert b.expect(at_centre).total[0] == pytest.approx(level + offset[10], abs=exact)
    quarter_past = 2 * DAY + 10 * 60 + 45  # a quarter of the way from slot 10's centre to slot 11's
    assert b.expect(quarter_past).total[0] == pytest.approx(level + 0.75 * offset[10] + 0.25 * offset[11], abs=exact)
    just_after_midnight = 2 * DAY + 15  # 45 minutes after slot 23's centre (23:30), 15 before slot 0's
    assert b.expect(just_after_midnight).total[0] == pytest.approx(
        level + 0.25 * offset[23] + 0.75 * offset[0], abs=exact
    )
    assert b.expect(at_centre).mixed[0] == pytest.approx(b.expect(at_centre).total[0])  # no slices: no mix adjustment


def test_with_less_than_a_day_of_history_the_expectation_is_a_local_level_with_a_margin():
    b = SeasonalBaseline(CONFIG, 1, 6)
    feed(b, range(23 * 60 + 1), failures)
    assert not b.seasonal and b.learning and b.history_hours == 23
    level = sum(failures(h * 60) for h in (21, 22)) * 60 / (2 * 60 * 100)  # the last two finished hours
    # the margin is what the finished hours earned: 1.25 times the spread of each hour around the two before it,
    # beyond sampling noise (6,000 claims an hour; 12,000 in the two before), with the prior (0.75 points) worth
    # one hour
    hourly = np.array([failures(h * 60) / 100 for h in range(23)])
    gaps = hourly[2:] - (hourly[1:-1] + hourly[:-2]) / 2
    noise = level * (1 - level) * (1 / 6000 + 1 / 12000)
    earned = 1.25 * np.sqrt(((0.0075 / 1.25) ** 2 + np.sum(gaps**2 - noise)) / (1 + gaps.size))
    for minute in (23 * 60 + 1, 23 * 60 + 30):
        assert b.expect(minute).total[0] == pytest.approx(level, abs=1e-12)
        assert b.expect(minute).margin[0] == pytest.approx(earned, rel=1e-9) and earned > 3 * 0.0075
    young = SeasonalBaseline(CONFIG, 1, 6)
    feed(young, range(2 * 60 + 1), failures)  # two finished hours: no hour yet has two before it
    assert young.expect(2 * 60 + 1).margin[0] == CONFIG.learning_margin == 0.0075
    feed(b, range(23 * 60 + 1, DAY + 1), failures)  # the 24th hour completes a day: the profile takes over
    assert b.seasonal and b.expect(DAY + 30).total[0] != pytest.approx(b.level[0])
    assert b.expect(DAY + 30).margin[0] == 0.0  # the profile knows the time of day: no margin
    flat = SeasonalBaseline(CONFIG.replace(season_days=0), 1, 6)  # the previous detector: never seasonal
    feed(flat, range(2 * DAY + 1), failures)
    assert not flat.seasonal and flat.expect(2 * DAY + 30).total[0] == pytest.approx(flat.level[0])


def test_a_pending_run_is_held_then_admitted_and_a_firing_one_dropped():
    b = SeasonalBaseline(CONFIG.replace(block_minutes=10, baseline_minutes=60), 1, 6)
    b.roll(0)
    b.admit(minute_row(100, 5), None, np.zeros(1), np.array([OK]))
    b.admit(minute_row(100, 30), None, np.zeros(1), np.array([PENDING]))  # held …
    assert b.partial[0, CLAIMS] == 100
    b.admit(minute_row(100, 6), None, np.zeros(1), np.array([OK]))  # … and admitted when the run clears
    assert b.partial[0, CLAIMS] == 300 and b.partial[0, FAILED] == 41
    b.admit(minute_row(100, 30), None, np.zeros(1), np.array([PENDING]))
    b.admit(minute_row(100, 40), None, np.zeros(1), np.array([FIRING]))  # fired: the run is not the baseline
    b.admit(minute_row(100, 5), None, np.zeros(1), np.array([OK]))
    assert b.partial[0, CLAIMS] == 400 and b.partial[0, FAILED] == 46
    b.admit(minute_row(100, 30), None, np.zeros(1), np.array([PENDING]))  # a run that crosses into the next block …
    b.roll(10)
    b.admit(minute_row(100, 7), None, np.zeros(1), np.array([OK]))  # … puts each minute in its own block
    assert b.ring[0, 0, CLAIMS] == 500 and b.ring[0, 0, FAILED] == 76
    assert b.partial[0, CLAIMS] == 100 and b.level[0] == pytest.approx(76 / 500)
    old = SeasonalBaseline(CONFIG.replace(hold_pending=False), 1, 6)
    old.roll(0)
    old.admit(minute_row(100, 30), None, np.zeros(1), np.array([PENDING]))
    old.admit(minute_row(100, 5), None, np.zeros(1), np.array([OK]))
    assert old.partial[0, CLAIMS] == 100  # the previous way drops every pending minute


def simulate(rng, routes: int, minutes: int, rate_at, per_minute: float = 60.0, rho: float = 0.1):
    """Correlated traffic: Poisson answers with 1-8 claims, each answer's failure probability from a beta."""
    k = 1 / rho - 1
    for m in range(minutes):
        volume = per_minute * (1 + 0.5 * np.sin(2 * np.pi * m / DAY))
        answers = rng.poisson(volume, routes)
        owner = np.repeat(np.arange(routes), answers)
        n = rng.integers(1, 9, owner.size)
        p = rate_at(m)[owner]
        f = rng.binomial(n, rng.beta(p * k, (1 - p) * k))
        x = np.zeros((routes, 6))
        for col, values in enumerate((np.ones_like(n), n, f, n * n, f * f, f * n)):
            x[:, col] = np.bincount(owner, weights=values, minlength=routes)
        yield m, x


@pytest.mark.slow
@pytest.mark.parametrize("swing", [0.0, 0.01])
def test_the_level_is_an_unbiased_estimate_of_the_pooled_rate(swing):
    """80 independent routes (seeds) over three days: the mean hourly level is within 0.1 point of each
    route's true pooled (claim-weighted) rate, flat or with a ±1-point daily swing out of phase with volume."""
    routes, rng = 80, np.random.default_rng(11)
    phase = rng.uniform(0, 2 * np.pi, routes)
    truth = 0.08 + 0.5 * swing * np.cos(phase) / 2  # mean of (1 + .5 sin x)(p + s sin(x + φ)) over mean volume
    engine = make_engine(DetectorConfig(), routes)  # the shipped detector: its pending runs are held, not dropped
    errors = []
    for m, x in simulate(rng, routes, 3 * DAY, lambda m: 0.08 + swing * np.sin(2 * np.pi * m / DAY + phase)):
        engine.step(x, m)
        if m >= DAY and m % 60 == 0:
            errors.append(np.mean(engine.baseline.level - truth))
    assert abs(np.mean(errors)) <= 0.001


def detector_stream(seed: int, hours: int):
    """Minute buckets with slices for a DriftDetector: a ±1-point swing, two query types."""
    rng = np.random.default_rng(seed)
    start = datetime(2026, 11, 2, tzinfo=UTC)
    for m, x in simulate(rng, 2, hours * 60, lambda m: np.array([0.06, 0.16]) + 0.01 * np.sin(2 * np.pi * m / DAY)):
        counts = Counts.from_array(np.concatenate([x.sum(axis=0), np.zeros(len(COUNT_FIELDS) - 6)]))
        slices = {
            "query_type=simple stakes=-": Counts.from_array(np.concatenate([x[0], np.zeros(len(COUNT_FIELDS) - 6)])),
            "query_type=multi_hop stakes=-": Counts.from_array(np.concatenate([x[1], np.zeros(len(COUNT_FIELDS) - 6)])),
        }
        yield counts, start + timedelta(minutes=m), slices


@pytest.mark.slow
def test_a_restart_resumes_the_seasonal_state_exactly():
    stream = list(detector_stream(5, 30))
    whole, first = DriftDetector(), DriftDetector()
    for counts, at, slices in stream[: 27 * 60]:
        whole.update(counts, at, slices)
        first.update(counts, at, slices)
    restored = (
        DriftDetector()
    )  # with what the evaluator stores of the route (services/alerts/evaluation/route_state.py)
    restored.load_rows([0], [decode_state(encode_state(first.row_state(0)))], first.last_minute)
    assert restored.regression.expected_basis.startswith("time of day")
    for counts, at, slices in stream[27 * 60 :]:
        whole.update(counts, at, slices)
        restored.update(counts, at, slices)
        a, b = restored.regression, whole.regression
        assert (a.state, a.statistic, a.expected) == (b.state, b.statistic, b.expected)
    for name in ("ring", "season", "slice_ring", "offset_total", "offset_mixed", "partial", "holding"):
        assert np.array_equal(getattr(restored._engine.baseline, name), getattr(whole._engine.baseline, name)), name


def shifted_minute(simple: int, hard: int, hard_rate: float = 0.16, simple_rate: float = 0.06) -> tuple[Counts, dict]:
    zeros = np.zeros(len(COUNT_FIELDS) - 6)
    rows = {"query_type=simple stakes=-": (simple, simple_rate), "query_type=multi_hop stakes=-": (hard, hard_rate)}
    slices = {
        k: Counts.from_array(np.concatenate([[n / 4, n, n * r, n * 4, n * r * 4 * r, n * r * 4], zeros]))
        for k, (n, r) in rows.items()
    }
    total = Counts.from_array(np.sum([c.as_array() for c in slices.values()], axis=0))
    return total, slices


def test_a_rise_splits_into_mix_and_rate_effects_that_add_up():
    # six hours are under a day: the previous whole-history level and no margin keep the figures exact
    d = DriftDetector(DetectorConfig(min_baseline_claims=1_000, learning_level_minutes=1440, learning_margin=0.0))
    start = datetime(2026, 11, 2, tzinfo=UTC)
    total, slices = shifted_minute(800, 200)
    for m in range(6 * 60):  # six hours at 80% simple (6%), 20% multi_hop (16%): 8% pooled
        d.update(total, start + timedelta(minutes=m), slices)
    at = start + timedelta(hours=6)
    for m in range(60):  # multi_hop's share doubles, each type's own rate unchanged: a pure mix shift of +2 points
        total, slices = shifted_minute(600, 400)
        d.update(total, at + timedelta(minutes=m), slices)
    mix = d.mix_shift
    assert mix.state == "firing" and d.regression.state == "ok"
    assert mix.delta == pytest.approx(0.02, abs=2e-4)
    assert mix.mix_effect + mix.rate_effect == pytest.approx(mix.delta, abs=1e-12)
    # direct standardisation at the baseline's slice rates (six committed hours; thin slices shrink a little)
    prior = d.config.slice_prior_claims
    simple, hard = (
        (claims * rate + prior * 0.08) / (claims + prior) for claims, rate in ((288_000, 0.06), (72_000, 0.16))
    )
    assert mix.mix_effect == pytest.approx((0.6 - 0.8) * simple + (0.4 - 0.2) * hard, abs=1e-12)
    assert 0 <= mix.rate_effect < 5e-4  # only the shrinkage's bit is left to the rate
    assert mix.mix_slice == "query_type=multi_hop stakes=-: 20% of claims -> 40%"
    for m in range(60, 120):  # now multi_hop also gets worse on the same mix: a regression, and it pages
        total, slices = shifted_minute(600, 400, hard_rate=0.26)
        d.update(total, at + timedelta(minutes=m), slices)
    reg = d.regression
    assert reg.state == "firing" and d.mix_shift.state == "ok"
    assert reg.mix_effect + reg.rate_effect == pytest.approx(reg.delta, abs=1e-12)
    assert reg.rate_effect > 0.02 and reg.mix_effect > 0.01
