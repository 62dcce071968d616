"""Suggested merges: live issues of the same configuration whose centroids are close and whose claims are each
other's nearest neighbours, most similar first, each with its evidence (similarity, link ratio, shared words);
shown with the issue, and computed from what the tracker records at each re-clustering."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from fastapi.testclient import TestClient

from clustering.config import DEFAULT_CONFIG
from clustering.issue import IssueRecord
from clustering.neighbours import link_counts, link_ratios, neighbours
from clustering.records import FailingClaim
from clustering.run import ClusteringRun, ClusterSummary
from clustering.track import IssueTracker
from services.api.app import create_api
from services.api.security import ApiPolicy
from services.app.cli.issues import triage_fields
from services.issues.merges import (
    BACKGROUND_MIN_PAIRS,
    BACKGROUND_TIMES,
    MIN_SIMILARITY,
    link_background,
    links_needed,
    merge_groups,
    suggest_merges,
)
from tests.support.triage_world import T0, an_issue, triage_world


def at_angle(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees)), 0.0]


def issue(issue_id: str, name: str, degrees: float, **fields) -> IssueRecord:
    return IssueRecord(
        issue_id=issue_id,
        name=name,
        keywords=("refund", "annual"),
        config_name="test@1",
        first_seen=T0,
        last_seen=T0,
        centroid=at_angle(degrees),
        **fields,
    )


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def one_failure_cut_in_two_and_two_failures_side_by_side(d: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Clusters 0 and 1: a broad failure's claims cut by the sign of one coordinate. Clusters 2 and 3: two tight
    failures whose centroids are even closer than the halves' (cosine 0.93 against 0.91)."""
    rng = np.random.default_rng(0)
    broad = np.zeros((80, d))
    broad[:, 0] = 1
    broad[:, 1:] = rng.normal(scale=0.25, size=(80, d - 1))
    broad = unit(broad)

    def tight(angle: float) -> np.ndarray:
        x = np.zeros((40, d))
        x[:, 3], x[:, 4] = np.cos(angle), np.sin(angle)
        return unit(x + rng.normal(scale=0.06, size=(40, d)))

    vectors = np.vstack([broad, tight(-0.2), tight(0.2)])
    labels = np.concatenate([(broad[:, 1] > 0).astype(int), np.full(40, 2), np.full(40, 3)])
    return vectors, labels


def tracked(vectors: np.ndarray, labels: np.ndarray) -> list[IssueRecord]:
    """The tracker's records of a run holding these clusters, their neighbours as clustering/neighbours.py finds."""
    linked = neighbours(vectors, labels)
    clusters, claims = [], []
    for k in range(labels.max() + 1):
        ids = [f"c{k}-{i:03d}" for i in np.flatnonzero(labels == k)]
        claims += [FailingClaim(i, f"failure {k}") for i in ids]
        clusters.append(
            ClusterSummary(
                k,
                tuple(ids),
                f"failure {k}",
                (f"f{k}",),
                tuple(ids[:2]),
                {"r": len(ids)},
                {"unsupported": len(ids)},
                unit(vectors[labels == k].mean(0)),
                {"2026-11-21T09": len(ids)},
                None,
                None,
                neighbours=linked[k],
            )
        )
    run = ClusteringRun(
        DEFAULT_CONFIG.name,
        "hand",
        T0,
        tuple(claims),
        labels,
        np.ones(len(labels)),
        tuple("clustered" for _ in claims),
        clusters,
        {},
    )
    return IssueTracker(DEFAULT_CONFIG).match([], run, T0)


def test_one_failure_cut_in_two_is_suggested_and_two_failures_as_close_are_not():
    records = tracked(*one_failure_cut_in_two_and_two_failures_side_by_side())
    halves, tight = records[:2], records[2:]
    similarity = [float(np.dot(a.centroid, b.centroid)) for a, b in (halves, tight)]
    assert MIN_SIMILARITY < similarity[0] < similarity[1]  # the centroids alone would rank the tight pair first
    # the tracker records each issue's neighbours by issue id, the same ratio on both sides
    assert halves[0].neighbours[halves[1].issue_id] == halves[1].neighbours[halves[0].issue_id] > 0.3
    assert tight[0].neighbours.get(tight[1].issue_id, 0.0) < 0.05

    assert [c.issue_id for c in suggest_merges(halves[0], records)] == [halves[1].issue_id]
    assert suggest_merges(tight[0], records) == []
    group = merge_groups(records)
    assert group[halves[0].issue_id] == group[halves[1].issue_id]
    assert group[tight[0].issue_id] != group[tight[1].issue_id]


@pytest.mark.parametrize(
    "degrees, links, suggested",
    [
        (10, 0.0, False),  # cos 0.985: close centroids, claims not linked
        (10, 0.10, True),  # needs 0.076
        (41.4, 0.20, True),  # cos 0.75, below the similarity the centroids alone needed: linked claim to claim
        (41.4, 0.15, False),  # needs 0.17
        (46.5, 0.90, False),  # cos 0.69: too far whatever the links
    ],
)
def test_the_closer_the_centroids_the_fewer_links_a_suggestion_needs(degrees, links, suggested):
    me = issue("iss-a", "annual plans are refunded within <num> days", 0, neighbours={"iss-b": links})
    other = issue("iss-b", "refunds of annual plans take <num> days", degrees, neighbours={"iss-a": links})
    found = suggest_merges(me, [me, other])
    assert [c.issue_id for c in found] == (["iss-b"] if suggested else [])
    assert links_needed(0.85) > links_needed(0.95) and links_needed(0.75) > links_needed(0.85)


def neighbourhood(background: float, pair: float = 0.2, n: int = 8) -> list[IssueRecord]:
    """``n`` issues 5 degrees apart (every pair at cosine >= 0.82): iss-0 and iss-1 share ``pair`` links, every
    other pair ``background``."""
    ids = [f"iss-{i}" for i in range(n)]
    return [
        issue(
            me,
            f"failure {i}",
            5 * i,
            neighbours={
                other: pair if {me, other} == {"iss-0", "iss-1"} else background for other in ids if other != me
            },
        )
        for i, me in enumerate(ids)
    ]


def test_a_pair_must_link_well_beyond_what_neighbouring_issues_share_anyway():
    """Links of 0.2 at cosine 0.996 pass the rule (0.07 needed) among issues that do not link otherwise; where
    every neighbouring pair shares 0.1 anyway (small issues against 15 neighbours, a loosely held domain), the
    pair needs BACKGROUND_TIMES (2.75) times that upper quartile and is not suggested."""
    quiet, busy = neighbourhood(background=0.0), neighbourhood(background=0.1)
    assert link_background(quiet[0], quiet) == 0.0 and link_background(busy[0], busy) == pytest.approx(0.1)
    assert [c.issue_id for c in suggest_merges(quiet[0], quiet)] == ["iss-1"]
    assert suggest_merges(busy[0], busy) == []
    assert suggest_merges(busy[0], busy, background=0.0)[0].needed == round(links_needed(math.cos(math.radians(5))), 3)
    assert merge_groups(busy) == {r.issue_id: r.issue_id for r in busy}
    strong = neighbourhood(background=0.1, pair=0.35)
    found = suggest_merges(strong[0], strong)
    assert [(c.issue_id, c.needed) for c in found] == [("iss-1", round(BACKGROUND_TIMES * 0.1, 3))]
    assert merge_groups(strong)["iss-1"] == "iss-0"


def test_too_few_neighbouring_pairs_set_no_level():
    few = neighbourhood(background=0.1, n=6)  # 15 pairs
    assert 6 * 5 // 2 < BACKGROUND_MIN_PAIRS and link_background(few[0], few) == 0.0
    assert [c.issue_id for c in suggest_merges(few[0], few)][0] == "iss-1"


def test_a_pair_is_suggested_on_both_pages_when_only_one_issue_kept_the_link():
    """Each issue keeps its few most linked issues, and one made by a later run keeps none of an older one's:
    the pair shows on both issues' pages, with the one ratio either side recorded."""
    older = issue("iss-a", "annual plans are refunded within <num> days", 0, neighbours={"iss-b": 0.3})
    newer = issue("iss-b", "refunds of annual plans take <num> days", 10)  # its list does not hold iss-a
    assert [c.issue_id for c in suggest_merges(older, [older, newer])] == ["iss-b"]
    assert [(c.issue_id, c.links) for c in suggest_merges(newer, [older, newer])] == [("iss-a", 0.3)]


def test_only_linked_live_issues_of_the_same_configuration_are_suggested_nearest_first():
    linked = dict.fromkeys(("iss-near", "iss-nearer", "iss-far", "iss-gone", "iss-other"), 0.5)
    me = issue("iss-a", "annual plans are refunded within <num> days", 0, neighbours=linked)
    others = [
        issue("iss-near", "refunds of annual plans take <num> days", 10),  # cos 0.985
        issue("iss-nearer", "annual plans refunded within a week", 5),  # cos 0.996
        issue("iss-far", "parcels arrive on <num>", 60),  # cos 0.5
        issue("iss-gone", "annual plans", 1, merged_into="iss-near"),  # merged away
        replace(issue("iss-other", "annual plans", 1), config_name="other@2"),
        issue("iss-unlinked", "annual plans", 2),
        me,
    ]  # close, no links recorded
    found = suggest_merges(me, others)
    assert [c.issue_id for c in found] == ["iss-nearer", "iss-near"]
    assert found[0].similarity == round(math.cos(math.radians(5)), 3) and found[0].links == 0.5
    assert found[0].shared_words == ("annual", "plans", "refund", "refunded", "within")


def test_the_issue_shows_its_merge_candidates_with_the_links_the_store_kept(tmp_path, store_templates):
    with triage_world(tmp_path, store_templates) as (components, clock):
        an_issue(components, "iss-a", centroid=at_angle(0), neighbours={"iss-b": 0.25, "iss-c": 0.5})
        an_issue(components, "iss-b", centroid=at_angle(30), neighbours={"iss-a": 0.25})
        an_issue(components, "iss-c", centroid=at_angle(90), neighbours={"iss-a": 0.5})
        shown = components.issues.show("iss-a")
        assert [(c["issue_id"], c["similarity"], c["links"]) for c in shown["merge_candidates"]] == [
            ("iss-b", round(math.cos(math.radians(30)), 3), 0.25)
        ]
        needed = links_needed(math.cos(math.radians(30)))  # too few neighbouring pairs for a background level
        assert shown["merge_candidates"][0]["needed"] == round(needed, 3) == 0.124
        assert "0.87 centroid similarity, 0.25 neighbour links, 0.12 needed here" in str(
            dict(triage_fields(shown, T0))["merge with?"]
        )
        page = TestClient(create_api(components, ApiPolicy(), now=clock)).get("/issues/iss-a").text
        assert "centroid similarity 0.87, neighbour links 0.25 (0.12 needed here)" in page


def test_accepting_every_suggestion_joins_issues_through_chains():
    # a~b and b~c are linked (a and c are not), d is close to c but not linked, e stands alone
    links = {("a", "b"): 0.3, ("b", "c"): 0.3}
    records = [
        issue(
            name, name, degrees, neighbours={y if x == name else x: r for (x, y), r in links.items() if name in (x, y)}
        )
        for name, degrees in (("a", 0), ("b", 9), ("c", 18), ("d", 20), ("e", 90))
    ]
    assert merge_groups(records) == {"a": "a", "b": "a", "c": "a", "d": "d", "e": "e"}
    assert merge_groups(records, need_links=False, min_similarity=0.85) == {
        "a": "a",
        "b": "a",
        "c": "a",
        "d": "a",
        "e": "e",
    }
    assert merge_groups([]) == {}


def test_links_are_each_clustered_claims_nearest_clustered_claims_and_a_sample_finds_the_same_ratios():
    vectors, labels = one_failure_cut_in_two_and_two_failures_side_by_side()
    noisy = labels.copy()
    noisy[::10] = -1  # noise neither links nor is linked
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    expected = np.zeros((4, 4), dtype=int)
    for i in np.flatnonzero(noisy >= 0):
        for j in np.argsort(-similarity[i])[:15]:
            expected[noisy[i], noisy[j]] += noisy[j] >= 0
    assert (link_counts(vectors, noisy) == expected).all()
    full, sampled = link_ratios(link_counts(vectors, labels)), link_ratios(link_counts(vectors, labels, max_queries=80))
    assert abs(full[0, 1] - sampled[0, 1]) < 0.1 and sampled[2, 3] < 0.05


def test_a_merged_issues_runbook_is_the_one_its_merges_lead_to(tmp_path, store_templates):
    """A runbook command printed before a re-cluster merged the issue still leads to the issue holding its claims."""
    with triage_world(tmp_path, store_templates) as (components, _):
        an_issue(components, "iss-a", name="the old title")
        an_issue(components, "iss-b", name="the surviving title")
        an_issue(components, "iss-c", name="where both end")
        components.issues.merge("iss-a", "iss-b", "sam")
        components.issues.merge("iss-b", "iss-c", "sam")
        runbook = components.issues.runbook("iss-a")
        assert "where both end" in runbook and "iss-c" in runbook and "the old title" not in runbook
