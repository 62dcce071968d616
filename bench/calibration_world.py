"""Simulated traffic, verifier and reviewers for calibration coverage (tests/unit/review and bench/calibration.py).

Per route: answers of 1-5 claims sharing a beta-distributed failure propensity (claims of one answer are
correlated); a verifier whose sensitivity and specificity for "failed" differ by route; claims sampled for
review stratified by the verifier's verdict with the product's ``allocate`` (rare verdicts oversampled,
weights = stratum size / quota); two reviewers who each put a claim on the wrong side with a known error
rate; a disputed claim settled by an adjudicator with the same error rate, as `review adjudicate` does.
The true rate is the route's expected claim-level failure rate (the answers' propensity mean).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from services.rates.intervals import Counts, ratio_interval
from services.review.calibration import Traffic
from services.review.labels import ADJUDICATOR, REVIEWER, Review, ReviewedClaim
from services.review.sampling import allocate

NOW = datetime(2026, 11, 21, tzinfo=UTC)
VERSION = "nli@1"


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

    def draw(self, rng: np.random.Generator) -> tuple[list[Traffic], list[ReviewedClaim]]:
        traffic, claims = [], []
        for truth in self.routes:
            route = self.route(rng, truth)
            traffic.append(route.traffic)
            claims.extend(self.review(rng, route, allocate(route.sizes, self.labels)))
        return traffic, claims

    def route(self, rng: np.random.Generator, truth: RouteTruth) -> RouteDraw:
        """A window of the route's answers: each claim's truth and the verifier's verdict."""
        n = rng.integers(1, 6, size=self.answers)
        a = truth.true_rate * self.concentration
        propensity = rng.beta(a, self.concentration - a, size=self.answers)
        failed = rng.random(n.sum()) < np.repeat(propensity, n)
        flagged = np.where(
            failed, rng.random(failed.size) < truth.sensitivity, rng.random(failed.size) > truth.specificity
        )
        per_answer = np.add.reduceat(flagged, np.r_[0, np.cumsum(n)[:-1]])
        patterns, counts = np.unique(np.column_stack([per_answer, n]), axis=0, return_counts=True)
        traffic = Traffic(
            truth.route, VERSION, patterns[:, 0].astype(float), patterns[:, 1].astype(float), counts.astype(float)
        )
        return RouteDraw(truth.route, traffic, failed, flagged, n)

    def review(
        self, rng: np.random.Generator, route: RouteDraw, quotas: dict[str, int], taken: frozenset[int] = frozenset()
    ) -> list[ReviewedClaim]:
        """Claims of each verdict stratum ({verdict: quota}) drawn for review, leaving out those ``taken``,
        weighted stratum size / quota, and labelled."""
        claims = []
        for verdict, quota in quotas.items():
            members = route.strata[verdict]
            picked = rng.choice(np.setdiff1d(members, list(taken)), size=quota, replace=False)
            weight = len(members) / quota
            claims.extend(self._reviewed(rng, route.route, verdict, weight, route.failed[picked], picked))
        return claims

    def _reviewed(
        self, rng, route: str, verdict: str, weight: float, truly_failed: np.ndarray, picked: np.ndarray
    ) -> list[ReviewedClaim]:
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
                    f"{route}:{key}",
                    route,
                    verdict,
                    VERSION,
                    "production",
                    weight,
                    2,
                    tuple(reviews),
                    stratum=f"{route}|{verdict}|",
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

    @property
    def strata(self) -> dict[str, np.ndarray]:
        """The claims of each verdict stratum the review samples from."""
        return {"contradicted": np.flatnonzero(self.flagged), "supported": np.flatnonzero(~self.flagged)}

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
