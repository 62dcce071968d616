"""PPI++ with the verifier's score as a continuous prediction: the alternative to post-stratifying on score bands
that bench/calibration.py measures against the shipped estimator (issue 56 asks for both).

Inside each verdict class k the prediction of 'failed' is the score read as a probability (a flagged claim
fails where its verdict is right: f = score; a passed one where it is wrong: f = 1 - score), and the class's
rate is the PPI++ estimate λ·mean_window(f) + mean_labels(y - λ·f), λ = cov(y, f) / ((1 + n/N)·var(f)) tuned
on the labels (Angelopoulos, Duchi and Zrnic, "PPI++: Efficient Prediction-Powered Inference", 2023). The rate
is Σ_k of the window's claims' λ_k·f + r_k over the window's claims (r_k the labels' mean of y - λ_k·f): its
variance is the labels' Σ_k W_k²·var(y - λ_k·f) / n_k plus the window's, answers resampled. Labels weigh as the
product's post-stratified ones do (a stratum's labels alike, services/review/score_strata.py).
"""

from __future__ import annotations

import math

import numpy as np

from bench.calibration_world import RouteDraw
from services.core.stats import z_value
from services.review.estimators import effective_labels
from services.review.labels import ReviewedClaim
from services.review.score_strata import pooled_weights


def ppi_plus_plus(
    route: RouteDraw, claims: list[ReviewedClaim], confidence: float = 0.95
) -> tuple[float, tuple[float, float]] | None:
    """The estimate and its interval, or None without scores or labels of both classes."""
    if route.scores is None:
        return None
    mine = [c for c in claims if c.route == route.route and c.human_failed is not None]
    keys = np.array([int(c.claim_key.rsplit(":", 1)[1]) for c in mine])
    weights = pooled_weights(np.array([c.weight for c in mine]), [c.stratum for c in mine])
    y = np.array([c.human_failed for c in mine], dtype=np.float64)
    predicted = np.where(route.flagged, route.scores, 1 - route.scores)  # per claim of the window
    per_claim = np.zeros(len(predicted))
    label_variance = 0.0
    total = len(predicted)
    for side in (True, False):
        window = route.flagged == side
        labelled = route.flagged[keys] == side
        if not labelled.any():
            return None
        w, f, yk = weights[labelled], predicted[keys[labelled]], y[labelled]
        f_mean, y_mean = np.average(f, weights=w), np.average(yk, weights=w)
        n, n_window = effective_labels(w), int(window.sum())
        spread = np.average((f - f_mean) ** 2, weights=w)
        lam = np.average((f - f_mean) * (yk - y_mean), weights=w) / spread / (1 + n / n_window) if spread else 0.0
        residual = yk - lam * f
        r = np.average(residual, weights=w)
        per_claim[window] = lam * predicted[window] + r
        label_variance += (n_window / total) ** 2 * np.average((residual - r) ** 2, weights=w) / n
    value = per_claim.mean()
    starts = np.r_[0, np.cumsum(route.answer_claims)[:-1]]
    per_answer = np.add.reduceat(per_claim, starts) - value * route.answer_claims
    window_variance = float(per_answer @ per_answer) / total**2
    half = z_value(confidence) * math.sqrt(label_variance + window_variance)
    return float(value), (max(0.0, value - half), min(1.0, value + half))
