"""The calibrated rate's arithmetic, free of labels and windows: the two estimators, the stratified variance and
the resampling helpers (services/review/calibration.py says which applies where, and why)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class VerdictClass:
    """The claims the verifier flagged (or passed): their share of the window and what the labels say of them."""

    share: float  # of the window's claims
    failed: float | None  # weighted share of its labels settled as failed
    labels: float  # effective labels, (Σw)² / Σw²

    @property
    def spread(self) -> float:
        """σ of one label's 'settled failed', Jeffreys-smoothed (half a label each way), so a class whose labels
        all agree, or that has none, still counts as uncertain."""
        smoothed = ((self.failed or 0.0) * self.labels + 0.5) / (self.labels + 1)
        return math.sqrt(smoothed * (1 - smoothed))

    def variance(self, labels: float | None = None) -> float:
        """Its part of the stratified estimate's variance with ``labels`` effective labels (default: its own)."""
        n = self.labels if labels is None else labels
        if self.share == 0:
            return 0.0
        return (self.share * self.spread) ** 2 / n if n > 0 else math.inf


def stratified_variance(
    flagged: VerdictClass,
    passed: VerdictClass,
    slope: float,
    raw_variance: float,
    labels: tuple[float, float] | None = None,
) -> float:
    """The calibrated rate's variance: the window's noise in p carried by λ, plus each verdict class's labels'
    (with ``labels`` = (flagged, passed) effective labels instead of the current ones, for planning)."""
    n_flagged, n_passed = labels or (None, None)
    return slope**2 * raw_variance + flagged.variance(n_flagged) + passed.variance(n_passed)


def prediction_powered(raw, failed_if_flagged, failed_if_passed):
    """Stratified PPI, strata by the verifier's verdict: raw·P(failed | flagged) + (1 - raw)·P(failed | passed)."""
    raw, a, b = (np.asarray(x, dtype=np.float64) for x in (raw, failed_if_flagged, failed_if_passed))
    value = raw * a + (1 - raw) * b
    return float(value) if value.ndim == 0 else value


def resample_counts(rng: np.random.Generator, n: int, draws: int) -> np.ndarray:
    """(draws, n) counts of how often each of n items is drawn in n draws with replacement (a multinomial,
    by bincount: much faster than numpy's multinomial for many small items)."""
    picks = rng.integers(0, n, size=(draws, n)) + (np.arange(draws) * n)[:, None]
    return np.bincount(picks.ravel(), minlength=draws * n).reshape(draws, n).astype(np.float64)


def effective_labels(weights: np.ndarray) -> float:
    """(Σw)² / Σw²: how many equally weighted labels would estimate a share as precisely."""
    return float(weights.sum() ** 2 / (weights**2).sum()) if weights.size else 0.0
