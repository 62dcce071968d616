"""The calibrated rate's arithmetic, free of labels and windows: the weighted agreement counts, the two
estimators, the stratified variance and the resampling helpers (services/review/calibration.py says which applies
where, and why)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from services.core.stats import rogan_gladen


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


def _share(part, whole):
    with np.errstate(invalid="ignore", divide="ignore"):
        return part / whole


@dataclass(frozen=True)
class Agreement:
    """Weighted counts of labelled claims by the verifier's verdict and the settled label (scalars, or one per
    bootstrap row); every figure either estimator needs follows from them."""

    flagged_failed: np.ndarray
    flagged_supported: np.ndarray
    passed_failed: np.ndarray
    passed_supported: np.ndarray

    @classmethod
    def of(cls, weights: np.ndarray, verifier: np.ndarray, human: np.ndarray) -> Agreement:
        """``weights``: the labelled claims' weights (or, a row per draw, their draw counts times their weights)."""
        return cls(
            weights @ (verifier * human),
            weights @ (verifier * (1 - human)),
            weights @ ((1 - verifier) * human),
            weights @ ((1 - verifier) * (1 - human)),
        )

    @property
    def sensitivity(self):
        return _share(self.flagged_failed, self.flagged_failed + self.passed_failed)

    @property
    def specificity(self):
        return _share(self.passed_supported, self.passed_supported + self.flagged_supported)

    @property
    def failed_if_flagged(self):
        return _share(self.flagged_failed, self.flagged_failed + self.flagged_supported)

    @property
    def failed_if_passed(self):
        return _share(self.passed_failed, self.passed_failed + self.passed_supported)

    @property
    def flagged_share(self):
        """q: the share of the labels' traffic (their weights) the verifier flagged."""
        flagged = self.flagged_failed + self.flagged_supported
        return _share(flagged, flagged + self.passed_failed + self.passed_supported)

    def estimate(self, estimator: str, raw):
        if estimator == "rogan_gladen":
            return rogan_gladen(raw, self.sensitivity, self.specificity)
        return prediction_powered(raw, self.failed_if_flagged, self.failed_if_passed)
