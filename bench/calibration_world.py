"""Simulated traffic, verifier and reviewers for calibration coverage (tests/unit/review and bench/calibration.py).

Per route: answers of 1-5 claims sharing a beta-distributed failure propensity (claims of one answer are
correlated); a verifier whose sensitivity and specificity for "failed" differ by route; claims sampled for
review stratified by the verifier's verdict with the product's ``allocate`` (rare verdicts oversampled,
weights = stratum size / quota); two reviewers who each put a claim on the wrong side with a known error
rate; a disputed claim settled by an adjudicator with the same error rate, as `review adjudicate` does.
The true rate is the route's expected claim-level failure rate (the answers' propensity mean).

With ``score_gap`` set, the verifier also sends a score (its confidence in its verdict) per claim: the logistic
of a normal with unit spread, centred at SCORE_CENTRE for a right verdict and ``score_gap`` lower for a wrong one,
so the score tells wrong verdicts from right ones with AUROC Φ(gap / √2): 0.86 at a gap of 1.53 (about what an
LLM judge's confidence gives), 0.66 at 0.58. Review then samples by verdict x score band, as the product does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property

import numpy as np

from services.core.score_bands import N_CELLS, UNSCORED, bands_of, cell
from services.rates.intervals import Counts, ratio_interval
from services.review.calibration import settled_labels
from services.review.labels import ADJUDICATOR, REVIEWER, Review, ReviewedClaim
from services.review.sampling import allocate, band_knowledge, by_confidence, stratum_parts
from services.review.traffic import Traffic

NOW = datetime(2026, 11, 21, tzinfo=UTC)
VERSION = "nli@1"
SCORE_CENTRE = 2.2  # logit of a right verdict's typical score (0.90)
SCORE_GAPS = {"sharp": 1.53, "weak": 0.58}  # AUROC 0.86 and 0.66


@dataclass(frozen=True)
class RouteTruth:
    route: str
    true_rate: float
    sensitivity: float
    specificity: float


# Asymmetric errors: each verifier misses failures and invents them at different rates, so raw rates are biased
# (billing-faq reads low, parcel-status high).
ROUTES = (
    RouteTruth("billing-faq", 0.20, 0.70, 0.97),
    RouteTruth("parcel-status", 0.10, 0.92, 0.90),
    RouteTruth("review-digest", 0.30, 0.80, 0.99),
)


@dataclass(frozen=True)
class World:
    answers: int = 2000  # per route, in the window
    labels: int = 240  # per route, reviewed (split over the verifier's two verdicts)
    reviewer_error: float = 0.05  # chance one reviewer puts a claim on the wrong side
    concentration: float = 8.0  # beta(a, b) with a + b = this: claims of one answer are correlated
    routes: tuple[RouteTruth, ...] = ROUTES
    score_gap: float | None = None  # logit gap between right and wrong verdicts' scores; None: no scores
    review_days: int = 2  # with scores: the days the labels are drawn over, each learning from the ones before

    def draw(self, rng: np.random.Generator) -> tuple[list[Traffic], list[ReviewedClaim]]:
        routes, claims = self.draw_routes(rng)
        return [r.traffic for r in routes], claims

    def draw_routes(self, rng: np.random.Generator) -> tuple[list[RouteDraw], list[ReviewedClaim]]:
        """Every route's window and its reviewed claims."""
        routes, claims = [], []
        for truth in self.routes:
            route = self.route(rng, truth)
            routes.append(route)
            claims.extend(self.sample(rng, route, self.labels))
        return routes, claims

    def route(self, rng: np.random.Generator, truth: RouteTruth) -> RouteDraw:
        """A window of the route's answers: each claim's truth and the verifier's verdict."""
        n = rng.integers(1, 6, size=self.answers)
        a = truth.true_rate * self.concentration
        propensity = rng.beta(a, self.concentration - a, size=self.answers)
        failed = rng.random(n.sum()) < np.repeat(propensity, n)
        flagged = np.where(
            failed, rng.random(failed.size) < truth.sensitivity, rng.random(failed.size) > truth.specificity
        )
        starts = np.r_[0, np.cumsum(n)[:-1]]
        per_answer = np.add.reduceat(flagged, starts)
        patterns, counts = np.unique(np.column_stack([per_answer, n]), axis=0, return_counts=True)
        scores = None
        if self.score_gap is not None:
            logit = rng.normal(SCORE_CENTRE, 1.0, failed.size) - self.score_gap * (flagged != failed)
            scores = 1 / (1 + np.exp(-logit))
        bands = np.zeros(failed.size, dtype=np.int64) if scores is None else bands_of(scores)
        cells = cell(True, 0) * flagged + bands  # cell(flagged, band), vectorised
        per_cell = np.zeros((len(n), N_CELLS))
        np.add.at(per_cell, (np.repeat(np.arange(len(n)), n), cells), 1.0)
        traffic = Traffic(
            truth.route,
            VERSION,
            patterns[:, 0].astype(float),
            patterns[:, 1].astype(float),
            counts.astype(float),
            cells=per_cell.sum(axis=0),
            cross=per_cell.T @ per_cell,
        )
        return RouteDraw(truth.route, traffic, failed, flagged, n, scores)

    def sample(self, rng: np.random.Generator, route: RouteDraw, labels: int) -> list[ReviewedClaim]:
        """``labels`` claims reviewed as the product's daily sampler picks them: by verdict (``allocate``); with
        scores, by verdict x band over ``review_days`` days, each where the verifier is least sure as far as the
        days before have shown (``by_confidence``). Each day's labels keep their day's weights (stratum size /
        quota), as the product's do."""
        if self.score_gap is None:
            return self.review(rng, route, allocate(route.sizes, labels))
        claims: list[ReviewedClaim] = []
        for day in range(self.review_days):
            taken = Counter(c.stratum for c in claims)
            left = {s: n - taken[s] for s, n in route.sizes.items()}
            quota = labels * (day + 1) // self.review_days - len(claims)
            known = band_knowledge(settled_labels(claims))
            keys = frozenset(int(c.claim_key.rsplit(":", 1)[1]) for c in claims)
            claims += self.review(rng, route, by_confidence(allocate(left, quota), left, known), keys)
        return claims

    def review(
        self, rng: np.random.Generator, route: RouteDraw, quotas: dict[str, int], taken: frozenset[int] = frozenset()
    ) -> list[ReviewedClaim]:
        """Claims of each verdict stratum ({verdict: quota}) drawn for review, leaving out those ``taken``,
        weighted stratum size / quota, and labelled."""
        claims = []
        for stratum, quota in quotas.items():
            members = route.strata[stratum]
            picked = rng.choice(np.setdiff1d(members, list(taken)), size=quota, replace=False)
            weight = len(members) / quota
            claims.extend(self._reviewed(rng, route, stratum, weight, picked))
        return claims

    def _reviewed(self, rng, route: RouteDraw, stratum: str, weight: float, picked: np.ndarray) -> list[ReviewedClaim]:
        truly_failed = route.failed[picked]
        verdict = stratum_parts(stratum)[1]
        wrong = rng.random((truly_failed.size, 3)) < self.reviewer_error
        says_failed = truly_failed[:, None] ^ wrong  # two reviewers, then the adjudicator
        out = []
        for i, key in enumerate(picked):
            words = ["contradicted" if f else "supported" for f in says_failed[i]]
            reviews = [Review("ann", REVIEWER, words[0], NOW), Review("bob", REVIEWER, words[1], NOW)]
            if words[0] != words[1]:
                reviews.append(Review("cy", ADJUDICATOR, words[2], NOW))
            out.append(
                ReviewedClaim(
                    f"{route.route}:{key}",
                    route.route,
                    verdict,
                    VERSION,
                    "production",
                    weight,
                    2,
                    tuple(reviews),
                    stratum=stratum,
                    score=None if route.scores is None else float(route.scores[key]),
                )
            )
        return out


@dataclass(frozen=True)
class RouteDraw:
    route: str
    traffic: Traffic
    failed: np.ndarray  # per claim: truly failed
    flagged: np.ndarray  # per claim: the verifier said so
    answer_claims: np.ndarray  # per answer, in order: its claims
    scores: np.ndarray | None = None  # per claim: the verifier's confidence in its verdict

    @cached_property
    def strata(self) -> dict[str, np.ndarray]:
        """The claims of each stratum the review samples from: 'route|verdict|', with the band when scored."""
        bands = np.zeros(len(self.flagged), dtype=np.int64) if self.scores is None else bands_of(self.scores)
        codes = cell(True, 0) * self.flagged + bands
        out = {}
        for code in sorted(np.unique(codes), key=lambda c: (-c // cell(True, 0), c)):  # flagged first
            flagged, band_no = divmod(int(code), cell(True, 0))
            verdict = "contradicted" if flagged else "supported"
            out[f"{self.route}|{verdict if band_no == UNSCORED else f'{verdict}#{band_no}'}|"] = np.flatnonzero(
                codes == code
            )
        return out

    @property
    def sizes(self) -> dict[str, int]:
        return {verdict: len(ix) for verdict, ix in self.strata.items()}


def raw_interval(t: Traffic) -> tuple[float, float]:
    """The uncorrected rate's answer-clustered interval, as `claimwatch rates` shows it."""
    f, n, a = t.failed, t.claims, t.answers
    found = ratio_interval(
        Counts(
            events=int(a.sum()),
            claims=int(a @ n),
            failed=int(a @ f),
            claims_sq=int(a @ (n * n)),
            failed_sq=int(a @ (f * f)),
            failed_claims=int(a @ (f * n)),
        )
    )
    return found.lo, found.hi
