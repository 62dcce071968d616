"""An open alert's window is served first: its failing claims join issues at once, new failures by a focused run."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from services.core.clock import utcnow
from services.core.metrics import Metrics
from services.issues.jobs import fit_claims
from services.issues.schedule import AlertWindow, ClusteringSchedule, ReclusterPolicy, WindowFocus
from tests.unit.issues.test_recluster_schedule import T0, inline, land, small_jobs


def held(store, prefix: str) -> dict[str, str]:
    rows = store.query(
        "SELECT claim_key, issue_id FROM issue_members FINAL WHERE startsWith(claim_key, {p:String})", {"p": prefix}
    )
    return {r["claim_key"]: r["issue_id"] for r in rows}


def test_a_new_window_is_due_at_once_then_once_a_minute_and_forgotten_when_closed():
    focus = WindowFocus(timedelta(minutes=1))
    a, b = AlertWindow("a-1", "billing-faq", T0, T0), AlertWindow("a-2", "parcel-status", T0, T0)
    assert focus.due([a], T0) == [a]
    focus.done(a, T0)
    assert focus.due([a, b], T0 + timedelta(seconds=5)) == [b]  # a newly open alert does not wait for the minute
    assert focus.due([a], T0 + timedelta(seconds=59)) == []
    assert focus.due([a], T0 + timedelta(minutes=1)) == [a]
    focus.due([], T0 + timedelta(minutes=1))  # a closed: forgotten, so a reopened alert is served at once
    assert focus.due([a], T0 + timedelta(minutes=1, seconds=1)) == [a]


def test_without_issues_a_focused_run_makes_the_window_issues_and_a_full_run_keeps_their_ids(store):
    now = utcnow()
    land(store, "win-", 48, now - timedelta(minutes=5))
    jobs = small_jobs(store)
    report = jobs.focus_window("billing-faq", now - timedelta(minutes=10), now, now)
    assert report.claims == 48 and report.assigned == 0 and report.new_issues and report.clustered >= 40
    assigned = held(store, "win-")
    assert set(assigned) == {f"win-{i}:0" for i in range(48)}  # every claim seen: in an issue or noise
    focused = {i for i in assigned.values() if i}
    assert focused == set(report.new_issues)
    assert {r.issue_id for r in jobs.issues.load()} == focused

    again = jobs.focus_window("billing-faq", now - timedelta(minutes=10), now, now)
    assert again.new_issues == () and again.claims == 48 - report.clustered  # only the noise is looked at again

    jobs.recluster(now)  # the next full run continues the focused issues by their members
    after = {i for i in held(store, "win-").values() if i}
    assert after == focused


def test_the_assignment_tick_serves_an_open_alert_window_before_the_backlog(store):
    now = utcnow()
    land(store, "calm-", 48, now - timedelta(minutes=50))
    jobs, metrics = small_jobs(store), Metrics()
    jobs.recluster(now - timedelta(minutes=40))
    land(store, "alert-", 48, now - timedelta(minutes=3))
    window = AlertWindow("a-1", "billing-faq", now - timedelta(minutes=5), now)
    served = []

    def windows(at):
        served.append(at)
        return [window]

    schedule = ClusteringSchedule(lambda: jobs, metrics, inline, policy=ReclusterPolicy(), windows=windows)
    reports = asyncio.run(schedule.focus_windows(jobs, now))
    assert [r.claims for r in reports] == [48]
    assert set(held(store, "alert-")) == {f"alert-{i}:0" for i in range(48)}
    assert asyncio.run(schedule.focus_windows(jobs, now + timedelta(seconds=5))) == []  # served a minute ago
    assert len(served) == 2


def test_a_full_run_that_read_its_claims_before_a_focused_run_leaves_the_focused_issues_alone(store):
    now = utcnow()
    land(store, "calm-", 48, now - timedelta(minutes=50))
    jobs = small_jobs(store)
    job = jobs.collect(now - timedelta(minutes=1))  # a full run reads the store ...
    land(store, "alert-", 48, now - timedelta(seconds=30))
    focused = jobs.focus_window("billing-faq", now - timedelta(minutes=5), now, now)  # ... an alert is served ...
    assert focused.new_issues
    before = {r.issue_id: r for r in jobs.issues.load()}
    jobs.publish(now - timedelta(minutes=1), fit_claims(job))  # ... and the full run publishes after it

    stored = {r.issue_id: r for r in jobs.issues.load()}
    for issue_id in focused.new_issues:  # as they were: not resolved, not taken over by a calm cluster
        assert stored[issue_id] == before[issue_id]
        assert issue_id in jobs.assigner.issue_ids  # and still assigned to
    assert {i for i in held(store, "alert-").values() if i} <= set(focused.new_issues)
    assert not set(held(store, "calm-").values()) & set(focused.new_issues)


def test_a_full_run_that_read_the_alerts_claims_too_continues_the_focused_issue_the_page_named(store):
    """The alert's claims were in the store when a full run read it; a focused run made their issues while the full
    run fitted. Publishing, the full run's clusters of those claims (with the same failure from before the window,
    so other members and another derived id) keep the focused issues' ids: the issue the page named a minute ago
    still holds them, not a new issue beside it (seen in `make demo`)."""
    now = utcnow()
    land(store, "early-", 48, now - timedelta(minutes=20))  # the same failures, before the alert's window
    land(store, "late-", 48, now - timedelta(minutes=2))
    jobs = small_jobs(store)
    job = jobs.collect(now - timedelta(minutes=1))  # the full run reads both ...
    focused = jobs.focus_window("billing-faq", now - timedelta(minutes=5), now, now)  # ... the alert is served ...
    assert focused.new_issues
    jobs.publish(now - timedelta(minutes=1), fit_claims(job))  # ... and the full run publishes after it

    held_now = {i for i in held(store, "late-").values() if i}
    assert held_now and held_now <= set(focused.new_issues), (held_now, focused.new_issues)
    live = {r.issue_id for r in jobs.issues.load() if r.merged_into is None and r.state != "resolved"}
    assert set(focused.new_issues) <= live


def test_window_claims_do_not_join_an_issue_never_seen_on_the_alerts_route(store):
    """Seen in make demo: the billing alert's window joined a 7-claim parcel-status issue whose invented numbers
    were worded alike, and the demo named that issue, titled after a parcel claim, as the one behind the alert.
    They go to the focused run instead, which makes the alert's own issues; the next full run may still group
    the two routes' claims as one failure."""
    now = utcnow()
    land(store, "parcel-", 48, now - timedelta(minutes=50), route="parcel-status")
    jobs = small_jobs(store)
    jobs.recluster(now - timedelta(minutes=40))
    parcel_issues = {r.issue_id for r in jobs.issues.load()}
    assert parcel_issues
    land(store, "alert-", 48, now - timedelta(minutes=3))  # the same wording, on the alert's route
    report = jobs.focus_window("billing-faq", now - timedelta(minutes=5), now, now)
    assert report.claims == 48 and report.assigned == 0 and report.new_issues
    assert not set(held(store, "alert-").values()) & parcel_issues
