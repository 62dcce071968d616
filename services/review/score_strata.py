"""Calibration post-stratified on the verifier's score bands (services/core/score_bands.py).

Inside each verdict class the labels are split again by score band: claims the verifier was sure of fail (or
pass) at another rate than claims it was unsure of, so the class's mean over its labels is replaced by the mean
of each band's labels weighted by the band's share of the window: Σ_g W_g·ȳ_g over the cells g. With labels drawn
more where the verifier is least sure (services/review/sampling.py), the variance Σ W_g²·σ_g² / n_g falls by as
much as the score tells right verdicts from wrong ones (bench/calibration_floor.py).

Cells are adjacent bands of a class merged until each holds ``min_cell_labels`` labels: a band with a share of
the window but no label would leave its rate unknown, and a band of three labels would estimate its spread from
noise. A cell's spread is smoothed by PRIOR_LABELS labels at what its score says (a verdict that sure is wrong
1 - score of the time), so a cell whose labels all agree still counts as uncertain, without the pull to ½ that
would count a sure band as unsure as any (the Jeffreys smoothing of the verdict-only estimate). The labels of a
stratum weigh alike whatever day they were drawn (``pooled_weights``). Each day's own weights would be unbiased,
but the sampler's later days lean on what the earlier ones found (services/review/sampling.py ``by_confidence``),
and a day of few labels would weigh as much as a day of many: on the bench that gives back most of the width the
score gains (6.7 points against 6.2). Pooled, the estimate leans a little towards what the first day found; the
sampler's prior (sampling.PRIOR_LABELS) keeps that small, and bench/calibration.py measures the coverage kept.

The window's part of the variance is exact under answer resampling: the estimate is Σ_answers m_a / Σ claims with
m_a = Σ over the answer's claims of their cell's ȳ, so its linearised variance is d'Cd / (Σ claims)², d the
cells' ȳ - θ and C the traffic's Σ over answers of the product of their per-cell claim counts (each answer's
weight squared). With the verdict as the only cell this is λ²·var(p), as in the unbanded estimate.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from services.core.score_bands import N_BANDS, band_label, prior_wrong
from services.review.estimators import effective_labels

MIN_CELL_LABELS = 10
PRIOR_LABELS = 1.0  # a cell's spread is smoothed by this many labels at its bands' prior (score_bands.prior_wrong)


@dataclass(frozen=True)
class ScoreCell:
    """One verdict class's adjacent score bands with what their labels say."""

    flagged: bool
    bands: tuple[int, ...]
    share: float  # of the window's claims
    failed: float  # weighted share of its labels settled failed
    labels: float  # effective labels
    count: int  # labels
    spread: float  # σ of one label, smoothed towards its class

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
        w, y = weights[in_class], human[in_class]
        counts = np.bincount(bands[in_class], minlength=N_BANDS)
        for run in merge_bands(counts, min_cell_labels or MIN_CELL_LABELS):
            mine = np.isin(bands[in_class], run)
            share = float(window[list(run)].sum()) / total
            if not mine.any():
                if share > 0:
                    return None
                continue
            n = effective_labels(w[mine])
            failed = float(w[mine] @ y[mine] / w[mine].sum())
            wrong = float(np.average([prior_wrong(b) for b in run], weights=window[list(run)] + 1e-9))
            prior = 1 - wrong if side else wrong  # a flagged claim fails where its verdict is right
            smoothed = (failed * n + PRIOR_LABELS * prior) / (n + PRIOR_LABELS)
            cells.append(
                ScoreCell(bool(side), run, share, failed, n, int(mine.sum()), float(np.sqrt(smoothed * (1 - smoothed))))
            )
            for b in run:
                rate_of_cell[side * N_BANDS + b] = failed
    value = float(sum(c.share * c.failed for c in cells))
    gap = rate_of_cell - value
    return PostStratified(
        value,
        float(sum(c.variance for c in cells)),
        float(gap @ cross @ gap) / total**2,
        tuple(cells),
    )
