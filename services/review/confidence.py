"""The verifier's confidence, checked against settled human labels: is a 0.9 right 90% of the time, on this route,
with this verifier version?

For production claims humans settled that carry the verifier's score (its confidence in its verdict), per route
and verifier version (and every route of a version together):
- a reliability diagram: in ten equal bins of the score, its mean against the share of labels on the verdict's
  side (a Wilson interval on the bin's effective labels);
- the expected calibration error: Σ over bins of the bin's share x |agreement - mean score|;
- the AUROC with which the score tells the verifier's right verdicts from its wrong ones (½: no better than chance).
Labels weigh 1 / their sampling probability (the review oversamples the bands the verifier is least sure of), so
every figure is the traffic's. ECE's and AUROC's intervals resample the labels.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.core.readmodel import closed
from services.core.stats import percentile_interval, wilson, z_value
from services.evalset.metrics import Figure
from services.review.labels import ReviewedClaim

BINS = 10
ALL_ROUTES = "all"


@closed
@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    labels: int
    mean_score: float
    agreement: float  # weighted share of labels on the verdict's side
    lo: float
    hi: float


@closed
@dataclass(frozen=True)
class ScoreCheck:
    route: str  # or "all": every route of the version
    verifier_version: str
    labels: int  # settled production labels with a score
    bins: tuple[ReliabilityBin, ...]
    ece: Figure
    auroc: Figure  # None without both right and wrong verdicts among the labels
    mean_score: float
    agreement: float


@dataclass(frozen=True)
class ScoredLabel:
    route: str
    verifier_version: str
    score: float
    weight: float
    right: bool  # the settled label is on the verdict's side


def scored_labels(claims: Sequence[ReviewedClaim]) -> list[ScoredLabel]:
    """Settled production claims that carry a score (eval claims were chosen, not sampled: they weigh nothing)."""
    return [
        ScoredLabel(c.route, c.verifier_version, float(c.score), c.weight, c.verifier_failed == c.human_failed)
        for c in claims
        if c.origin == "production" and c.weight > 0 and c.score is not None and c.human_failed is not None
    ]


def bin_of(score: np.ndarray) -> np.ndarray:
    """The reliability diagram's bin (tenth of the score's range) of each score; 1.0 in the last."""
    return np.minimum((score * BINS).astype(np.int64), BINS - 1)


def calibration_error(score: np.ndarray, right: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ECE for each row of ``weights`` (a row per bootstrap draw)."""
    one_hot = np.eye(BINS)[bin_of(score)]  # (labels, bins)
    total = weights @ one_hot
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.abs((weights * right) @ one_hot - (weights * score) @ one_hot) / total
    return np.nansum(total * gap, axis=-1) / weights.sum(axis=-1)


def auroc(score: np.ndarray, right: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """P(a right verdict's score > a wrong one's), ties counting half, for each row of ``weights``."""
    order = np.argsort(score, kind="stable")
    _, starts = np.unique(score[order], return_index=True)  # each run of equal scores
    w = weights[..., order]
    wrong = np.add.reduceat(w * (1 - right[order]), starts, axis=-1)
    rights = np.add.reduceat(w * right[order], starts, axis=-1)
    below = np.cumsum(wrong, axis=-1) - wrong / 2  # wrong weight under each score, half of that at it
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rights * below).sum(-1) / (rights.sum(-1) * wrong.sum(-1))


class ScoreChecker:
    def __init__(self, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0):
        self.n_boot = n_boot
        self.confidence = confidence
        self.seed = seed

    def checks(self, claims: Sequence[ReviewedClaim]) -> list[ScoreCheck]:
        """Per verifier version: every route together first, then each route; versions by name."""
        labels = scored_labels(claims)
        out = []
        for version in sorted({x.verifier_version for x in labels}):
            mine = [x for x in labels if x.verifier_version == version]
            out.append(self.check(ALL_ROUTES, version, mine))
            out += [self.check(r, version, [x for x in mine if x.route == r]) for r in sorted({x.route for x in mine})]
        return out

    def check(self, route: str, version: str, labels: Sequence[ScoredLabel]) -> ScoreCheck:
        score = np.array([x.score for x in labels])
        right = np.array([x.right for x in labels], dtype=np.float64)
        weights = np.array([x.weight for x in labels])
        rng = np.random.default_rng([self.seed, zlib.crc32(f"{route}|{version}".encode())])
        n = len(labels)
        draws = rng.multinomial(n, np.full(n, 1 / n), size=self.n_boot) * weights
        figures = []
        for measure in (calibration_error, auroc):
            value = float(measure(score, right, weights))
            lo, hi = (
                None if x is None else float(x)
                for x in percentile_interval(measure(score, right, draws), self.confidence)
            )
            figures.append(Figure(None if np.isnan(value) else value, lo, hi, n))
        return ScoreCheck(
            route,
            version,
            n,
            self._bins(score, right, weights),
            figures[0],
            figures[1],
            float(np.average(score, weights=weights)),
            float(np.average(right, weights=weights)),
        )

    def _bins(self, score: np.ndarray, right: np.ndarray, weights: np.ndarray) -> tuple[ReliabilityBin, ...]:
        bins = bin_of(score)
        out = []
        for b in np.unique(bins):
            m = bins == b
            w = weights[m]
            share = float(np.average(right[m], weights=w))
            effective = float(w.sum() ** 2 / (w**2).sum())
            lo, hi = wilson(share, effective, z_value(self.confidence))
            low = int(b) / BINS
            out.append(
                ReliabilityBin(
                    low,
                    low + 1 / BINS,
                    int(m.sum()),
                    float(np.average(score[m], weights=w)),
                    share,
                    float(lo),
                    float(hi),
                )
            )
        return tuple(out)
