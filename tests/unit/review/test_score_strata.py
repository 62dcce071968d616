"""Calibration post-stratified on score bands: each band weighs as its claims do, and a band whose few labels
all agree keeps a spread from its class's calibration curve."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

from services.core.score_bands import N_BANDS, N_CELLS, cell, prior_wrong
from services.review.score_strata import CalibrationCurve, post_stratify


def labelled(per_band: dict[int, tuple[int, int]], flagged: bool = False):
    """Labels of one verdict class: {band: (labels, failed)}, each weight 1, each band its own stratum."""
    bands, human = [], []
    for b, (n, failed) in per_band.items():
        bands += [b] * n
        human += [1.0] * failed + [0.0] * (n - failed)
    n = len(bands)
    return (
        np.ones(n),
        np.full(n, float(flagged)),
        np.array(bands),
        np.array(human),
        [f"{'f' if flagged else 'p'}{b}" for b in bands],
    )


def window(per_band: dict[tuple[bool, int], float]) -> tuple[np.ndarray, np.ndarray]:
    """The window's claims per (verdict class, band); each claim its own answer (cross = diag)."""
    claims = np.zeros(N_CELLS)
    for (flagged, b), n in per_band.items():
        claims[cell(flagged, b)] = n
    return claims, np.diag(claims)


def both_classes(passed: dict[int, tuple[int, int]], flagged: dict[int, tuple[int, int]]):
    p, f = labelled(passed), labelled(flagged, flagged=True)
    return tuple(np.concatenate([a, b]) for a, b in zip(p[:4], f[:4])) + (p[4] + f[4],)


def test_a_band_whose_labels_show_no_failure_keeps_the_spread_its_class_s_curve_gives():
    """Twenty labels of the surest passed band, none failed: its own spread would be zero (the interval narrowest
    exactly when the estimate is lowest). The class's other bands fail 10% and 20% of the time, so the curve
    puts the sure band's failures near 2%, and its spread blends that with its own labels' zero."""
    weights, flagged, bands, human, strata = both_classes({5: (20, 0), 4: (40, 4), 3: (40, 8)}, {3: (30, 27)})
    claims, cross = window({(False, 5): 4000, (False, 4): 3000, (False, 3): 2000, (True, 3): 1000})
    found = post_stratify(claims, cross, weights, flagged, bands, human, strata)
    assert found is not None
    sure = next(c for c in found.cells if c.bands == (5,) and not c.flagged)
    assert sure.failed == 0.0
    assert sure.spread > 0.06  # one label at the score's own 2.5% (the smoothing before) gave 0.035
    assert sure.spread < next(c for c in found.cells if c.bands == (4,)).spread


def test_a_class_whose_labels_all_agree_keeps_a_spread_and_a_finite_curve():
    weights, flagged, bands, human, strata = both_classes({5: (30, 0), 4: (30, 0)}, {3: (20, 20)})
    claims, cross = window({(False, 5): 5000, (False, 4): 3000, (True, 3): 1000})
    found = post_stratify(claims, cross, weights, flagged, bands, human, strata)
    assert found is not None
    assert all(0 < c.spread < 0.5 for c in found.cells)
    assert found.label_variance > 0


def test_inside_a_merged_cell_each_band_weighs_as_its_claims_in_the_window():
    """Two bands of five labels merge into one cell (under 10 each). Their labels weigh 1 each, as if the bands
    were as large as each other; the window holds three times as many claims of band 2 as of band 1, so the
    cell's failed share is (100·1 + 300·0) / 400."""
    weights, flagged, bands, human, strata = both_classes({1: (5, 5), 2: (5, 0)}, {3: (20, 18)})
    claims, cross = window({(False, 1): 100, (False, 2): 300, (True, 3): 600})
    found = post_stratify(claims, cross, weights, flagged, bands, human, strata)
    assert found is not None
    (merged,) = [c for c in found.cells if not c.flagged]
    assert {1, 2} <= set(merged.bands)
    assert merged.failed == 0.25
    assert abs(found.value - (400 * 0.25 + 600 * 0.9) / 1000) < 1e-12


def test_the_curve_recovers_a_logistic_from_many_labels():
    """Bands whose failures follow logit p = 0.5 + 0.7·x (x the logit of what the band's score says)."""
    x = np.array([logit(prior_wrong(b)) for b in range(1, N_BANDS)])
    labels = np.full(len(x), 20_000.0)
    curve = CalibrationCurve.fit(x, labels, labels * expit(0.5 + 0.7 * x))
    assert abs(curve.a - 0.5) < 0.01 and abs(curve.c - 0.7) < 0.01
    assert abs(curve.at(x[2]) - expit(0.5 + 0.7 * x[2])) < 1e-3


def test_labels_of_a_band_the_window_no_longer_has_leave_the_estimate_finite():
    """Labels of band 3 settled on days when it had claims; today's window has none of band 3 (its band 4 has
    them). The band has no share to stand for, so its labels keep their weights (the claims each stood for when
    sampled, 1 here) inside their merged cell, beside band 4's labels standing for its 400 claims."""
    weights, flagged, bands, human, strata = both_classes({3: (6, 3), 4: (6, 0)}, {3: (20, 18)})
    claims, cross = window({(False, 4): 400, (True, 3): 600})
    found = post_stratify(claims, cross, weights, flagged, bands, human, strata)
    assert found is not None
    (merged,) = [c for c in found.cells if not c.flagged]
    assert {3, 4} <= set(merged.bands)
    assert abs(merged.failed - 3 / (6 + 400)) < 1e-12
    assert np.isfinite(found.value) and np.isfinite(found.variance)
