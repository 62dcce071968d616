"""Calibration post-stratified on the verifier's score bands (services/core/score_bands.py).

Inside each verdict class the labels are split again by score band: claims the verifier was sure of fail (or
pass) at another rate than claims it was unsure of, so the class's mean over its labels is replaced by the mean
of each band's labels weighted by the band's share of the window: Σ_g W_g·ȳ_g over the cells g. With labels drawn
more where the verifier is least sure (services/review/sampling.py), the variance Σ W_g²·σ_g² / n_g falls by as
much as the score tells right verdicts from wrong ones (bench/calibration_floor.py).

Cells are adjacent bands of a class merged until each holds ``min_cell_labels`` labels: a band with a share of
the window but no label would leave its rate unknown, and a band of three labels would estimate its spread from
noise. Inside a cell each band's labels stand for the band's share of the window (``band_weights``), so a band
sampled on fewer days than its neighbour still weighs as its claims do.

A cell's spread is not its own labels' alone: a band whose verdicts are 97% right shows no failure in its twenty
labels half the time, and a spread of zero from those would make the interval narrowest exactly when the estimate
is lowest. It is blended with the class's calibration curve (``CalibrationCurve``): a logistic in the logit of
what each band's score says, fitted to every label of the class (Platt scaling, with half a label split between
failed and passed at the class's middle, so a class whose labels all agree keeps a spread), counted as
CURVE_LABELS labels beside the cell's own.

The labels of a stratum weigh alike whatever day they were drawn (``pooled_weights``). Each day's own weights
would be unbiased, but the sampler's later days lean on what the earlier ones found (services/review/sampling.py
``by_confidence``), and a day of few labels would weigh as much as a day of many: on the bench that gives back
most of the width the score gains (6.7 points against 6.2). Pooled, the estimate leans a little towards what the
first day found (a quarter of a point on the bench); the sampler's prior (sampling.PRIOR_LABELS) keeps that
small, and bench/calibration.py measures the coverage kept.

The window's part of the variance is exact under answer resampling: the estimate is Σ_answers m_a / Σ claims with
m_a = Σ over the answer's claims of their cell's ȳ, so its linearised variance is d'Cd / (Σ claims)², d the
cells' ȳ - θ and C the traffic's Σ over answers of the product of their per-cell claim counts (each answer's
weight squared). With the verdict as the only cell this is λ²·var(p), as in the unbanded estimate.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from services.core.score_bands import N_BANDS, band_label, prior_wrong
from services.review.estimators import effective_labels

MIN_CELL_LABELS = 10
CURVE_LABELS = 10.0  # what the class's calibration curve counts for beside a cell's own labels, in labels
SLOPE_PRIOR = 0.3  # the curve's slope is drawn towards 1 (the score means what it says) by a N(1, 1/0.3) prior
PSEUDO_LABELS = 0.5  # half failed, half passed, at the class's middle: a class of all-agreeing labels keeps a spread


@dataclass(frozen=True)
class ScoreCell:
    """One verdict class's adjacent score bands with what their labels say."""

    flagged: bool
    bands: tuple[int, ...]
    share: float  # of the window's claims
    failed: float  # weighted share of its labels settled failed
    labels: float  # effective labels
    count: int  # labels
    spread: float  # σ of one label, blended with the class's calibration curve

    @property
    def name(self) -> str:
        first, last = band_label(self.bands[0]), band_label(self.bands[-1])
        return f"{'flagged' if self.flagged else 'passed'} {first if first == last else first + ' to ' + last}"

    @property
    def variance(self) -> float:
        """W²·σ² / (n - 1): the spread is the labels' own (divided by n), which a cell of tens of labels
        understates by n / (n - 1)."""
        return (self.share * self.spread) ** 2 / max(self.labels - 1, 1.0) if self.share else 0.0


@dataclass(frozen=True)
class PostStratified:
    value: float
    label_variance: float
    window_variance: float
    cells: tuple[ScoreCell, ...]

    @property
    def variance(self) -> float:
        return self.label_variance + self.window_variance


def pooled_weights(weights: np.ndarray, strata: Sequence[Hashable]) -> np.ndarray:
    """Each label's weight replaced by its stratum's mean weight: a stratum's labels of every day pooled as one
    sample of it (days of more traffic no longer count for more). What the band says of a verdict is taken to
    hold from day to day; weighing a day by its traffic would cost half the labels' worth when days' quotas
    differ, as the second day's do once the first day's labels have shown where the verifier errs."""
    sums: dict[Hashable, list[float]] = {}
    for w, s in zip(weights, strata):
        cell = sums.setdefault(s, [0.0, 0])
        cell[0] += w
        cell[1] += 1
    return np.array([sums[s][0] / sums[s][1] for s in strata])


def band_weights(weights: np.ndarray, bands: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Each band's labels (one verdict class's) reweighted to sum to the band's claims in the window
    (``window``, per band): inside a merged cell its labels then stand for the band's share, whatever days they
    were drawn on. A band the window has no claims of keeps its weights: it has no share to stand for."""
    out = weights.astype(float)
    for b in np.unique(bands):
        mine = bands == b
        if window[b] > 0:
            out[mine] *= window[b] / out[mine].sum()
    return out


@dataclass(frozen=True)
class CalibrationCurve:
    """How often a verdict class's claims fail, as a logistic in the logit of what their band's score says:
    logit p = a + c·x, x = logit(the band's prior failed share). Fitted by Newton to the labels per band and
    PSEUDO_LABELS at their mean x (so an all-agreeing class stays finite), c drawn towards 1."""

    a: float
    c: float

    @classmethod
    def fit(cls, x: np.ndarray, labels: np.ndarray, failed: np.ndarray) -> CalibrationCurve:
        """``x`` per band with labels, ``labels`` how many, ``failed`` how many of those failed."""
        x = np.append(x, labels @ x / labels.sum())
        n, y = np.append(labels, PSEUDO_LABELS), np.append(failed, PSEUDO_LABELS / 2)
        theta = np.array([0.0, 1.0])
        design = np.column_stack([np.ones_like(x), x])
        for _ in range(50):
            p = expit(design @ theta)
            gradient = design.T @ (y - n * p) - [0.0, SLOPE_PRIOR * (theta[1] - 1)]
            hessian = (design.T * (n * p * (1 - p))) @ design + np.diag([0.0, SLOPE_PRIOR])
            step = np.linalg.solve(hessian, gradient)
            theta += step / max(1.0, float(np.abs(step).max()))  # damped: a far start cannot overshoot
            if np.abs(step).max() < 1e-9:
                break
        return cls(float(theta[0]), float(theta[1]))

    def at(self, x: np.ndarray) -> np.ndarray:
        return expit(self.a + self.c * x)


def merge_bands(counts: np.ndarray, min_labels: int) -> list[tuple[int, ...]]:
    """Runs of adjacent bands (indices of ``counts``, the labels per band of one class) each holding at least
    ``min_labels`` labels; a short last run joins the one before it."""
    runs: list[list[int]] = [[]]
    for b in range(len(counts)):
        if sum(counts[i] for i in runs[-1]) >= min_labels:
            runs.append([])
        runs[-1].append(b)
    if len(runs) > 1 and sum(counts[i] for i in runs[-1]) < min_labels:
        runs[-2].extend(runs.pop())
    return [tuple(r) for r in runs]


def post_stratify(
    claims: np.ndarray,
    cross: np.ndarray,
    weights: np.ndarray,
    flagged: np.ndarray,
    bands: np.ndarray,
    human: np.ndarray,
    strata: Sequence[Hashable],
    min_cell_labels: int | None = None,
) -> PostStratified | None:
    """The post-stratified estimate, or None when a class with claims in the window has no label.

    ``claims``: the window's (weighted) claims per cell (verdict class x band), ``cross`` their answer-level
    cross products; the rest one entry per label: its weight, the verifier's verdict (1 flagged), its band and the
    settled label (1 failed) and the stratum it was sampled from (its labels of every day weigh alike)."""
    weights = pooled_weights(weights, strata)
    total = float(claims.sum())
    if total <= 0:
        return None
    cells: list[ScoreCell] = []
    rate_of_cell = np.zeros(len(claims))
    for side in (0, 1):
        in_class = flagged == side
        window = claims[side * N_BANDS : (side + 1) * N_BANDS]
        if not in_class.any():
            if window.sum() > 0:
                return None
            continue
        y, b = human[in_class], bands[in_class]
        w = band_weights(weights[in_class], b, window)
        counts = np.bincount(b, minlength=N_BANDS)
        failed_share = np.bincount(b, w * y, N_BANDS) / np.maximum(np.bincount(b, w, N_BANDS), 1e-300)
        prior = np.array([prior_wrong(k) for k in range(N_BANDS)])
        x = logit(1 - prior if side else prior)  # what each band's score says of how often its claims fail
        present = counts > 0
        curve = CalibrationCurve.fit(x[present], counts[present], counts[present] * failed_share[present])
        for run in merge_bands(counts, min_cell_labels or MIN_CELL_LABELS):
            mine = np.isin(b, run)
            share = float(window[list(run)].sum()) / total
            if not mine.any():
                if share > 0:
                    return None
                continue
            n = effective_labels(w[mine])
            failed = float(w[mine] @ y[mine] / w[mine].sum())
            fitted = float(np.average(curve.at(x[list(run)]), weights=window[list(run)] + 1e-9))
            blended = (failed * n + CURVE_LABELS * fitted) / (n + CURVE_LABELS)
            cells.append(
                ScoreCell(bool(side), run, share, failed, n, int(mine.sum()), float(np.sqrt(blended * (1 - blended))))
            )
            for k in run:
                rate_of_cell[side * N_BANDS + k] = failed
    value = float(sum(c.share * c.failed for c in cells))
    gap = rate_of_cell - value
    return PostStratified(
        value,
        float(sum(c.variance for c in cells)),
        float(gap @ cross @ gap) / total**2,
        tuple(cells),
    )
