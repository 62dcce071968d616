"""A world of stratified sampled verification (issue 24): short answers all verified, long ones 10% of the time,
and long answers hallucinate more, so the verified sample over-represents short answers. Used by
tests/unit/rates/test_sampling_weights.py and bench/sampling.py.

Each draw is a fresh population of answers (1-2 claims when short, 4-8 when long; claims of one answer share
a propensity, so they are correlated) and one Bernoulli sample of it at each answer's rate. The estimand is
the population's own claim-level rate."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.rates.intervals import Counts


@dataclass(frozen=True)
class Stratum:
    share: float  # of the answers
    claims: tuple[int, int]
    failure: float  # mean per-claim failure probability
    rate: float  # sampling.rate: the chance an answer is verified


SHORT = Stratum(share=0.7, claims=(1, 2), failure=0.05, rate=1.0)
LONG = Stratum(share=0.3, claims=(4, 8), failure=0.25, rate=0.1)
CONCENTRATION = 8.0  # of the Beta each answer's propensity is drawn from: lower, more within-answer correlation


def sums(claims: np.ndarray, failed: np.ndarray, weights: np.ndarray) -> Counts:
    """The rate_minute sums of these answers (weights 1 / sampling.rate), as the store would add them (every
    failed claim unsupported)."""
    w = weights
    return Counts(
        events=len(claims),
        claims=int(claims.sum()),
        failed=int(failed.sum()),
        claims_sq=int((claims**2).sum()),
        failed_sq=int((failed**2).sum()),
        failed_claims=int((failed * claims).sum()),
        sampled=int((w > 1).sum()),
        w_events=float(w.sum()),
        w2_events=float((w * w).sum()),
        w_claims=float(w @ claims),
        w_failed=float(w @ failed),
        w2_claims=float((w * w) @ claims),
        w2_claims_sq=float((w * w) @ (claims**2)),
        w2_failed_sq=float((w * w) @ (failed**2)),
        w2_failed_claims=float((w * w) @ (failed * claims)),
        supported=int((claims - failed).sum()),
        unsupported=int(failed.sum()),
        w_supported=float(w @ (claims - failed)),
        w_unsupported=float(w @ failed),
    )


def draw(rng: np.random.Generator, answers: int = 6000) -> tuple[float, Counts, Counts]:
    """(the population's rate, the sample's weighted sums, the same sample's sums as if unweighted)."""
    claims, failed, rates = [], [], []
    for stratum, n in ((SHORT, int(answers * SHORT.share)), (LONG, answers - int(answers * SHORT.share))):
        k = rng.integers(stratum.claims[0], stratum.claims[1] + 1, size=n)
        a = stratum.failure * CONCENTRATION
        propensity = rng.beta(a, CONCENTRATION - a, size=n)
        claims.append(k)
        failed.append(rng.binomial(k, propensity))
        rates.append(np.full(n, stratum.rate))
    claims, failed, rates = np.concatenate(claims), np.concatenate(failed), np.concatenate(rates)
    truth = failed.sum() / claims.sum()
    verified = rng.random(len(claims)) < rates
    k, f, w = claims[verified], failed[verified], 1 / rates[verified]
    return float(truth), sums(k, f, w), sums(k, f, np.ones_like(w))
