"""Drift detectors: a contract suite over every candidate, then replayed seeded streams."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.alerts.detection.config import KINDS, CusumConfig, DetectorConfig, NaiveConfig, WindowConfig
from services.alerts.detection.detector import DriftDetector, make_detector
from services.alerts.detection.engines import ENGINES, make_engine
from services.alerts.evaluation.route_state import decode_state, encode_state
from services.rates.intervals import Counts
from tests.support.paths import ROOT

T0 = datetime(2026, 11, 21, tzinfo=UTC)
RHO = 0.1
BASE = 0.08


def minute_stream(seed: int, rates, answers_per_minute: float = 60.0, contradicted_share=0.3) -> list[Counts]:
    """Per-minute Counts from simulated answers: 1–8 claims, intra-answer correlation 0.1."""
    rng = np.random.default_rng(seed)
    rates = np.asarray(rates, dtype=float)
    share = np.broadcast_to(np.asarray(contradicted_share, dtype=float), rates.shape)
    answers = rng.poisson(answers_per_minute, rates.size)
    minute = np.repeat(np.arange(rates.size), answers)
    n = rng.integers(1, 9, minute.size)
    scale = 1 / RHO - 1
    f = rng.binomial(n, rng.beta(rates[minute] * scale, (1 - rates[minute]) * scale))
    contradicted = rng.binomial(f, share[minute])
    total = lambda w: np.bincount(minute, weights=w, minlength=rates.size).astype(int)  # noqa: E731
    cols = dict(
        events=np.bincount(minute, minlength=rates.size),
        claims=total(n),
        failed=total(f),
        claims_sq=total(n * n),
        failed_sq=total(f * f),
        failed_claims=total(f * n),
        supported=total(n - f),
        unsupported=total(f - contradicted),
        contradicted=total(contradicted),
        served=np.bincount(minute, minlength=rates.size),
    )
    return [Counts(**{k: int(v[i]) for k, v in cols.items()}) for i in range(rates.size)]


def replay(detector, stream, start: int = 0):
    """Feed minute buckets; return the state after each one."""
    states = []
    for i, counts in enumerate(stream, start):
        detector.update(counts, T0 + timedelta(minutes=i))
        states.append(detector.state)
    return states


def first(states, wanted: str) -> int | None:
    return next((i for i, s in enumerate(states) if s == wanted), None)


def entries(states, wanted: str = "firing") -> int:
    return sum(1 for prev, cur in zip(["ok", *states], states) if cur == wanted and prev != wanted)


ALL = sorted(KINDS)


# ---- contract: every detector -------------------------------------------------------------


@pytest.fixture(scope="module")
def rise_stream():
    rates = np.r_[np.full(600, BASE), np.full(300, BASE + 0.05)]
    return minute_stream(1, rates, contradicted_share=np.r_[np.full(600, 0.3), np.full(300, 0.6)])


def detector_of(kind: str, config: DetectorConfig = DetectorConfig()) -> DriftDetector:
    return make_detector(config.replace(kind=kind))


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_update_does_not_mutate_inputs(name, rise_stream):
    detector = detector_of(name)
    before = [copy.deepcopy(c) for c in rise_stream[:700]]
    replay(detector, rise_stream[:700])
    assert rise_stream[:700] == before


def figures(detector: DriftDetector) -> tuple:
    view = detector.regression
    return view.statistic, view.rate, view.onset, view.expected, view.delta, detector.mix_shift.state


def stored_copy(detector: DriftDetector) -> DriftDetector:
    """What the evaluator stores of a route (services/alerts/evaluation/route_state.py), loaded into a fresh
    detector."""
    clone = DriftDetector(detector.config)
    clone.load_rows([0], [decode_state(encode_state(detector.row_state(0)))], detector.last_minute)
    return clone


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_a_stored_copy_continues_identically(name, rise_stream):
    detector = detector_of(name)
    replay(detector, rise_stream[:620])
    clone = stored_copy(detector)
    a = [(s, figures(detector)) for s in replay(detector, rise_stream[620:], 620)]
    b = [(s, figures(clone)) for s in replay(clone, rise_stream[620:], 620)]
    assert a == b


def seeded_run(name: str) -> str:
    """A fresh detector's states on a seeded rise, and its figures after it, as text."""
    detector = detector_of(name)
    states = replay(detector, minute_stream(9, np.r_[np.full(500, BASE), np.full(200, BASE + 0.04)]))
    return repr((states, figures(detector), detector.regression.baseline))


@pytest.fixture(scope="module")
def another_process() -> dict[str, str]:
    """``seeded_run`` of every kind in a child process with another hash seed (a restarted worker)."""
    seed = "4321" if os.environ.get("PYTHONHASHSEED") == "1234" else "1234"
    script = (
        "import json; from tests.unit.alerts.test_detector import ALL, seeded_run; "
        "print(json.dumps({name: seeded_run(name) for name in ALL}))"
    )
    child = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_deterministic_under_a_seed_in_another_process(name, another_process):
    assert seeded_run(name) == another_process[name]


@pytest.mark.parametrize("name", ALL)
def test_bad_updates_are_refused_with_a_clear_error(name):
    detector = detector_of(name)
    detector.update(Counts.zero(), T0)
    with pytest.raises(ValueError, match="not after the last bucket"):
        detector.update(Counts.zero(), T0)
    with pytest.raises(ValueError, match="timezone-aware"):
        detector.update(Counts.zero(), datetime(2026, 11, 21, 0, 5))
    with pytest.raises(TypeError, match="Counts"):
        detector.update({"claims": 3}, T0 + timedelta(minutes=1))


# ---- detection on replayed streams --------------------------------------------------------

# The rise starts at minute 600, ten hours into the route's life: the baseline is learning (a local level, and
# a margin the naive rule's fixed threshold feels most).
EXPECTED_FIRING_MINUTE = {"cusum": 603, "window": 607, "naive": 620}
# Ten hours of history is day one; tests of the detection mechanics use the whole-history level and no margin,
# as a route whose time of day is known would.
KNOWN_DAY = DetectorConfig(learning_level_minutes=1440, learning_margin=0.0, margin_spread=0.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_five_point_rise_fires_at_the_exact_minute(name, rise_stream):
    detector = detector_of(name)
    states = replay(detector, rise_stream)
    assert first(states[:600], "firing") is None
    assert first(states, "firing") == EXPECTED_FIRING_MINUTE[name]
    assert first(states, "pending") < first(states, "firing")
    assert detector.drift_detected and detector.state == "firing"
    view = detector.regression
    assert view.state == "firing"
    # the naive rule flaps: the elevated minutes between its firings join a learning baseline's local level
    assert view.baseline == pytest.approx(BASE, abs=0.006 if name != "naive" else 0.01)
    assert view.delta == pytest.approx(0.05, abs=0.015 if name != "naive" else 0.02)
    assert view.driving_verdict == "contradicted"
    assert view.rate_interval.lo < view.rate < view.rate_interval.hi


def test_day_one_a_swinging_rate_is_quiet_and_a_three_point_step_at_hour_ten_pages():
    """A new route whose rate swings ±1 point over the day, +3 points from hour 10 (issue 21). The previous
    baseline (the whole history's level, no margin) paged on the swing at hour 6; the learning one waits for the
    step."""
    t = np.arange(720)
    stream = minute_stream(38, BASE + 0.01 * np.sin(2 * np.pi * t / 1440 - 1.0) + np.where(t >= 600, 0.03, 0.0))
    learning = replay(DriftDetector(), stream)
    assert first(learning[:600], "firing") is None and first(learning, "firing") == 604
    assert first(replay(DriftDetector(KNOWN_DAY), stream), "firing") == 343  # a false alarm at 05:43


def test_cusum_estimates_onset_and_counts_claims(rise_stream):
    detector = DriftDetector()
    replay(detector, rise_stream[: EXPECTED_FIRING_MINUTE["cusum"] + 1])
    view = detector.regression
    assert abs(view.onset - (T0 + timedelta(minutes=600))) <= timedelta(minutes=3)
    assert view.claims_counted >= 200
    assert view.window_minutes == EXPECTED_FIRING_MINUTE["cusum"] + 1 - int((view.onset - T0).total_seconds() // 60)


def test_two_point_rise_is_caught_and_three_points_faster():
    base = np.full(600, BASE)
    two = replay(DriftDetector(), minute_stream(21, np.r_[base, np.full(120, BASE + 0.02)]))
    three = replay(DriftDetector(), minute_stream(21, np.r_[base, np.full(120, BASE + 0.03)]))
    assert first(two[:600], "firing") is None and first(three[:600], "firing") is None
    assert 600 < first(three, "firing") < first(two, "firing") <= 690


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cusum", "naive", "window"])
def test_days_of_pure_noise_raise_nothing(name):
    states = replay(detector_of(name), minute_stream(5, np.full(4 * 1440, BASE)))
    assert "firing" not in states


@pytest.mark.slow
def test_low_volume_noise_at_a_low_base_rate_raises_nothing():
    states = replay(make_detector(), minute_stream(6, np.full(3 * 1440, 0.02), answers_per_minute=20))
    assert "firing" not in states


def expected_minute(rate: float, answers: int = 1000) -> Counts:
    """A noise-free minute: the expected sums of `answers` answers (sizes 1–8, correlation 0.1) at `rate`."""
    claims, claims_sq = 4.5 * answers, 25.5 * answers
    failed_sq = rate * (1 - rate) * (claims + RHO * (claims_sq - claims)) + rate * rate * claims_sq
    return Counts(
        events=answers,
        claims=round(claims),
        failed=round(rate * claims),
        claims_sq=round(claims_sq),
        failed_sq=round(failed_sq),
        failed_claims=round(rate * claims_sq),
    )


@pytest.mark.slow
def test_a_credible_rise_smaller_than_the_threshold_is_not_alerted():
    # +1.4 points, without noise: the CUSUM (tuned for 2.5, midpoint 1.25) accumulates (pending), but the rise
    # is below 75% of the 2-point threshold, so it never fires
    states = replay(DriftDetector(KNOWN_DAY), [expected_minute(BASE)] * 600 + [expected_minute(BASE + 0.014)] * 600)
    assert "pending" in states and "firing" not in states
    states = replay(DriftDetector(KNOWN_DAY), [expected_minute(BASE)] * 600 + [expected_minute(BASE + 0.02)] * 60)
    assert first(states, "firing") == 601  # the same stream at +2 points fires on its second elevated minute


def test_no_alarm_during_warm_up_even_on_a_huge_rise():
    detector = DriftDetector()
    states = replay(detector, minute_stream(4, np.r_[np.full(60, BASE), np.full(100, 0.4)]))
    assert "firing" not in states and not detector.regression.warm


def test_resolution_has_hysteresis_no_flapping_around_the_threshold():
    # six hours hovering around baseline + threshold (+1.5 / +2.5 points, alternating every 10 minutes)
    hover = np.where((np.arange(360) // 10) % 2 == 0, BASE + 0.015, BASE + 0.025)
    stream = minute_stream(13, np.r_[np.full(600, BASE), hover, np.full(240, BASE)])
    cusum = replay(DriftDetector(KNOWN_DAY), stream)
    assert entries(cusum) == 1
    fired = first(cusum, "firing")
    assert all(s == "firing" for s in cusum[fired:960])  # stays firing through the hover
    resolved = [i for i in range(fired + 1, len(cusum)) if cusum[i - 1] == "firing" and cusum[i] != "firing"]
    assert cusum[-1] == "ok" and len(resolved) == 1  # resolved once, after the rate came back
    assert 960 < resolved[0] <= 1000
    # the Prometheus-style rule resolves the moment its condition is false, so it flaps on the same data
    assert entries(replay(detector_of("naive", KNOWN_DAY), stream)) >= 2


def test_baseline_freezes_while_an_alert_is_open(rise_stream):
    rates = np.r_[np.full(600, BASE), np.full(600, BASE + 0.05)]
    detector = DriftDetector()
    replay(detector, minute_stream(1, rates))
    assert detector.state == "firing"
    assert detector.regression.baseline == pytest.approx(
        BASE, abs=0.006
    )  # ten hours in, the rise is not the new normal


def test_gaps_count_as_empty_minutes():
    stream = minute_stream(2, np.full(400, BASE))
    detector = DriftDetector()
    for i, c in enumerate(stream):
        if i % 7:  # drop some buckets entirely
            detector.update(c, T0 + timedelta(minutes=i))
    detector.update(stream[0], T0 + timedelta(days=3))  # a long outage
    assert detector.state == "ok"


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="threshold=0: input should be greater than 0"):
        DetectorConfig(threshold=0)
    with pytest.raises(ValueError, match="h='high': input should be a valid number"):
        CusumConfig(h="high")
    with pytest.raises(ValueError, match="z_resolve=5.0: must be below z_fire"):
        WindowConfig(z_resolve=5.0)
    with pytest.raises(ValueError, match="naive_window=0: input should be greater than or equal to 1"):
        NaiveConfig(naive_window=0)
    with pytest.raises(ValueError, match="design_ratio=2.0: must be positive, with threshold × design_ratio below 1"):
        DetectorConfig(threshold=0.6, cusum=CusumConfig(design_ratio=2.0))
    with pytest.raises(ValueError, match="kind='ewma': input should be 'cusum', 'window' or 'naive'"):
        DetectorConfig(kind="ewma")
    with pytest.raises(ValueError, match="unknown detector setting.*hh"):
        DetectorConfig.from_mapping({"hh": 3})
    with pytest.raises(ValueError, match="unknown detector setting.*cusum"):  # settings stay flat: drift.detector.h
        DetectorConfig.from_mapping({"cusum": {"h": 3}})
    config = DetectorConfig.from_mapping({"h": 9, "windows": [5, 15], "for_minutes": "4", "threshold": 0.03})
    assert config == DetectorConfig(
        threshold=0.03, cusum=CusumConfig(h=9.0), window=WindowConfig(windows=(5, 15)), naive=NaiveConfig(for_minutes=4)
    )


def test_each_engine_reads_its_own_settings():
    assert tuple(ENGINES) == KINDS
    config = DetectorConfig(kind="window", window=WindowConfig(windows=(5, 20)))
    assert config.engine is config.window
    engine = make_engine(config, n_routes=1)
    assert type(engine) is ENGINES["window"] and engine.span == 20


def test_detector_settings_from_the_environment_take_their_types():
    from services.app.settings import SettingsError, load_settings

    env = {
        "CLAIMWATCH_DRIFT__DETECTOR__MIN_BASELINE_CLAIMS": "10000",
        "CLAIMWATCH_DRIFT__DETECTOR__H": "9.5",
        "CLAIMWATCH_DRIFT__DETECTOR__HOLD_PENDING": "false",
    }
    config = load_settings(None, env, {}).drift.detector_config()
    assert (config.min_baseline_claims, config.cusum.h, config.hold_pending) == (10_000, 9.5, False)
    assert isinstance(config.min_baseline_claims, int)
    with pytest.raises(SettingsError, match=r"setting drift.detector.h: .*greater than 0"):
        load_settings(None, {"CLAIMWATCH_DRIFT__DETECTOR__H": "-1"}, {})
    with pytest.raises(SettingsError, match=r"block_minutes=7: must be a divisor of 1440"):
        load_settings(None, {"CLAIMWATCH_DRIFT__DETECTOR__BLOCK_MINUTES": "7"}, {})
    with pytest.raises(ValueError, match="min_baseline_claims='many': input should be a valid integer"):
        DetectorConfig.from_mapping({"min_baseline_claims": "many"})
    with pytest.raises(ValueError, match="hold_pending='maybe': input should be a valid boolean"):
        DetectorConfig.from_mapping({"hold_pending": "maybe"})


def test_factory_and_default():
    assert make_detector().config == DetectorConfig() and make_detector().config.kind == "cusum"
    for kind in KINDS:
        detector = make_detector(DetectorConfig(kind=kind))
        assert type(detector) is DriftDetector and detector.config.kind == kind
    assert make_detector(DetectorConfig(threshold=0.03)).config.threshold == 0.03
