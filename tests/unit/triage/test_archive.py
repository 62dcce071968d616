"""Each archive form wakes the issue by itself at the right moment, on constructed histories of failing claims in
a real chDB store: until escalating (the issue list's test, on an hour wholly after the archive), for a duration,
until N more claims. The wake-up is in the activity; archived issues leave the default list."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.issues.archive import Archive
from tests.support.triage_world import T0, an_issue, hourly, members, triage_world


def archived(components, issue_id: str) -> bool:
    return components.repos.issues.get(issue_id).archive is not None


def wake_entries(components, issue_id: str) -> list[dict]:
    return [e for e in components.repos.issues.get(issue_id).history if e["event"] == "unarchived"]


@pytest.fixture()
def world(tmp_path, store_templates):
    with triage_world(tmp_path, store_templates) as (components, clock):
        an_issue(components, "iss-a")
        yield components, clock


def test_until_escalating_wakes_at_the_first_escalating_hour_after_the_archive(world):
    components, clock = world
    # 2 claims an hour for 6 hours before the archive and 3 after; then 12 in the fourth hour after it
    members(
        components, "iss-a", hourly(T0 - timedelta(hours=6), 9, 2) + hourly(T0 + timedelta(hours=3), 1, 12), prefix="x"
    )
    components.triage.archive("iss-a", "dana")
    for quiet in (T0 + timedelta(hours=1), T0 + timedelta(hours=3)):
        components.triage.tick(clock.at(quiet))
        assert archived(components, "iss-a"), quiet
    components.triage.tick(clock.at(T0 + timedelta(hours=4)))
    assert not archived(components, "iss-a")
    (woke,) = wake_entries(components, "iss-a")
    assert woke["by"] == "claimwatch" and woke["at"] == (T0 + timedelta(hours=4)).isoformat()
    assert woke["why"] == "escalating: 12 failing claims in the last hour"


def test_an_issue_archived_while_escalating_stays_archived_through_that_hour(world):
    components, clock = world
    members(components, "iss-a", hourly(T0 - timedelta(hours=7), 6, 2) + hourly(T0 - timedelta(hours=1), 1, 20))
    clock.at(T0)
    components.triage.archive("iss-a", "dana")  # the spike is why it is parked: it must not wake it
    components.triage.tick(clock.at(T0 + timedelta(minutes=30)))
    assert archived(components, "iss-a")


def test_archived_for_a_duration_wakes_when_the_duration_ends(world):
    components, clock = world
    components.triage.archive("iss-a", "dana", duration=timedelta(hours=8))
    components.triage.tick(clock.at(T0 + timedelta(hours=8) - timedelta(seconds=1)))
    assert archived(components, "iss-a")
    components.triage.tick(clock.at(T0 + timedelta(hours=8)))
    assert not archived(components, "iss-a")
    assert (
        wake_entries(components, "iss-a")[0]["why"] == f"its archive ended at {(T0 + timedelta(hours=8)).isoformat()}"
    )


def test_archived_until_n_more_claims_counts_only_claims_after_the_archive(world):
    components, clock = world
    members(components, "iss-a", hourly(T0 - timedelta(hours=2), 2, 10), prefix="old")  # 20 before: not "more"
    components.triage.archive("iss-a", "dana", claims=5)
    members(components, "iss-a", [T0 + timedelta(minutes=m) for m in range(1, 5)], prefix="new")
    components.triage.tick(clock.at(T0 + timedelta(minutes=10)))
    assert archived(components, "iss-a")
    members(components, "iss-a", [T0 + timedelta(minutes=11)], prefix="fifth")
    components.triage.tick(clock.at(T0 + timedelta(minutes=12)))
    assert not archived(components, "iss-a")
    assert wake_entries(components, "iss-a")[0]["why"] == "5 more failing claims (woken at 5)"


def test_an_archived_issue_leaves_the_default_list_until_it_wakes(world):
    components, clock = world
    an_issue(components, "iss-b")
    listed = lambda **f: [i["issue_id"] for i in components.issues.list(**f)]  # noqa: E731
    components.triage.archive("iss-a", "dana", duration=timedelta(hours=1))
    assert listed() == ["iss-b"] and listed(state="archived") == ["iss-a"]
    assert components.issues.summary("iss-a")["archive"]["text"] == "until 2026-11-21 10:00 UTC"
    components.triage.tick(clock.at(T0 + timedelta(hours=1)))
    assert sorted(listed()) == ["iss-a", "iss-b"] and listed(state="archived") == []


@pytest.mark.parametrize(
    "duration, claims, says",
    [
        (timedelta(hours=1), 5, "not both"),
        (timedelta(0), None, "positive"),
        (None, 0, "at least 1"),
    ],
)
def test_an_archive_is_one_well_formed_condition(duration, claims, says):
    with pytest.raises(ValueError, match=says):
        Archive.start(T0, duration, claims)
