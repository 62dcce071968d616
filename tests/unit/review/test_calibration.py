"""Both estimators on constructed numbers, which one applies, pooling and staleness (coverage:
test_calibration_simulation.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.core.stats import rogan_gladen
from services.review.calibration import Calibrator
from services.review.estimators import prediction_powered
from services.review.labels import Review, ReviewedClaim
from services.review.traffic import Traffic

NOW = datetime(2026, 11, 21, tzinfo=UTC)


def labelled(
    route: str,
    verdict: str,
    human: str,
    n: int,
    version: str = "v1",
    weight: float = 1.0,
    at: datetime = NOW,
    origin: str = "production",
    times: int = 1,
) -> list[ReviewedClaim]:
    n *= times
    return [
        ReviewedClaim(
            f"{route}-{verdict}-{human}-{i}-{version}",
            route,
            verdict,
            version,
            origin,
            weight,
            1,
            (Review("ann", "reviewer", human, at),),
        )
        for i in range(n)
    ]


def traffic(route: str, failed: int, claims: int, version: str = "v1") -> Traffic:
    # One claim an answer: failed answers with 1/1, the rest 0/1.
    return Traffic(
        route, version, np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([failed, claims - failed], float)
    )


def se_90_sp_80(route: str = "r", **kw) -> list[ReviewedClaim]:
    """Se = 9/10, Sp = 16/20; of the 13 flagged claims 9 failed, of the 17 passed 1 (10 of 30 failed)."""
    return (
        labelled(route, "contradicted", "contradicted", 9, **kw)
        + labelled(route, "supported", "overreach", 1, **kw)
        + labelled(route, "supported", "supported", 16, **kw)
        + labelled(route, "stale", "supported", 4, **kw)
    )


@pytest.mark.parametrize(
    "raw, se, sp, expected",
    [
        (0.3, 0.9, 0.8, 0.1 / 0.7),
        (0.2, 1.0, 1.0, 0.2),
        (0.05, 0.9, 0.8, 0.0),  # below the false-positive floor: clipped
        (0.99, 0.9, 0.8, 1.0),
    ],
)
def test_rogan_gladen_exact(raw, se, sp, expected):
    assert rogan_gladen(raw, se, sp) == pytest.approx(expected)


def test_rogan_gladen_is_undefined_for_a_verifier_no_better_than_chance():
    assert np.isnan(rogan_gladen(0.3, 0.5, 0.5))


def test_prediction_powered_exact():
    assert prediction_powered(0.3, 0.9, 0.05) == pytest.approx(0.3 * 0.9 + 0.7 * 0.05)


@pytest.mark.parametrize(
    "estimator, expected",
    [
        ("rogan_gladen", 1 / 7),
        ("ppi", 0.3 * 9 / 13 + 0.7 * 1 / 17),
    ],
)
def test_calibrated_rate_from_settled_labels(estimator, expected):
    rate = Calibrator(30, timedelta(days=90), n_boot=500, estimator=estimator).calibrate(
        traffic("r", 300, 1000), se_90_sp_80(), NOW
    )
    assert rate.estimator == estimator and rate.value == pytest.approx(expected)
    assert rate.raw == pytest.approx(0.3) and rate.sensitivity == pytest.approx(0.9)
    assert rate.specificity == pytest.approx(0.8)
    assert rate.flagged.failed == pytest.approx(9 / 13) and rate.passed.failed == pytest.approx(1 / 17)
    assert rate.labels == rate.own_labels == 30 and not rate.stale and not rate.pooled
    assert rate.interval[0] < expected < rate.interval[1]


def test_both_estimators_are_the_labels_own_rate_when_the_window_is_flagged_as_often():
    # The labels' flagged share is 13/30: a window flagged as often gives their failed share, 10/30, either way.
    window = traffic("r", 130, 300)
    values = {
        e: Calibrator(30, timedelta(days=90), n_boot=200, estimator=e).calibrate(window, se_90_sp_80(), NOW)
        for e in ("ppi", "rogan_gladen")
    }
    assert values["ppi"].value == pytest.approx(1 / 3) and values["rogan_gladen"].value == pytest.approx(1 / 3)


def test_ppi_interval_stays_open_when_a_class_s_labels_all_agree():
    # 40 passed labels, none failed: the passed class still counts as uncertain (no zero-width interval).
    claims = (
        labelled("r", "contradicted", "contradicted", 30)
        + labelled("r", "contradicted", "supported", 10)
        + labelled("r", "supported", "supported", 40)
    )
    rate = Calibrator(30, timedelta(days=90)).calibrate(traffic("r", 500, 1000), claims, NOW)
    assert rate.estimator == "ppi" and rate.value == pytest.approx(0.5 * 0.75)
    assert rate.passed.failed == 0 and rate.passed.variance() > 0
    lo, hi = rate.interval
    parts = 0.75**2 * rate.raw_variance + rate.flagged.variance() + rate.passed.variance()
    assert (hi - lo) / 2 == pytest.approx(1.959964 * parts**0.5) and lo < 0.375 < hi


def test_pooled_labels_use_rogan_gladen_whatever_the_setting():
    claims = se_90_sp_80("a") + labelled("b", "supported", "supported", 5)
    rate = Calibrator(30, timedelta(days=90), n_boot=200, estimator="ppi").calibrate(
        traffic("b", 100, 1000), claims, NOW
    )
    assert rate.pooled and rate.estimator == "rogan_gladen" and "pooled" in rate.estimator_note
    assert rate.own_labels == 5 and rate.labels == 35


def test_a_window_flagged_far_more_often_than_the_labels_uses_rogan_gladen():
    # 3,000 labels flagged 13 in 30; a window flagged 60 in 100: the prevalence moved since they were drawn.
    claims = se_90_sp_80(times=100)
    moved = Calibrator(30, timedelta(days=90), n_boot=200).calibrate(traffic("r", 600, 1000), claims, NOW)
    assert moved.estimator == "rogan_gladen" and "moved" in moved.estimator_note
    assert moved.value == pytest.approx(rogan_gladen(0.6, 0.9, 0.8))
    steady = Calibrator(30, timedelta(days=90), n_boot=200).calibrate(traffic("r", 430, 1000), claims, NOW)
    assert steady.estimator == "ppi" and steady.estimator_note == ""


def test_an_unknown_estimator_is_refused():
    with pytest.raises(ValueError, match="not one of ppi, rogan_gladen"):
        Calibrator(30, timedelta(days=90), estimator="bayes")


def test_weights_undo_oversampling():
    # The 'supported' verdict stratum was sampled at 1 in 4: its 20 labels stand for 80 claims.
    claims = (
        labelled("r", "contradicted", "contradicted", 9)
        + labelled("r", "supported", "overreach", 1, weight=4)
        + labelled("r", "supported", "supported", 16, weight=4)
        + labelled("r", "stale", "supported", 4)
    )
    rate = Calibrator(10, timedelta(days=90), n_boot=200).calibrate(traffic("r", 300, 1000), claims, NOW)
    assert rate.sensitivity == pytest.approx(9 / 13) and rate.specificity == pytest.approx(64 / 68)


def test_too_few_labels_pool_across_routes_of_the_same_verifier_and_say_so():
    claims = se_90_sp_80("a") + labelled("b", "supported", "supported", 5)
    rate = Calibrator(30, timedelta(days=90), n_boot=200).calibrate(traffic("b", 100, 1000), claims, NOW)
    assert rate.pooled and rate.label_routes == ("a", "b") and rate.labels == 35 and not rate.stale


@pytest.mark.parametrize(
    "claims, reason",
    [
        (se_90_sp_80()[:12], "only 12 settled labels"),
        (se_90_sp_80(at=NOW - timedelta(days=100)), "100 days old"),
        (se_90_sp_80(version="v0"), "verifier v0; the route now runs v1"),
        (labelled("r", "supported", "supported", 40), "no settled label says failed"),
        (se_90_sp_80(origin="eval"), "only 0 settled labels"),
    ],
)
def test_stale_calibration_says_why(claims, reason):
    rate = Calibrator(30, timedelta(days=90), n_boot=200).calibrate(traffic("r", 300, 1000), claims, NOW)
    assert rate.stale and any(reason in r for r in rate.reasons), rate.reasons


def test_resampled_counts_draw_n_items_a_row_and_each_item_once_on_average():
    from services.review.estimators import resample_counts

    counts = resample_counts(np.random.default_rng(1), 50, 4000)
    assert counts.shape == (4000, 50) and (counts.sum(axis=1) == 50).all()
    assert counts.mean(axis=0) == pytest.approx(np.ones(50), abs=0.06)


def test_a_route_without_labels_reads_no_labels_yet_not_stale():
    """Stale means labels that no longer fit; with none there is nothing to be stale (what every surface prints)."""
    calibrator = Calibrator(30, timedelta(days=90), n_boot=200)
    none = calibrator.calibrate(traffic("r", 300, 1000), [], NOW)
    assert none.labels == 0 and none.status == "no labels yet" and none.as_dict()["status"] == "no labels yet"
    old = calibrator.calibrate(traffic("r", 300, 1000), se_90_sp_80(at=NOW - timedelta(days=100)), NOW)
    assert old.status == "stale"
    assert calibrator.calibrate(traffic("r", 300, 1000), se_90_sp_80(times=2), NOW).status == "current"
