"""Coverage and width of the calibrated rate by simulation, through the product's Calibrator on in-memory data.

The world (bench/calibration_world.py): three routes whose verifiers err asymmetrically and
differently (Se/Sp 0.70/0.97, 0.92/0.90, 0.80/0.99), claims of one answer correlated, review labels sampled
stratified by the verifier's verdict with the product's allocation, two reviewers each wrong 5% of the time
and an adjudicator (as wrong) settling their disputes. The interval must cover the route's true rate.

500 seeded repetitions of both estimators take about 10 s. Rogan–Gladen's bootstrap uses 250 draws here
instead of the product's 1000 to keep it fast: at 1000 draws the same repetitions cover equally (94.9% over all
routes against 94.9%). PPI's interval is analytic.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from bench.calibration_world import NOW, SCORE_GAPS, World, raw_interval
from services.review.calibration import ESTIMATORS, Calibrator

# its fixtures take tens of seconds: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

REPETITIONS = 500


def calibrator(estimator: str, seed: int) -> Calibrator:
    return Calibrator(30, timedelta(days=90), n_boot=250, seed=seed, estimator=estimator)


@pytest.fixture(scope="module")
def coverage():
    """estimator -> route -> (share of intervals covering the true rate, mean width); 'raw' too."""
    world = World(answers=1000, labels=160)
    rng = np.random.default_rng(16)
    found = {e: {t.route: [0, 0.0] for t in world.routes} for e in (*ESTIMATORS, "raw")}
    for rep in range(REPETITIONS):
        traffic, claims = world.draw(rng)
        intervals = {"raw": {t.route: raw_interval(t) for t in traffic}}
        for estimator in ESTIMATORS:
            rates = calibrator(estimator, rep).calibrate_all(traffic, claims, NOW)
            for rate in rates.values():
                assert not rate.pooled and not rate.stale, rate.reasons  # 160 labels a route: each stands alone
                assert rate.estimator == estimator, rate.estimator_note  # the labels are of this very traffic
            intervals[estimator] = {r: c.interval for r, c in rates.items()}
        for truth in world.routes:
            for estimate, by_route in intervals.items():
                lo, hi = by_route[truth.route]
                cell = found[estimate][truth.route]
                cell[0] += lo <= truth.true_rate <= hi
                cell[1] += hi - lo
    return {e: {r: (n / REPETITIONS, w / REPETITIONS) for r, (n, w) in routes.items()} for e, routes in found.items()}


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_the_calibrated_interval_covers_the_true_rate_95_percent_of_the_time(coverage, estimator):
    shares = {route: share for route, (share, _) in coverage[estimator].items()}
    assert all(0.93 <= share <= 0.97 for share in shares.values()), shares


def test_at_a_couple_of_hundred_labels_ppi_is_as_wide_as_rogan_gladen(coverage):
    # Both are the labels' own failed share plus λ·(p - q) with p = q here: the labels' variance dominates.
    ratios = {r: coverage["ppi"][r][1] / coverage["rogan_gladen"][r][1] for r in coverage["ppi"]}
    assert all(0.9 <= ratio <= 1.05 for ratio in ratios.values()), ratios


def test_the_raw_interval_misses_when_the_verifier_errs_asymmetrically(coverage):
    shares = {route: share for route, (share, _) in coverage["raw"].items()}
    assert all(share < 0.5 for share in shares.values()), shares


def test_with_many_labels_ppi_keeps_covering_and_narrows_where_rogan_gladen_stops():
    """1,200 labels a route: Rogan–Gladen's interval cannot go under 2z·sd(p) / (Se + Sp - 1), PPI's weighs the
    window's noise by P(failed | flagged) - P(failed | passed) instead. Reviewers who never err, so that what is
    covered is the estimator's variance and not the settled labels' own bias (see calibration.py)."""
    world = World(answers=2000, labels=1200, reviewer_error=0.0)
    rng = np.random.default_rng(16)
    reps, widths_rg = 150, 20  # RG's mean width settles in a few draws; its bootstrap is the slow part
    covered = {t.route: 0 for t in world.routes}
    width = {e: {t.route: 0.0 for t in world.routes} for e in ESTIMATORS}
    for rep in range(reps):
        traffic, claims = world.draw(rng)
        for estimator in ESTIMATORS if rep < widths_rg else ("ppi",):
            rates = calibrator(estimator, rep).calibrate_all(traffic, claims, NOW)
            for truth, rate in zip(world.routes, rates.values()):
                lo, hi = rate.interval
                width[estimator][truth.route] += (hi - lo) / (widths_rg if estimator == "rogan_gladen" else reps)
                covered[truth.route] += estimator == "ppi" and lo <= truth.true_rate <= hi
    assert all(n / reps >= 0.9 for n in covered.values()), covered
    ratios = {r: width["ppi"][r] / width["rogan_gladen"][r] for r in covered}
    assert all(ratio < 0.95 for ratio in ratios.values()) and np.mean(list(ratios.values())) <= 0.85, ratios


@pytest.fixture(scope="module")
def scored():
    """route -> (coverage, mean width) of the shipped estimate and of the verdict-only one, on labels sampled by
    verdict x score band, for a score that tells wrong verdicts from right ones with AUROC 0.86 and a weak one."""
    found = {}
    for name, gap in SCORE_GAPS.items():
        world = World(answers=1000, labels=160, score_gap=gap)
        rng = np.random.default_rng(16)
        cells = {(e, t.route): [0, 0.0] for e in ("shipped", "by verdict") for t in world.routes}
        for rep in range(REPETITIONS):
            traffic, claims = world.draw(rng)
            for estimate, use_scores in (("shipped", True), ("by verdict", False)):
                c = Calibrator(30, timedelta(days=90), seed=rep, use_scores=use_scores)
                for truth, rate in zip(world.routes, c.calibrate_all(traffic, claims, NOW).values()):
                    lo, hi = rate.interval
                    cells[(estimate, truth.route)][0] += lo <= truth.true_rate <= hi
                    cells[(estimate, truth.route)][1] += hi - lo
        found[name] = {k: (n / REPETITIONS, w / REPETITIONS) for k, (n, w) in cells.items()}
    return found


@pytest.mark.parametrize("score", SCORE_GAPS)
def test_post_stratified_on_score_bands_the_interval_still_covers(scored, score):
    shares = {route: share for (estimate, route), (share, _) in scored[score].items() if estimate == "shipped"}
    assert all(0.93 <= share <= 0.97 for share in shares.values()), shares


def test_a_score_that_tells_right_from_wrong_narrows_the_interval_a_weak_one_less(scored):
    def mean_width(score, estimate):
        return np.mean([w for (e, _), (_, w) in scored[score].items() if e == estimate])

    sharp, weak = mean_width("sharp", "shipped"), mean_width("weak", "shipped")
    assert sharp < 0.8 * mean_width("sharp", "by verdict"), (sharp, mean_width("sharp", "by verdict"))
    assert sharp < 0.92 * weak < mean_width("weak", "by verdict")
