"""The verifier's score in review: bands in the store's strata and traffic, and labels sent where it is least sure."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from services.core.score_bands import N_BANDS, N_CELLS, band, band_label, cell
from services.review.sampling import ReviewSampler, allocate, band_knowledge, by_confidence, stratum_parts
from services.review.traffic import Traffic
from services.store.review import ReviewRepository
from tests.support.review_world import T0, answer, write_answers

SPAN = (T0 - timedelta(hours=1), T0 + timedelta(hours=1))


def test_bands_are_fixed_edges_and_unscored_is_band_zero():
    assert [band(s) for s in (None, 0.1, 0.5, 0.69, 0.7, 0.85, 0.949, 0.95, 1.0)] == [0, 1, 2, 2, 3, 4, 4, 5, 5]
    assert [band_label(b) for b in range(N_BANDS)] == [
        "unscored",
        "< 0.50",
        "0.50-0.70",
        "0.70-0.85",
        "0.85-0.95",
        ">= 0.95",
    ]
    assert cell(False, 3) == 3 and cell(True, 3) == N_BANDS + 3


def test_without_scores_the_strata_are_today_s():
    sizes = {"r|supported|": 900, "r|contradicted|": 100}
    assert (
        by_confidence(allocate(sizes, 40), sizes) == allocate(sizes, 40) == {"r|supported|": 20, "r|contradicted|": 20}
    )


def test_with_scores_labels_go_where_the_verifier_is_least_sure():
    """Two bands of passed claims as large as each other: the unsure one (0.50-0.70) gets about twice the sure
    one's (>= 0.95) labels, as a Neyman split by the spread a verdict that sure has. By verdict alone (or with the
    bands spread evenly) they would get the same."""
    sizes = {"r|supported#2|": 400, "r|supported#5|": 400, "r|contradicted#4|": 200}
    quotas = by_confidence(allocate(sizes, 60), sizes)
    assert sum(quotas.values()) == 60
    unsure, sure = quotas["r|supported#2|"], quotas["r|supported#5|"]
    assert unsure > 1.8 * sure, quotas
    assert quotas["r|contradicted#4|"] >= 6  # each verdict class keeps a tenth at least


def test_labels_already_settled_steer_the_next_day_s_sample():
    """The sure band's labels found the verifier wrong a third of the time: it is not as sure as its score says,
    and the next day's labels go there."""
    sizes = {"r|supported#2|": 400, "r|supported#5|": 400}
    prior = by_confidence(allocate(sizes, 60), sizes)

    class Label:
        def __init__(self, b, wrong):
            self.route, self.weight, self.verifier_failed, self.band = "r", 1.0, False, b
            self.human_failed = wrong

    labels = [Label(5, i % 3 == 0) for i in range(60)] + [Label(2, i % 10 == 0) for i in range(60)]
    learned = by_confidence(allocate(sizes, 60), sizes, band_knowledge(labels))
    assert learned["r|supported#5|"] > 2 * prior["r|supported#5|"], (prior, learned)


def test_stratum_parts_reads_the_band_and_survives_bars_in_the_route():
    assert stratum_parts("eu|billing|overreach#4|iss-1") == ("eu|billing", "overreach", 4)
    assert stratum_parts("billing|supported|") == ("billing", "supported", 0)


@pytest.fixture
def scored(store):
    events = [
        answer(0, scores=(0.97, 0.55)),
        answer(1, scores=(0.95, 0.9)),  # at an edge: the band above, in the store as here
        answer(2, scores=(0.6, None)),
        answer(3, verdicts=("supported", "trivial", "overreach"), scores=(0.99, 0.2, 0.75)),
        answer(4),
    ]
    write_answers(store, events)
    return ReviewRepository(store)


def test_the_store_stratifies_by_verdict_and_score_band(scored):
    assert scored.stratum_sizes(*SPAN) == {
        "billing-faq|supported#5|": 3,
        "billing-faq|supported#2|": 1,
        "billing-faq|contradicted#2|": 1,
        "billing-faq|contradicted#4|": 1,
        "billing-faq|contradicted|": 2,
        "billing-faq|overreach#3|": 1,
        "billing-faq|supported|": 1,
    }
    result = ReviewSampler(scored, 100, 2).sample(*SPAN, T0)
    assert result.queued == 10
    queued = scored.queued("ev-billing-faq-0:1")
    assert queued["score"] == pytest.approx(0.55) and queued["stratum"] == "billing-faq|contradicted#2|"
    assert scored.queued("ev-billing-faq-2:1")["score"] is None


def test_the_traffic_counts_claims_per_verdict_and_band_with_their_answer_level_cross_products(scored):
    (row,) = scored.answer_profile(*SPAN)
    traffic = Traffic.from_row(row)
    per_answer = np.zeros((5, N_CELLS))
    for i, claims in enumerate(
        [[(False, 5), (True, 2)], [(False, 5), (True, 4)], [(False, 2), (True, 0)], [(False, 5), (True, 3)]]
        + [[(False, 0), (True, 0)]]
    ):
        for flagged, b in claims:
            per_answer[i, cell(flagged, b)] += 1
    assert traffic.cells is not None and traffic.cross is not None
    np.testing.assert_allclose(traffic.cells, per_answer.sum(axis=0))
    np.testing.assert_allclose(traffic.cross, per_answer.T @ per_answer)
