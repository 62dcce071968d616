"""An issue a re-cluster merges away hands all its claims to the survivor, as a merge by hand does: the ones the run
did not read (older than its lookback) and the ones assigned to it while the run was fitted."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from services.core.clock import utcnow
from tests.unit.issues.test_recluster_schedule import land, small_jobs
from tests.unit.issues.test_window_focus import held


def split_in_two(store):
    """Jobs over one re-clustered store whose larger issue is stored as two halves of one failure (as an earlier run
    could have left it): ``first`` older, so the next run continues it and merges ``second`` into it."""
    now = utcnow()
    land(store, "calm-", 48, now - timedelta(minutes=5))
    jobs = small_jobs(store)
    jobs.recluster(now)
    first = max(jobs.issues.load(), key=lambda r: r.size)
    sample = first.member_sample
    first_half = replace(first, member_sample=sample[::2])
    second = replace(
        first,
        issue_id=f"{first.issue_id}-2",
        member_sample=sample[1::2],
        first_seen=first.first_seen + timedelta(minutes=1),
    )
    jobs.issues.save([first_half, second])
    jobs.issues.save_members(
        [
            {
                "claim_key": key,
                "issue_id": second.issue_id,
                "probability": 1.0,
                "source": "batch",
                "config_name": jobs.config.name,
                "x": 0.0,
                "y": 0.0,
                "observed_at": now,
            }
            for key in sample[1::2]
        ]
    )
    return jobs, now, first_half, second


def merged_into(jobs, issue_id: str) -> str | None:
    return next(r.merged_into for r in jobs.issues.load([issue_id]))


def test_claims_a_rerun_did_not_read_follow_their_merged_issue_to_the_survivor(store):
    jobs, now, first, second = split_in_two(store)
    land(store, "old-", 2, now - timedelta(hours=3))  # before the one-hour lookback: the next run will not read them
    jobs.issues.save_members(
        [
            {
                "claim_key": f"old-{i}:0",
                "issue_id": issue.issue_id,
                "probability": 0.9,
                "source": "online",
                "config_name": jobs.config.name,
                "x": 0.0,
                "y": 0.0,
                "observed_at": now - timedelta(hours=3),
            }
            for i, issue in enumerate((first, second))
        ]
    )

    jobs.recluster(now + timedelta(seconds=1))
    assert merged_into(jobs, second.issue_id) == first.issue_id
    assert held(store, "old-") == {"old-0:0": first.issue_id, "old-1:0": first.issue_id}
    on_route = jobs.issues.members_on_route("billing-faq", now - timedelta(hours=4), now)
    assert second.issue_id not in on_route and on_route[first.issue_id] >= 25  # an alert names only live issues


class RerunWhileAssigning:
    """An assigner that knows only ``second``'s half; a re-cluster publishes while it assigns."""

    def __init__(self, assigner, jobs, at):
        self.assigner, self.jobs, self.at = assigner, jobs, at

    def assign_many(self, claims):
        results = self.assigner.assign_many(claims)
        self.jobs.recluster(self.at)
        return results


def test_claims_assigned_while_a_rerun_merges_their_issue_end_in_the_survivor(store):
    from clustering.assign import OnlineAssigner

    jobs, now, first, second = split_in_two(store)
    others = [r for r in jobs.issues.load() if r.issue_id != first.issue_id]
    stale = OnlineAssigner.from_issues(
        others, jobs.vectorizer_for(jobs.embedder), jobs.config.name, jobs.min_similarity
    )
    jobs.assigner = RerunWhileAssigning(stale, jobs, now + timedelta(seconds=1))
    jobs.mark = utcnow()
    land(store, "late-", 8, now)

    assert jobs.assign_new(utcnow()) >= 1
    assert merged_into(jobs, second.issue_id) == first.issue_id
    late = held(store, "late-")
    assert set(late) == {f"late-{i}:0" for i in range(8)}
    assert second.issue_id not in late.values() and first.issue_id in late.values()


def test_moving_members_moves_each_claims_newest_assignment_only(store):
    from services.issues.records import issue_repository

    issues, now = issue_repository(store), utcnow()

    def assign(pairs):
        issues.save_members(
            [
                {
                    "claim_key": key,
                    "issue_id": issue,
                    "probability": 0.5,
                    "source": "online",
                    "config_name": "c",
                    "x": 0.0,
                    "y": 0.0,
                    "observed_at": now,
                }
                for key, issue in pairs
            ]
        )

    assign([("e1:0", "iss-a"), ("e2:0", "iss-a"), ("e3:0", "iss-b"), ("e4:0", "iss-c"), ("e5:0", "iss-a")])
    assign([("e5:0", "iss-d")])  # re-assigned since: no longer iss-a's
    issues.move_members({"iss-a": "iss-c", "iss-b": "iss-c"})
    assert held(store, "e") == {"e1:0": "iss-c", "e2:0": "iss-c", "e3:0": "iss-c", "e4:0": "iss-c", "e5:0": "iss-d"}
    issues.move_members({})  # nothing merged: nothing written
    assert store.query("SELECT count() AS n FROM issue_members")[0]["n"] == 9
