"""Suggested merges: live issues of the same configuration whose centroids are close, most similar first, each with
its evidence (the similarity and the words both use); shown with the issue."""
from __future__ import annotations

import math
from dataclasses import replace

from clustering.issue import IssueRecord
from services.triage.merges import MIN_SIMILARITY, suggest_merges
from tests.support.triage_world import T0, an_issue, triage_world


def at_angle(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees)), 0.0]


def issue(issue_id: str, name: str, degrees: float, **fields) -> IssueRecord:
    return IssueRecord(issue_id=issue_id, name=name, keywords=("refund", "annual"), config_name="test@1",
                       first_seen=T0, last_seen=T0, centroid=at_angle(degrees), **fields)


def test_only_close_live_issues_of_the_same_configuration_are_suggested_nearest_first():
    me = issue("iss-a", "annual plans are refunded within <num> days", 0)
    others = [issue("iss-near", "refunds of annual plans take <num> days", 10),     # cos 0.985
              issue("iss-nearer", "annual plans refunded within a week", 5),       # cos 0.996
              issue("iss-far", "parcels arrive on <num>", 60),                     # cos 0.5
              issue("iss-gone", "annual plans", 1, merged_into="iss-near"),       # merged away
              replace(issue("iss-other", "annual plans", 1), config_name="other@2"), me]
    found = suggest_merges(me, others)
    assert [c.issue_id for c in found] == ["iss-nearer", "iss-near"]
    assert found[0].similarity == round(math.cos(math.radians(5)), 3)
    assert found[0].shared_words == ("annual", "plans", "refund", "refunded", "within")
    assert math.cos(math.radians(32)) < MIN_SIMILARITY  # an issue 32° away is not suggested
    assert suggest_merges(me, [issue("iss-x", "x", 32)]) == []


def test_the_issue_shows_its_merge_candidates(tmp_path):
    with triage_world(tmp_path) as (components, _):
        an_issue(components, "iss-a", centroid=at_angle(0))
        an_issue(components, "iss-b", centroid=at_angle(8))
        an_issue(components, "iss-c", centroid=at_angle(90))
        shown = components.issues.show("iss-a")["merge_candidates"]
        assert [(c["issue_id"], c["similarity"]) for c in shown] == [("iss-b", round(math.cos(math.radians(8)), 3))]


def test_accepting_every_suggestion_joins_issues_through_chains_of_near_neighbours():
    from services.triage.merges import merge_groups

    # 0-5° apart chain together (0~1~2), 3 stands alone, 4 and 5 pair up
    centroids = [at_angle(0), at_angle(9), at_angle(18), at_angle(90), at_angle(180), at_angle(185)]
    assert merge_groups(centroids) == [0, 0, 0, 3, 4, 4]
    assert merge_groups(centroids, min_similarity=0.999) == [0, 1, 2, 3, 4, 5]
    assert merge_groups([]) == []


def test_a_merged_issues_runbook_is_the_one_its_merges_lead_to(tmp_path):
    """A runbook command printed before a re-cluster merged the issue still leads to the issue holding its claims."""
    with triage_world(tmp_path) as (components, _):
        an_issue(components, "iss-a", name="the old title")
        an_issue(components, "iss-b", name="the surviving title")
        an_issue(components, "iss-c", name="where both end")
        components.issues.merge("iss-a", "iss-b", "sam")
        components.issues.merge("iss-b", "iss-c", "sam")
        runbook = components.issues.runbook("iss-a")
        assert "where both end" in runbook and "iss-c" in runbook and "the old title" not in runbook
