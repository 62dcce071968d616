"""Rates and intervals: the cluster-robust interval covers at 95% where a claim-level one does not."""

from __future__ import annotations

import numpy as np
import pytest

from services.rates.intervals import (
    Counts,
    Interval,
    proportion_interval,
    rates,
    ratio_interval,
)
from tests.support.bootstrap import bootstrap_interval  # the reference the analytic interval is checked against

RHO = 0.1  # intra-answer correlation of claim failures


def simulate_windows(rng, reps: int, answers: int, rate: float):
    """`reps` windows of `answers` answers, 1–8 claims each, beta-binomial claims."""
    n = rng.integers(1, 9, size=(reps, answers))
    scale = 1 / RHO - 1
    f = rng.binomial(n, rng.beta(rate * scale, (1 - rate) * scale, size=(reps, answers)))
    return (
        n,
        f,
        [
            Counts(
                events=answers,
                claims=int(n[i].sum()),
                failed=int(f[i].sum()),
                claims_sq=int((n[i] ** 2).sum()),
                failed_sq=int((f[i] ** 2).sum()),
                failed_claims=int((f[i] * n[i]).sum()),
            )
            for i in range(reps)
        ],
    )


def naive_claim_wilson(c: Counts) -> Interval:
    """What one gets by treating claims as independent: Wilson on failed/claims."""
    return proportion_interval(c.failed, c.claims)


COVERAGE_CASES = [(answers, rate) for answers in (100, 400, 1500, 5000) for rate in (0.02, 0.05, 0.1, 0.2)]


@pytest.mark.slow
def test_ratio_interval_covers_95_percent_when_claims_are_correlated():
    rng = np.random.default_rng(20261121)
    covered = naive_covered = total = 0
    per_case = {}
    for answers, rate in COVERAGE_CASES:
        reps = 600 if answers < 5000 else 300
        _, _, windows = simulate_windows(rng, reps, answers, rate)
        hits = sum(rate in ratio_interval(c) for c in windows)
        per_case[(answers, rate)] = hits / reps
        covered += hits
        naive_covered += sum(rate in naive_claim_wilson(c) for c in windows)
        total += reps
    coverage, naive = covered / total, naive_covered / total
    assert 0.935 <= coverage <= 0.965, per_case
    assert min(per_case.values()) >= 0.91, per_case
    assert naive <= 0.915, f"independent-claims Wilson covered {naive:.3f}; it should under-cover"


def test_ratio_interval_is_wider_than_claim_level_by_the_design_effect():
    rng = np.random.default_rng(3)
    _, _, (c,) = simulate_windows(rng, 1, 2000, 0.08)
    honest, naive = ratio_interval(c), naive_claim_wilson(c)
    ratio = honest.width / naive.width
    # expected design effect 1 + ρ(E n²/E n − 1) ≈ 1.47, so widths differ by about its square root
    assert 1.1 < ratio < 1.4


def test_ratio_interval_edges():
    assert ratio_interval(Counts.zero()) is None
    assert ratio_interval(Counts(events=3)) is None  # abstentions only, no claims
    zero = ratio_interval(Counts(events=200, claims=900, failed=0, claims_sq=5100))
    assert zero.lo == 0.0 and 0 < zero.hi < 0.03
    # rate 0 tells nothing about correlation: the bound assumes the worst (all claims of an answer agree)
    independent = proportion_interval(0, 900)
    assert zero.hi > independent.hi
    one = ratio_interval(Counts(events=200, claims=900, failed=900, claims_sq=5100, failed_sq=5100, failed_claims=5100))
    assert one.hi == 1.0 and 0.97 < one.lo < 1.0
    mid = Counts(events=100, claims=450, failed=45, claims_sq=2550, failed_sq=120, failed_claims=400)
    interval = ratio_interval(mid)
    assert interval.lo < 0.1 < interval.hi


def test_proportion_interval_is_wilson():
    i = proportion_interval(0, 10)
    assert i.lo == 0.0 and i.hi == pytest.approx(0.2775, abs=1e-4)
    i = proportion_interval(5, 10)
    assert (i.lo, i.hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert proportion_interval(0, 0) is None
    with pytest.raises(ValueError, match="k <= n"):
        proportion_interval(11, 10)
    with pytest.raises(ValueError, match="level"):
        proportion_interval(1, 10, level=95)


def test_bootstrap_resamples_items_and_agrees_with_the_ratio_interval():
    rng = np.random.default_rng(11)
    n, f, (c,) = simulate_windows(rng, 1, 1500, 0.1)
    boot = bootstrap_interval(f[0], n[0], n_boot=2000, seed=5)
    honest = ratio_interval(c)
    assert boot.lo < c.rate < boot.hi
    assert abs(boot.width / honest.width - 1) < 0.15
    assert bootstrap_interval(f[0], n[0], n_boot=2000, seed=5) == boot  # seeded
    assert bootstrap_interval(f[0], n[0], n_boot=2000, seed=6) != boot


def test_bootstrap_coverage_on_clustered_data():
    rng = np.random.default_rng(12)
    n, f, _ = simulate_windows(rng, 300, 300, 0.1)
    hits = sum(0.1 in bootstrap_interval(f[i], n[i], n_boot=400, seed=i) for i in range(300))
    assert 0.91 <= hits / 300 <= 0.98


def test_counts_from_row_add_and_zero():
    row = {
        "dim": "",
        "value": "",
        "route": "r",
        "minute": "2026-11-21 09:14:00",
        "events": 3,
        "claims": 7,
        "failed": 2,
        "claims_sq": 19,
        "served": 3,
        "served_unsafe": 1,
    }
    c = Counts.from_row(row)
    assert (c.events, c.claims, c.failed, c.claims_sq, c.trivial) == (3, 7, 2, 19, 0)
    assert c + Counts.zero() == c
    assert (c + c).claims == 14 and (c + c).served_unsafe == 2
    assert c.rate == pytest.approx(2 / 7)
    assert Counts.zero().rate is None
    with pytest.raises(ValueError, match="'claims' must not be negative"):
        Counts.from_row({"claims": -1})
    with pytest.raises(ValueError, match="'failed' must be a whole number"):
        Counts.from_row({"failed": "two"})


def test_rates_report_every_rate_with_volume():
    c = Counts(
        events=100,
        claims=400,
        failed=40,
        claims_sq=2000,
        failed_sq=60,
        failed_claims=300,
        unsupported=30,
        contradicted=10,
        served=90,
        served_unsafe=20,
        abstained=10,
        answerable=80,
        answerable_abstained=4,
        unanswerable=20,
        unanswerable_abstained=6,
    )
    table = rates(c)
    assert table["hallucination"].value == pytest.approx(0.1) and table["hallucination"].denominator == 400
    assert table["unsupported"].value == pytest.approx(0.075)
    assert table["unsafe_serve"].value == pytest.approx(20 / 90)
    assert table["correct_abstention"].value == pytest.approx(0.3)
    assert table["over_refusal"].value == pytest.approx(0.05)
    for rate in table.values():
        assert rate.interval is None or rate.interval.lo <= rate.value <= rate.interval.hi
    # a verdict's share has no Σ sums of its own: its interval is the conservative one
    assert table["contradicted"].interval.width > proportion_interval(10, 400).width
