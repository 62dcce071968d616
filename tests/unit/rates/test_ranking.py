"""A long route list is ranked by figures computed for every route at once (``ranking_entries``) and only its page
is given every figure (``rate_entry``): the two must agree to the last bit, or the page would sort one way and
show another."""

from __future__ import annotations

import numpy as np

from bench.sampling_world import draw
from services.rates.intervals import Counts
from services.rates.report import RANKING_SUMS, ranking_entries, rate_entry


def rows() -> list[dict]:
    """Store rows as rate_minute sums them: sampled and fully verified answers, sums from before weights were
    kept (w_events 0), a route without checkable claims, failures at 0% and 100%, and huge counts."""
    rng = np.random.default_rng(49)
    found = []
    for i in range(60):
        weighted, unweighted = draw(rng, answers=int(rng.integers(20, 400)))[1:]
        found += [weighted.as_dict() | {"route": f"sampled-{i}"}, unweighted.as_dict() | {"route": f"verified-{i}"}]
    before_weights = Counts(events=4, claims=10, failed=3, claims_sq=30, failed_sq=5, failed_claims=9)
    for route, c in (
        ("before-weights", before_weights),
        ("no-claims", Counts(events=3, trivial=3)),
        ("all-fail", Counts(events=2, claims=4, failed=4, claims_sq=8, failed_sq=8, failed_claims=8)),
        ("none-fail", Counts(events=2, claims=4, claims_sq=8)),
        (
            "huge",
            Counts(
                events=40_000_000,
                claims=123_456_789,
                failed=7_654_321,
                claims_sq=400_000_000,
                failed_sq=9_000_000,
                failed_claims=30_000_000,
            ),
        ),
    ):
        found.append(c.as_dict() | {"route": route})
    return found


def test_ranking_figures_are_rate_entrys_to_the_last_bit():
    given = rows()
    assert ranking_entries(given) == [
        {k: rate_entry(r)[k] for k in ("route", "claims", "rate", "interval")} for r in given
    ]


def test_ranking_reads_only_its_sums():
    given = rows()
    assert ranking_entries([{k: r[k] for k in ("route", *RANKING_SUMS)} for r in given]) == ranking_entries(given)
    assert ranking_entries([]) == []
