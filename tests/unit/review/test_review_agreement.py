"""Kappa on constructed label sets, against hand-computed and textbook values; intervals resample claims."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from services.review.agreement import AgreementReporter, fleiss_agreement, fleiss_kappa, human_agreement
from services.review.labels import Review, ReviewedClaim

AT = datetime(2026, 11, 21, tzinfo=UTC)

# Fleiss (1971) as worked on Wikipedia's "Fleiss' kappa" page: 10 subjects, 14 raters, 5 categories, kappa 0.210.
FLEISS_TABLE = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def claim(
    key: str, verdict: str, *labels: str, route: str = "r", adjudicator: str | None = None, reviewers: int | None = None
) -> ReviewedClaim:
    reviews = [Review(f"h{i}", "reviewer", label, AT) for i, label in enumerate(labels)]
    if adjudicator:
        reviews.append(Review("adj", "adjudicator", adjudicator, AT))
    return ReviewedClaim(key, route, verdict, "v1", "production", 1.0, reviewers or len(labels), tuple(reviews))


def test_fleiss_kappa_matches_the_textbook_example():
    assert fleiss_kappa(FLEISS_TABLE) == pytest.approx(0.2099, abs=5e-5)
    kappa, observed = fleiss_agreement(FLEISS_TABLE, n_boot=500)
    assert kappa.value == pytest.approx(0.2099, abs=5e-5) and observed.value == pytest.approx(0.3780, abs=5e-5)
    assert kappa.lo < kappa.value < kappa.hi


def test_fleiss_kappa_refuses_unequal_raters():
    with pytest.raises(ValueError, match="same number of raters"):
        fleiss_kappa(np.array([[2, 1], [1, 1]]))


def test_cohen_kappa_for_two_reviewers_is_exact():
    # 50 claims: both supported 20, A supported / B contradicted 5, A contradicted / B supported 10, both contradicted
    # 15. p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, so kappa = 0.4.
    cells = (
        [("supported", "supported")] * 20
        + [("supported", "contradicted")] * 5
        + [("contradicted", "supported")] * 10
        + [("contradicted", "contradicted")] * 15
    )
    claims = [claim(f"c{i}", "supported", a, b) for i, (a, b) in enumerate(cells)]
    found = human_agreement(claims, 2, n_boot=500)
    assert found.method == "cohen" and found.kappa.value == pytest.approx(0.4)
    assert found.observed.value == pytest.approx(0.7) and found.kappa.lo < 0.4 < found.kappa.hi


def test_three_reviewers_use_fleiss_over_the_guide_labels():
    claims = [
        claim("a", "supported", "supported", "supported", "supported"),
        claim("b", "supported", "contradicted", "contradicted", "supported"),
        claim("c", "supported", "stale", "stale", "stale"),
    ]
    found = human_agreement(claims, 3, n_boot=200)
    # P_i = 1, 1/3, 1 -> P̄ = 7/9; shares (supported 4/9, contradicted 2/9, stale 3/9) -> P̄e = 29/81.
    assert found.method == "fleiss"
    assert found.kappa.value == pytest.approx((7 / 9 - 29 / 81) / (1 - 29 / 81))


def test_the_interval_resamples_claims_not_labels():
    # Every claim has 2 reviewers; if labels were resampled singly, a claim's labels would be split.
    rng = np.random.default_rng(1)
    claims = [
        claim(f"c{i}", "supported", *(["supported"] * 2 if rng.random() < 0.6 else ["contradicted", "supported"]))
        for i in range(40)
    ]
    a = AgreementReporter(2, n_boot=300).report(claims).overall.verifier
    b = AgreementReporter(2, n_boot=300).report(claims + []).overall.verifier
    assert a.kappa.items == 40 and a.kappa.denominator == 80 and (a.kappa.lo, a.kappa.hi) == (b.kappa.lo, b.kappa.hi)


def test_report_per_route_with_confusion_and_disputes():
    claims = [
        claim("a", "contradicted", "contradicted", "contradicted", route="x"),
        claim("b", "supported", "supported", "overreach", route="x"),
        claim("c", "supported", "supported", "overreach", route="y", adjudicator="overreach"),
        claim("d", "no_source", "unsupported", "unsupported", route="y"),
    ]
    report = AgreementReporter(2, n_boot=200).report(claims)
    assert [r.route for r in report.routes] == ["x", "y"]
    assert [v.route for v in report.verifier_versions] == ["verifier=v1"]
    assert [d.claim_key for d in report.disagreements] == ["b"], "c is settled by its adjudicator"
    verifier = report.overall.verifier
    matrix = dict(zip(verifier.labels, verifier.confusion))
    assert matrix["supported"][verifier.labels.index("overreach")] == 3  # b once, c twice (reviewer + adjudicator)
    assert claims[2].settled == "overreach" and claims[1].settled is None and claims[3].human_failed is True
    assert claims[1].human_failed is None and claims[0].settled == "contradicted"
