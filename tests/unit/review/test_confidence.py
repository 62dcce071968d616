"""The verifier's confidence checked against settled labels: the reliability diagram, ECE and AUROC on constructed
labels, and the verifier alert when a new version's scores stop meaning what the old one's did."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.alerts.lifecycle.kinds import AGREEMENT_KIND
from services.review.agreement_alerts import AgreementDropTest, AgreementWatch, ScoreShiftTest, label_agreements
from services.review.confidence import ScoreChecker
from services.review.labels import Review, ReviewedClaim
from tests.support.review_world import T0

NOW = T0 + timedelta(days=40)


def labelled(
    scores_agreed: list[tuple[float, int, int]], version: str = "nli@1", days_ago: float = 1.0, weight: float = 1.0
) -> list[ReviewedClaim]:
    """(score, labels, of them agreeing with the verdict 'contradicted') -> settled claims."""
    at = NOW - timedelta(days=days_ago)
    out = []
    for score, n, agreed in scores_agreed:
        for i in range(n):
            label = "contradicted" if i < agreed else "supported"
            out.append(
                ReviewedClaim(
                    f"{version}-{days_ago}-{score}-{i}",
                    "billing-faq",
                    "contradicted",
                    version,
                    "production",
                    weight,
                    1,
                    (Review("ann", "reviewer", label, at),),
                    score=score,
                )
            )
    return out


def test_the_reliability_diagram_bins_the_score_and_says_how_often_each_tenth_was_right():
    claims = labelled([(0.95, 20, 19), (0.75, 10, 5), (0.55, 10, 5)])
    overall, route = ScoreChecker(n_boot=200).checks(claims)
    assert (overall.route, route.route) == ("all", "billing-faq") and overall.labels == 40
    assert [(b.low, b.labels, b.mean_score, b.agreement) for b in overall.bins] == [
        (0.5, 10, pytest.approx(0.55), 0.5),
        (pytest.approx(0.7), 10, pytest.approx(0.75), 0.5),
        (pytest.approx(0.9), 20, pytest.approx(0.95), 0.95),
    ]
    assert all(b.lo < b.agreement < b.hi for b in overall.bins)
    # ECE: the bins' |agreed - score| by their share: (10·0.05 + 10·0.25 + 20·0) / 40
    assert overall.ece.value == pytest.approx(0.075)
    assert overall.ece.lo <= 0.075 <= overall.ece.hi
    # AUROC: right verdicts' scores above wrong ones'. Right: 19 at .95, 5 at .75, 5 at .55; wrong: 1, 5, 5.
    pairs = 19 * (1 * 0.5 + 5 + 5) + 5 * (1 * 0 + 5 * 0.5 + 5) + 5 * (5 * 0.5)
    assert overall.auroc.value == pytest.approx(pairs / (29 * 11))


def test_the_labels_weigh_as_the_traffic_they_stand_for():
    """The review oversamples the bands the verifier is unsure of: weighted, the sure band's agreement counts for
    the traffic it stands for."""
    claims = labelled([(0.95, 10, 10)], weight=9.0) + labelled([(0.55, 10, 5)], weight=1.0)
    [check, _] = ScoreChecker(n_boot=100).checks(claims)
    assert check.agreement == pytest.approx((90 + 5) / 100)
    assert check.mean_score == pytest.approx((90 * 0.95 + 10 * 0.55) / 100)


def test_scores_without_labels_or_eval_claims_give_no_check():
    eval_claim = ReviewedClaim(
        "e", "r", "contradicted", "v", "eval", 0.0, 1, (Review("a", "reviewer", "supported", NOW),), score=0.9
    )
    unscored = labelled([(0.9, 3, 3)])
    unscored = [
        ReviewedClaim(c.claim_key, c.route, c.verdict, c.verifier_version, c.origin, c.weight, 1, c.reviews)
        for c in unscored
    ]
    assert ScoreChecker().checks([eval_claim, *unscored]) == []


def old_and_new(new: list[tuple[float, int, int]]) -> list:
    before = labelled([(0.95, 60, 57), (0.65, 60, 39)], "nli@1", days_ago=20)  # means what it says: 95%, 65%
    return label_agreements(before + labelled(new, "nli@2", days_ago=1))


def test_a_version_whose_scores_mean_less_fires_the_verifier_alert():
    """nli@2 agrees as often as nli@1 did (80%), so agreement has not dropped; but it says 0.95 of everything."""
    labels = old_and_new([(0.95, 120, 96)])
    assert AgreementDropTest().test(labels, NOW) is not None
    assert not AgreementDropTest().test(labels, NOW).significant
    shift = ScoreShiftTest().test(labels)
    assert shift is not None and shift.significant
    assert (shift.before.version, shift.after.version) == ("nli@1", "nli@2")
    assert shift.expected == pytest.approx(0.95 + 0.0)  # nli@1's gap was nil
    [alert] = AgreementWatch(AgreementDropTest()).step(labels, {}, NOW)
    assert alert.kind == AGREEMENT_KIND and alert.route == "billing-faq"
    assert alert.rate == pytest.approx(0.8) and alert.baseline == pytest.approx(0.95)
    assert "nli@2's scores no longer mean what nli@1's did" in alert.expected_basis
    assert "agree 80% at 0.95" in alert.expected_basis
    assert alert.suspect_changes[0]["value"] == "nli@2"


def test_a_version_whose_score_no_longer_sorts_right_from_wrong_fires_too():
    """Same mean score and agreement as before, but the score is the same for right and wrong verdicts."""
    labels = old_and_new([(0.8, 60, 48), (0.8, 60, 48)])
    shift = ScoreShiftTest().test(labels)
    assert shift is not None and shift.significant and "AUROC 0.50" in shift.what


def test_a_version_whose_scores_keep_their_meaning_stays_quiet():
    labels = old_and_new([(0.95, 60, 56), (0.65, 60, 40)])
    shift = ScoreShiftTest().test(labels)
    assert shift is not None and not shift.significant
    assert AgreementWatch(AgreementDropTest()).step(labels, {}, NOW) == []


def test_too_few_scored_labels_of_the_new_version_say_nothing():
    assert ScoreShiftTest().test(old_and_new([(0.95, 10, 5)])) is None
