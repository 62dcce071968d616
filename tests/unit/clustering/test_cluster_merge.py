"""CohesionMerger: density islands that are one failure in the embedding space become one issue."""

import numpy as np
import pytest

from clustering.merge import NOISE, CohesionMerger

DIM = 64


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def island(centre, n, spread, rng):
    """n unit vectors around ``centre``; larger spread, lower cohesion."""
    points = centre + rng.normal(scale=spread / np.sqrt(DIM), size=(n, DIM))
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def near(base, similarity, rng):
    """A unit vector at roughly ``similarity`` cosine from ``base``."""
    other = unit(rng.normal(size=DIM))
    other = unit(other - (other @ base) * base)
    return unit(similarity * base + np.sqrt(1 - similarity**2) * other)


def stack(*parts):
    vectors = np.vstack([p for p, _ in parts])
    labels = np.concatenate([np.full(len(p), label) for p, label in parts])
    return vectors.astype(np.float32), labels


def test_near_paraphrase_islands_of_one_failure_merge_into_one():
    rng = np.random.default_rng(0)
    family = unit(rng.normal(size=DIM))
    islands = [(island(near(family, 0.95, rng), 40, 0.15, rng), label) for label in range(4)]
    vectors, labels = stack(*islands)
    merged = CohesionMerger(0.88, 0.85).merge(labels, vectors)
    assert set(merged.tolist()) == {0}  # survivors keep the smallest label
    assert len(CohesionMerger(0.88, 0.85).merge(labels, vectors)) == len(labels)


def test_loose_clusters_stay_apart_even_when_their_centroids_coincide():
    # one topic split in two by density: an ordinary topical cluster is no paraphrase group
    rng = np.random.default_rng(7)
    a = unit(rng.normal(size=DIM))
    vectors, labels = stack((island(a, 50, 0.88, rng), 0), (island(a, 50, 0.88, rng), 1))
    assert CohesionMerger(0.88, 0.85).merge(labels, vectors).tolist() == labels.tolist()


def test_neighbouring_topics_stay_apart():
    # like two close CLINC150 intents: members at ~0.75 from their own centroid, centroids at 0.8
    rng = np.random.default_rng(1)
    a = unit(rng.normal(size=DIM))
    vectors, labels = stack((island(a, 50, 0.88, rng), 0), (island(near(a, 0.8, rng), 50, 0.88, rng), 1))
    merger = CohesionMerger(0.88, 0.85)
    assert merger.merge(labels, vectors).tolist() == labels.tolist()
    assert merger.merges_ == []


def test_a_large_tight_issue_does_not_absorb_a_small_different_one():
    # the union is tight enough (the big side dominates it), but the small side's centroid
    # is far from the union's, so nothing merges
    rng = np.random.default_rng(2)
    big = unit(rng.normal(size=DIM))
    vectors, labels = stack((island(big, 2000, 0.05, rng), 0), (island(near(big, 0.5, rng), 20, 0.05, rng), 1))
    union_cohesion = np.linalg.norm(vectors.astype(np.float64).mean(axis=0))
    assert union_cohesion > 0.9
    assert CohesionMerger(0.88, 0.85).merge(labels, vectors).tolist() == labels.tolist()


def test_noise_is_left_alone_and_the_merges_are_recorded():
    rng = np.random.default_rng(3)
    family = unit(rng.normal(size=DIM))
    vectors, labels = stack(
        (island(family, 30, 0.1, rng), 3),
        (island(near(family, 0.97, rng), 30, 0.1, rng), 7),
        (island(unit(rng.normal(size=DIM)), 5, 1.0, rng), NOISE),
    )
    merger = CohesionMerger(0.88, 0.85)
    merged = merger.merge(labels, vectors)
    assert merged[labels == NOISE].tolist() == [NOISE] * 5
    assert set(merged[labels != NOISE].tolist()) == {3}
    assert [(kept, absorbed) for kept, absorbed, _ in merger.merges_] == [(3, 7)]
    assert merger.merges_[0][2] >= 0.88


def test_the_most_cohesive_pair_merges_first_and_chains_stop_at_the_threshold():
    # a chain a - b - c where a and c are too far apart for one issue: a+b or b+c, never all three
    rng = np.random.default_rng(4)
    a = unit(rng.normal(size=DIM))
    c = near(a, 0.3, rng)
    b = unit(a + c)
    vectors, labels = stack((island(a, 40, 0.05, rng), 0), (island(b, 40, 0.05, rng), 1), (island(c, 40, 0.05, rng), 2))
    merged = CohesionMerger(0.88, 0.85).merge(labels, vectors)
    assert len(set(merged.tolist())) == 2


@pytest.mark.parametrize("threshold", [1.0, 1.5])
def test_a_threshold_of_one_merges_nothing(threshold):
    rng = np.random.default_rng(5)
    same = unit(rng.normal(size=DIM))
    vectors, labels = stack((np.tile(same, (10, 1)), 0), (np.tile(same, (10, 1)), 1))
    assert CohesionMerger(threshold).merge(labels, vectors).tolist() == labels.tolist()


def test_fewer_than_two_clusters_pass_through():
    vectors = np.eye(3, DIM, dtype=np.float32)
    assert CohesionMerger(0.5).merge(np.array([NOISE, NOISE, NOISE]), vectors).tolist() == [NOISE] * 3
    assert CohesionMerger(0.5).merge(np.array([0, 0, NOISE]), vectors).tolist() == [0, 0, NOISE]


def test_the_result_does_not_depend_on_label_numbering():
    rng = np.random.default_rng(6)
    family, other = unit(rng.normal(size=DIM)), unit(rng.normal(size=DIM))
    parts = [
        (island(near(family, 0.96, rng), 25, 0.1, rng), 0),
        (island(near(family, 0.96, rng), 25, 0.1, rng), 1),
        (island(other, 25, 0.1, rng), 2),
    ]
    vectors, labels = stack(*parts)
    renumbered = np.array([{0: 5, 1: 2, 2: 9}[x] for x in labels.tolist()])
    first = CohesionMerger(0.88, 0.85).merge(labels, vectors)
    second = CohesionMerger(0.88, 0.85).merge(renumbered, vectors)
    same_issue = lambda lab: [[x == y for y in lab.tolist()] for x in lab.tolist()]  # noqa: E731
    assert same_issue(first) == same_issue(second)
