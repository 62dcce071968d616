"""Agreement on reviewed claims: human vs human (the guide's ceiling) and verifier vs human, per route; and the
verifier's confidence against the labels (services/review/confidence.py).

Cohen's kappa and the verifier-vs-human figures come from ``services.evalset.metrics.agreement``
(item-resampled intervals, confusion matrix, disagreement by what the verifier said). Fleiss' kappa,
for more than two reviewers a claim, is here, with the same kind of interval: resample claims.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.core.readmodel import closed
from services.core.stats import percentile_interval
from services.evalset.metrics import Agreement, Figure, LabelPair, agreement, interval_note
from services.review.confidence import ScoreCheck, ScoreChecker
from services.review.labels import HUMAN_LABELS, ReviewedClaim


@closed
@dataclass(frozen=True)
class HumanAgreement:
    method: str  # cohen (2 reviewers a claim) | fleiss (more)
    reviewers: int
    kappa: Figure
    observed: Figure  # cohen: share of claims both gave the same label; fleiss: mean pairwise agreement


@closed
@dataclass(frozen=True)
class RouteAgreement:
    route: str  # "all" for every route together
    human: HumanAgreement | None
    verifier: Agreement | None  # verifier vs every human label; claims resampled whole


@closed
@dataclass(frozen=True)
class Disagreement:
    claim_key: str
    route: str
    labels: tuple[tuple[str, str], ...]  # (reviewer, label)


@closed
@dataclass(frozen=True)
class AgreementReport:
    overall: RouteAgreement
    routes: tuple[RouteAgreement, ...]
    verifier_versions: tuple[RouteAgreement, ...]  # route = "verifier=<version>", every route together
    disagreements: tuple[Disagreement, ...]  # waiting for an adjudicator, oldest queued first
    confidence: tuple[ScoreCheck, ...] = ()  # the verifier's score against the labels, per version and route


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa of an (items, categories) table of how many raters chose each category; every item
    must have the same number of raters (at least 2)."""
    return float(_fleiss(np.asarray(counts, dtype=np.float64), np.ones((1, len(counts))))[0][0])


def _fleiss(counts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kappa and mean pairwise agreement for each row of ``weights`` (how often each item is drawn)."""
    raters = counts.sum(axis=1)
    if counts.size == 0 or raters.min() < 2 or raters.min() != raters.max():
        raise ValueError("Fleiss' kappa needs the same number of raters (at least 2) on every item")
    m = raters[0]
    per_item = ((counts * counts).sum(axis=1) - m) / (m * (m - 1))
    total = weights.sum(axis=1)
    observed = weights @ per_item / total
    shares = (weights @ counts) / (total * m)[:, None]
    expected = (shares * shares).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (observed - expected) / (1 - expected), observed


def fleiss_agreement(
    counts: np.ndarray, *, n_boot: int = 2000, seed: int = 0, confidence: float = 0.95
) -> tuple[Figure, Figure]:
    """Fleiss' kappa and mean pairwise agreement, each with a percentile interval that resamples items."""
    counts = np.asarray(counts, dtype=np.float64)
    n = len(counts)
    rng = np.random.default_rng([seed, zlib.crc32(b"fleiss")])
    boot_kappa, boot_observed = _fleiss(counts, rng.multinomial(n, np.full(n, 1 / n), size=n_boot).astype(np.float64))
    kappa, observed = (float(x[0]) for x in _fleiss(counts, np.ones((1, n))))
    figures = []
    for value, samples in ((kappa, boot_kappa), (observed, boot_observed)):
        lo, hi = percentile_interval(samples, confidence)
        figures.append(Figure(value if np.isfinite(value) else None, lo, hi, n, note=interval_note(n, lo, hi)))
    return figures[0], figures[1]


def human_agreement(
    claims: Sequence[ReviewedClaim], reviewers: int, *, n_boot: int = 2000, seed: int = 0
) -> HumanAgreement | None:
    """Over claims with at least ``reviewers`` reviewer labels (their first ones): Cohen's kappa for 2, Fleiss' for
    more. None when no claim has enough labels."""
    rated = [(c.claim_key, c.human_labels[:reviewers]) for c in claims if len(c.human_labels) >= reviewers]
    if not rated or reviewers < 2:
        return None
    if reviewers == 2:
        found = agreement([LabelPair(key, 0, a, b) for key, (a, b) in rated], n_boot=n_boot, seed=seed)
        return HumanAgreement("cohen", 2, found.kappa, found.observed)
    counts = np.array([[labels.count(h) for h in HUMAN_LABELS] for _, labels in rated])
    kappa, observed = fleiss_agreement(counts, n_boot=n_boot, seed=seed)
    return HumanAgreement("fleiss", reviewers, kappa, observed)


def verifier_agreement(claims: Sequence[ReviewedClaim], *, n_boot: int = 2000, seed: int = 0) -> Agreement | None:
    """The verifier's verdict against every human label (reviewers' and the adjudicator's), claims resampled
    whole; its slices by what the verifier said show where it errs."""
    pairs = [LabelPair(c.claim_key, i, c.verdict, review.label) for c in claims for i, review in enumerate(c.reviews)]
    return agreement(pairs, n_boot=n_boot, seed=seed) if pairs else None


class AgreementReporter:
    def __init__(self, reviewers: int, n_boot: int = 2000, seed: int = 0):
        self.reviewers = reviewers
        self.boot = {"n_boot": n_boot, "seed": seed}
        self.scores = ScoreChecker(n_boot=n_boot, seed=seed)

    def report(self, claims: Sequence[ReviewedClaim]) -> AgreementReport:
        def one(route: str, members: Sequence[ReviewedClaim]) -> RouteAgreement:
            return RouteAgreement(
                route, human_agreement(members, self.reviewers, **self.boot), verifier_agreement(members, **self.boot)
            )

        routes = sorted({c.route for c in claims})
        disputed = tuple(
            Disagreement(c.claim_key, c.route, tuple((r.reviewer, r.label) for r in c.reviews))
            for c in claims
            if c.disputed
        )
        versions = sorted({c.verifier_version for c in claims})
        return AgreementReport(
            one("all", claims),
            tuple(one(r, [c for c in claims if c.route == r]) for r in routes),
            tuple(one(f"verifier={v}", [c for c in claims if c.verifier_version == v]) for v in versions),
            disputed,
            tuple(self.scores.checks(claims)),
        )
