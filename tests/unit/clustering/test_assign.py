from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bench.approximate_assign import ApproximatePredictAssigner
from clustering.assign import OnlineAssigner
from clustering.config import DEFAULT_CONFIG
from clustering.embed import HashingEmbedder
from clustering.pipeline import IssuePipeline
from clustering.records import FailingClaim
from clustering.track import IssueTracker
from clustering.vectorize import ClaimVectorizer

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
CONFIG = replace(DEFAULT_CONFIG, umap_min_points=10**9)
TAILS = ["online", "by phone", "in store", "for members", "in europe", "at night", "for teams", "on mobile"]


def families(offset=0, n=24):
    refund = [
        FailingClaim(
            f"r{i + offset:03d}", f"annual plans can be refunded within {i} days {TAILS[i % 8]}", route="billing-faq"
        )
        for i in range(n)
    ]
    parcel = [
        FailingClaim(
            f"p{i + offset:03d}",
            f"the courier delivers parcel {i}-77 on friday {TAILS[(i + 3) % 8]}",
            route="parcel-status",
        )
        for i in range(n)
    ]
    return refund + parcel


@pytest.fixture(scope="module")
def fitted():
    embedder = HashingEmbedder()
    run = IssuePipeline.from_config(CONFIG, embedder).fit(families(), NOW)
    tracker = IssueTracker(CONFIG)
    issues = tracker.match([], run, NOW)
    vectorizer = ClaimVectorizer(embedder, CONFIG.fields)
    return run, tracker, issues, vectorizer


def issue_named(issues, word):
    return next(i.issue_id for i in issues if word in i.name + i.subtitle)


def test_a_new_claim_of_a_known_family_joins_its_issue(fitted):
    run, _, issues, vectorizer = fitted
    assigner = OnlineAssigner.from_issues(issues, vectorizer, CONFIG.name, CONFIG.attach_min_similarity)
    issue_id, probability = assigner.assign(FailingClaim("new-1", "annual plans can be refunded within 45 days online"))
    assert issue_id == issue_named(issues, "billing-faq")
    assert 0.4 <= probability <= 1.0


def test_an_unrelated_claim_joins_no_issue(fitted):
    _, _, issues, vectorizer = fitted
    assigner = OnlineAssigner.from_issues(issues, vectorizer, CONFIG.name)
    assert assigner.assign(FailingClaim("odd", "quantum chromodynamics explains gluon confinement")) == (None, 0.0)


def test_a_claim_without_text_joins_no_issue(fitted):
    _, _, issues, vectorizer = fitted
    assigner = OnlineAssigner.from_issues(issues, vectorizer, CONFIG.name)
    assert assigner.assign(FailingClaim("blank", None, question="how long do refunds take?")) == (None, 0.0)


def test_online_assignment_agrees_with_the_batch_labels_of_held_out_claims(fitted):
    run, tracker, issues, vectorizer = fitted
    assigner = OnlineAssigner.from_issues(issues, vectorizer, CONFIG.name)
    held_out = families(offset=500, n=16)
    expected = {c.id: issue_named(issues, "billing-faq" if c.id.startswith("r") else "parcel-status") for c in held_out}
    got = dict(zip([c.id for c in held_out], (a for a, _ in assigner.assign_many(held_out))))
    assert got == expected
    assert [assigner.assign(c)[0] for c in held_out[:3]] == [got[c.id] for c in held_out[:3]]


def test_merged_issues_are_not_assignment_targets(fitted):
    _, _, issues, vectorizer = fitted
    billing = issue_named(issues, "billing-faq")
    parcel = issue_named(issues, "parcel-status")
    merged = [replace(i, merged_into=parcel) if i.issue_id == billing else i for i in issues]
    assigner = OnlineAssigner.from_issues(merged, vectorizer, CONFIG.name)
    assert assigner.issue_ids == [parcel]


def test_approximate_predict_assigner_uses_the_stored_hdbscan_model(fitted):
    run, tracker, issues, vectorizer = fitted
    assigner = ApproximatePredictAssigner(run, tracker.cluster_issue_ids_, vectorizer)
    issue_id, strength = assigner.assign(FailingClaim("new-2", "the courier delivers parcel 12-77 on friday online"))
    assert issue_id == issue_named(issues, "parcel-status")
    assert 0.0 <= strength <= 1.0


def test_no_issues_means_no_assignment():
    assigner = OnlineAssigner(ClaimVectorizer(HashingEmbedder()), [], [])
    assert assigner.assign(FailingClaim("a", "anything at all")) == (None, 0.0)


def test_mismatched_ids_and_centroids_are_refused():
    with pytest.raises(ValueError, match="2 issue ids but 1 centroids"):
        OnlineAssigner(ClaimVectorizer(HashingEmbedder()), ["a", "b"], [[1.0, 0.0]])


def test_approximate_predict_needs_a_fitted_model():
    run = IssuePipeline.from_config(CONFIG, HashingEmbedder()).fit([FailingClaim("a", "one lonely claim")], NOW)
    with pytest.raises(ValueError, match="use OnlineAssigner"):
        ApproximatePredictAssigner(run, [], ClaimVectorizer(HashingEmbedder()))


def test_each_run_keeps_its_own_fitted_model():
    pipeline = IssuePipeline.from_config(CONFIG, HashingEmbedder())
    first = pipeline.fit(families(), NOW)
    pipeline.fit(families(offset=100, n=12)[:12], NOW)
    assert first.clusterer_ is not pipeline.clusterer and first.clusterer_.n_clusters_ == len(first.clusters_)
