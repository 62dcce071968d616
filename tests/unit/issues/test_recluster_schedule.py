"""Re-cluster only when it matters; assignment never waits behind a re-cluster; a re-cluster can be abandoned."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from clustering.config import DEFAULT_CONFIG
from clustering.embed import HashingEmbedder
from services.app.compose import claim_vectorizer
from services.contract.decode import Decoder
from services.core.clock import utcnow
from services.core.metrics import Metrics
from services.core.threads import ChildProcess, in_thread
from services.issues.jobs import IssueJobs, RunReport, fit_claims
from services.issues.records import issue_repository
from services.issues.schedule import ClusteringSchedule, ReclusterPolicy
from services.store.writer import EventWriter

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
BASE = {
    "schema": "claimwatch.verdict/v1",
    "trace_id": "t",
    "route": "billing-faq",
    "answer": {"action": "served"},
    "versions": {"model": "m1", "corpus": "c1"},
}
TAILS = ["online", "by phone", "in store", "for members", "in europe", "at night", "for teams", "on mobile"]


class Clock:
    def __init__(self, now: datetime = T0):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def value(metric, *labels) -> float:
    return (metric.labels(*labels) if labels else metric)._value.get()


def runs_observed(metrics: Metrics) -> float:
    return next(s.value for m in metrics.recluster_seconds.collect() for s in m.samples if s.name.endswith("_count"))


# ---- the decision ----------------------------------------------------------------------------


def test_the_policy_skips_below_the_threshold_and_runs_above_it_or_at_max_age():
    clock = Clock()
    policy = ReclusterPolicy(min_new_claims=200, min_new_fraction=0.02, max_age=timedelta(minutes=60), clock=clock)
    assert policy.decide(0).kind == "nothing_to_cluster" and not policy.decide(0).run
    assert not policy.decide(199).run and policy.decide(199).kind == "few_new_claims"
    assert policy.decide(200).run and policy.decide(200).kind == "new_claims"

    policy.ran(50_000)  # 2% of the last run's claims is more than 200
    assert policy.needed() == 1000
    skip = policy.decide(999)
    assert not skip.run and "999" in skip.reason and "1000" in skip.reason
    assert policy.decide(1000).run

    clock.now += timedelta(minutes=59)
    assert not policy.decide(0).run and not policy.decide(5).run
    clock.now += timedelta(minutes=1)
    aged = policy.decide(0)  # nothing new, but the lookback moved on: issues may resolve
    assert aged.run and aged.kind == "max_age"
    policy.ran(50_000)
    assert not policy.decide(0).run


def test_a_small_store_waits_for_max_age_and_an_empty_one_never_runs():
    clock = Clock()
    policy = ReclusterPolicy(min_new_claims=200, max_age=timedelta(minutes=60), clock=clock)
    clock.now += timedelta(hours=5)
    assert not policy.decide(0).run  # nothing to cluster, however long
    assert policy.decide(12).run and policy.decide(12).kind == "max_age"


class FakeJobs:
    """Counts what the schedule asks of the jobs; ``new`` is what the store would count."""

    def __init__(self, new: int = 0, previous: int | None = None):
        self.new, self.previous, self.calls = new, previous, []

    def previous_run(self, since):
        self.calls.append("previous_run")
        return self.previous

    def new_claims(self, at_least: int) -> int:
        self.calls.append(("new_claims", at_least))
        return self.new

    def recluster(self, now):
        self.calls.append("recluster")
        return RunReport(claims=3000, issues=4, noise=10, timings={}, notes=[])

    def assign_new(self, now):
        return 0


async def inline(fn, *args):
    return fn(*args)


def test_ticks_skip_count_and_log_once_then_run_and_time_the_run(caplog):
    clock = Clock()
    jobs, metrics = FakeJobs(new=10, previous=1000), Metrics()
    policy = ReclusterPolicy(200, 0.02, timedelta(minutes=60), clock)
    schedule = ClusteringSchedule(lambda: jobs, metrics, inline, policy=policy)

    with caplog.at_level(logging.INFO, logger="services.issues.schedule"):
        for _ in range(3):
            assert asyncio.run(schedule.tick(clock())) is None
    assert "recluster" not in jobs.calls and jobs.calls.count("previous_run") == 1
    assert policy.claims_at_last_run == 1000  # the stored issues' size stands in for the last run
    assert value(metrics.recluster_skipped, "few_new_claims") == 3
    assert value(metrics.recluster_new_claims) == 10
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 1  # not every tick

    jobs.new = 250
    report = asyncio.run(schedule.tick(clock()))
    assert report is not None and report.claims == 3000 and jobs.calls.count("recluster") == 1
    assert value(metrics.recluster_runs, "ok") == 1 and runs_observed(metrics) == 1
    assert policy.claims_at_last_run == 3000 and policy.needed() == 200

    jobs.new = 0
    clock.now += timedelta(minutes=61)
    assert asyncio.run(schedule.tick(clock())) is not None  # max age
    assert value(metrics.recluster_runs, "ok") == 2 and runs_observed(metrics) == 2
    assert value(metrics.recluster_skipped, "few_new_claims") == 3


class MadeJobs:
    """Jobs the schedule makes itself on its first run; ``fail``: every re-cluster raises."""

    def __init__(self, fail: bool = False):
        self.calls, self.fail = [], fail

    def recluster(self, now):
        self.calls.append(("recluster", now))
        if self.fail:
            raise RuntimeError("model missing")
        return "report"

    def assign_new(self, now):
        self.calls.append(("assign", now))
        return 3


def test_the_schedule_makes_its_jobs_on_the_first_run_and_assigns_after_it():
    made, metrics, now = [], Metrics(), T0

    def make_jobs():
        made.append(MadeJobs())
        return made[-1]

    schedule = ClusteringSchedule(make_jobs, metrics, inline)
    assert asyncio.run(schedule.assign(now)) == 0 and not made  # nothing to assign to before the first run
    assert asyncio.run(schedule.recluster(now)) == "report"
    assert asyncio.run(schedule.recluster(now)) == "report" and len(made) == 1
    assert asyncio.run(schedule.assign(now)) == 3
    assert made[0].calls == [("recluster", now), ("recluster", now), ("assign", now)]
    assert value(metrics.assignments, "assigned") == 3

    failing = ClusteringSchedule(lambda: MadeJobs(fail=True), metrics, inline)
    assert asyncio.run(failing.recluster(now)) is None  # logged; the previous issues stay


# ---- assignment beside a re-cluster, on the store ------------------------------------------------


def land(store, prefix: str, n: int, at: datetime, route: str | None = None) -> None:
    raw = []
    for i in range(n):
        text = (
            f"annual plans can be refunded within {i} days {TAILS[i % 8]}"
            if i % 2
            else f"the courier delivers parcel {i}-77 on friday {TAILS[(i + 3) % 8]}"
        )
        raw.append(
            orjson.dumps(
                {
                    **BASE,
                    "event_id": f"{prefix}{i}",
                    "observed_at": at.isoformat(),
                    "claims": [{"verdict": "contradicted", "text": text}],
                    **({"route": route} if route else {}),
                }
            )
        )
    EventWriter(store).write([Decoder().decode(r) for r in raw])


def small_jobs(store, **options) -> IssueJobs:
    config = replace(DEFAULT_CONFIG, umap_min_points=10**9)
    return IssueJobs(
        config,
        HashingEmbedder(),
        issue_repository(store),
        timedelta(hours=1),
        vectorizer=claim_vectorizer(config),
        **options,
    )


def test_a_recluster_on_the_store_then_assigns_new_claims(store):
    now = utcnow()
    land(store, "first-", 48, now - timedelta(minutes=5))
    metrics = Metrics()
    schedule = ClusteringSchedule(lambda: small_jobs(store), metrics, inline)
    report = asyncio.run(schedule.recluster(now))
    assert report is not None and report.claims == 48 and report.issues >= 1
    mark = utcnow()
    land(store, "later-", 8, utcnow())
    assert asyncio.run(schedule.assign(mark)) >= 1
    assert value(metrics.assignments, "assigned") >= 1


@pytest.mark.slow
def test_assignment_completes_while_a_recluster_is_blocked(store):
    now = utcnow()
    land(store, "first-", 48, now - timedelta(minutes=5))
    jobs, metrics = small_jobs(store), Metrics()
    entered, gate = threading.Event(), threading.Event()
    real_recluster = jobs.recluster

    def slow_recluster(at, *args):
        if jobs.assigner is not None:  # the second run: stuck until the test lets it go
            entered.set()
            assert gate.wait(60)
        return real_recluster(at, *args)

    jobs.recluster = slow_recluster
    clustering, assigning = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    schedule = ClusteringSchedule(
        lambda: jobs,
        metrics,
        in_thread(clustering),
        assign_run=in_thread(assigning),
        policy=ReclusterPolicy(min_new_claims=1),
    )

    async def scenario():
        assert (await schedule.recluster(now)).issues >= 1  # issues to assign to
        mark = utcnow()
        stuck = asyncio.create_task(schedule.recluster(utcnow()))
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 30)
        land(store, "later-", 8, utcnow())
        started = time.monotonic()
        assigned = await asyncio.wait_for(schedule.assign(mark), 20)
        waited = time.monotonic() - started
        still_running = not stuck.done()
        gate.set()
        return assigned, waited, still_running, await stuck

    try:
        assigned, waited, still_running, report = asyncio.run(scenario())
    finally:
        gate.set()
        clustering.shutdown()
        assigning.shutdown()
    assert assigned >= 1 and still_running and waited < 5
    assert value(metrics.assignments, "assigned") == assigned
    assert report is not None and report.claims == 56


# ---- the re-cluster in a child process, and abandoning it --------------------------------------


def slow_fit(job):
    """A fit that takes long enough to be interrupted (runs in the child process)."""
    time.sleep(120)
    return fit_claims(job)


@pytest.mark.slow
def test_a_recluster_runs_in_a_child_and_close_abandons_it_leaving_the_issues(store):
    now = utcnow()
    land(store, "first-", 48, now - timedelta(minutes=5))
    jobs, metrics = small_jobs(store), Metrics()
    clustering = ThreadPoolExecutor(1)
    schedule = ClusteringSchedule(
        lambda: jobs,
        metrics,
        in_thread(clustering),
        child=ChildProcess(nice=0),
        policy=ReclusterPolicy(min_new_claims=1),
    )
    try:
        report = asyncio.run(schedule.tick(now))  # 48 new claims, no issues yet: a run, fitted in the child
        assert report is not None and report.claims == 48 and report.issues >= 1
        before = sorted((i.issue_id, i.size) for i in jobs.issues.load())
        land(store, "later-", 20, utcnow())
        schedule.fit = slow_fit

        async def abandon():
            run = asyncio.create_task(schedule.tick(utcnow()))
            deadline = time.monotonic() + 60
            while schedule.child.pid is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert schedule.child.pid is not None, "the re-cluster never reached its child process"
            started = time.monotonic()
            await asyncio.get_running_loop().run_in_executor(None, schedule.close)
            return await run, time.monotonic() - started

        result, took = asyncio.run(abandon())
    finally:
        schedule.close()
        clustering.shutdown()
    assert result is None and took < 5
    assert value(metrics.recluster_runs, "cancelled") == 1 and value(metrics.recluster_runs, "ok") == 1
    assert sorted((i.issue_id, i.size) for i in jobs.issues.load()) == before  # the previous issues stay
