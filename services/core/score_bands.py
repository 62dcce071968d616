"""The verifier's score (its confidence in its verdict, 0-1) as review uses it: fixed bands to sample and
post-stratify by.

The bands are fixed, not quantiles: a label keeps the band its score fell in whatever day it was drawn, and the
window's claims fall in the same bands, so labels of any day stand for their band's share of any window. A claim
without a score is in band 0 (unscored): a verifier that sends none keeps review as it was.
"""

from __future__ import annotations

import math

import numpy as np

SCORE_EDGES = (0.5, 0.7, 0.85, 0.95)  # a score at an edge is in the band above it
EDGES_STORED = np.array(SCORE_EDGES, dtype=np.float32)  # the store's Float32 scores meet them as they are
UNSCORED = 0
N_BANDS = len(SCORE_EDGES) + 2  # unscored, then below the first edge, ..., from the last edge up
N_CELLS = 2 * N_BANDS  # (verifier passed | flagged) x band


def band(score: float | None) -> int:
    """The band of a score: 0 unscored, then 1 (below the first edge) to N_BANDS - 1 (from the last edge up)."""
    if score is None or math.isnan(score):
        return UNSCORED
    return int(bands_of(np.array([score]))[0])


def bands_of(scores: np.ndarray) -> np.ndarray:
    """``band`` of each of many scores (none missing), compared as the store keeps them, float32
    (services/store/review.py compares them there): a score at an edge is in the band above."""
    return 1 + np.digitize(scores.astype(np.float32), EDGES_STORED)


def cell(flagged: bool, band_no: int) -> int:
    """The index of (verdict class, band) in a Traffic's per-cell claim counts."""
    return int(flagged) * N_BANDS + band_no


def band_range(band_no: int) -> tuple[float, float] | None:
    """[low, high) of a scored band; None for unscored."""
    if band_no == UNSCORED:
        return None
    edges = (0.0, *SCORE_EDGES, 1.0)
    return edges[band_no - 1], edges[band_no]


def band_label(band_no: int) -> str:
    span = band_range(band_no)
    if span is None:
        return "unscored"
    low, high = span
    return f"< {high:.2f}" if low == 0 else f">= {low:.2f}" if high == 1 else f"{low:.2f}-{high:.2f}"


def prior_wrong(band_no: int) -> float:
    """How often a verdict in the band is wrong before any label says: a verifier this sure (the band's middle
    score) is wrong 1 - score of the time. Unscored: ½."""
    span = band_range(band_no)
    return 0.5 if span is None else 1 - sum(span) / 2


def stratum_verdict(verdict: str, score: float | None) -> str:
    """The verdict part of a review stratum: the verdict, and its band when scored ('contradicted#4')."""
    b = band(score)
    return verdict if b == UNSCORED else f"{verdict}#{b}"


def parse_stratum_verdict(part: str) -> tuple[str, int]:
    verdict, _, b = part.partition("#")
    return verdict, int(b) if b else UNSCORED
