"""Rogan–Gladen on constructed numbers, pooling and staleness (coverage: test_calibration_simulation.py)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from services.review.calibration import Calibrator, Traffic, rogan_gladen
from services.review.labels import Review, ReviewedClaim

NOW = datetime(2026, 11, 21, tzinfo=timezone.utc)


def labelled(route: str, verdict: str, human: str, n: int, version: str = "v1", weight: float = 1.0,
             at: datetime = NOW, origin: str = "production") -> list[ReviewedClaim]:
    return [ReviewedClaim(f"{route}-{verdict}-{human}-{i}-{version}", route, verdict, version, origin, weight, 1,
                          (Review("ann", "reviewer", human, at),)) for i in range(n)]


def traffic(route: str, failed: int, claims: int, version: str = "v1") -> Traffic:
    # One claim an answer: failed answers with 1/1, the rest 0/1.
    return Traffic(route, version, np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([failed, claims - failed], float))


def se_90_sp_80(route: str = "r", **kw) -> list[ReviewedClaim]:
    """Se = 9/10, Sp = 16/20."""
    return (labelled(route, "contradicted", "contradicted", 9, **kw) + labelled(route, "supported", "overreach", 1, **kw)
            + labelled(route, "supported", "supported", 16, **kw) + labelled(route, "stale", "supported", 4, **kw))


@pytest.mark.parametrize("raw, se, sp, expected", [
    (0.3, 0.9, 0.8, 0.1 / 0.7),
    (0.2, 1.0, 1.0, 0.2),
    (0.05, 0.9, 0.8, 0.0),      # below the false-positive floor: clipped
    (0.99, 0.9, 0.8, 1.0),
])
def test_rogan_gladen_exact(raw, se, sp, expected):
    assert rogan_gladen(raw, se, sp) == pytest.approx(expected)


def test_rogan_gladen_is_undefined_for_a_verifier_no_better_than_chance():
    assert np.isnan(rogan_gladen(0.3, 0.5, 0.5))


def test_calibrated_rate_from_settled_labels():
    rate = Calibrator(30, timedelta(days=90), n_boot=500).calibrate(traffic("r", 300, 1000), se_90_sp_80(), NOW)
    assert rate.raw == pytest.approx(0.3) and rate.sensitivity == pytest.approx(0.9)
    assert rate.specificity == pytest.approx(0.8) and rate.value == pytest.approx(1 / 7)
    assert rate.labels == 30 and not rate.stale and not rate.pooled
    assert rate.interval[0] < 1 / 7 < rate.interval[1]


def test_weights_undo_oversampling():
    # The 'supported' verdict stratum was sampled at 1 in 4: its 20 labels stand for 80 claims.
    claims = (labelled("r", "contradicted", "contradicted", 9) + labelled("r", "supported", "overreach", 1, weight=4)
              + labelled("r", "supported", "supported", 16, weight=4) + labelled("r", "stale", "supported", 4))
    rate = Calibrator(10, timedelta(days=90), n_boot=200).calibrate(traffic("r", 300, 1000), claims, NOW)
    assert rate.sensitivity == pytest.approx(9 / 13) and rate.specificity == pytest.approx(64 / 68)


def test_too_few_labels_pool_across_routes_of_the_same_verifier_and_say_so():
    claims = se_90_sp_80("a") + labelled("b", "supported", "supported", 5)
    rate = Calibrator(30, timedelta(days=90), n_boot=200).calibrate(traffic("b", 100, 1000), claims, NOW)
    assert rate.pooled and rate.label_routes == ("a", "b") and rate.labels == 35 and not rate.stale


@pytest.mark.parametrize("claims, reason", [
    (se_90_sp_80()[:12], "only 12 settled labels"),
    (se_90_sp_80(at=NOW - timedelta(days=100)), "100 days old"),
    (se_90_sp_80(version="v0"), "verifier v0; the route now runs v1"),
    (labelled("r", "supported", "supported", 40), "no settled label says failed"),
    (se_90_sp_80(origin="eval"), "only 0 settled labels"),
])
def test_stale_calibration_says_why(claims, reason):
    rate = Calibrator(30, timedelta(days=90), n_boot=200).calibrate(traffic("r", 300, 1000), claims, NOW)
    assert rate.stale and any(reason in r for r in rate.reasons), rate.reasons


def test_resampled_counts_draw_n_items_a_row_and_each_item_once_on_average():
    from services.review.calibration import resample_counts

    counts = resample_counts(np.random.default_rng(1), 50, 4000)
    assert counts.shape == (4000, 50) and (counts.sum(axis=1) == 50).all()
    assert counts.mean(axis=0) == pytest.approx(np.ones(50), abs=0.06)

