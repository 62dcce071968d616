"""The leader-only clustering schedule as plain objects: when to re-cluster, and the runs themselves.

``ReclusterPolicy`` decides at each tick. A re-cluster costs tens of CPU-seconds and changes
nothing when no claims came in, so it runs only when

- at least ``max(min_new_claims, ceil(min_new_fraction * claims at the last run))`` failing claims
  were ingested since the last run (200 or 2% by default: a small store re-clusters after 200 new
  claims, a store of 50,000 after 1,000), or
- the last run is older than ``max_age`` and there is anything to cluster (claims leave the
  lookback window and issues resolve even when nothing new arrives).

Otherwise the tick is skipped, counted (claimwatch_recluster_skipped_total) and logged once per
change of reason. The process start counts as a run for the age; a process that finds issues
stored by an earlier one takes their size as the last run's and does not re-cluster at start-up.

``ClusteringSchedule`` runs the work. Online assignment has a thread of its own and uses the last
published issues, so it never waits behind a re-cluster. Before the backlog, each tick serves the windows
of open alerts (``WindowFocus``: a new alert at once, then every minute while it is open), so an alert
names its cause within seconds of opening (``IssueJobs.focus_window``). A re-cluster collects on the clustering
thread, fits in a child process (``ChildProcess``) and publishes when done; ``close`` (shutdown)
stops the child at once, so an abandoned run leaves the previous issues in place.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from services.alerts.explain.explainer import alert_window, explainable
from services.core.clock import utcnow
from services.core.metrics import Metrics
from services.core.threads import Cancelled, ChildProcess, Run
from services.issues.jobs import Fit, IssueJobs, RunReport, WindowReport, fit_claims

log = logging.getLogger(__name__)

RUN_NEW_CLAIMS, RUN_MAX_AGE = "new_claims", "max_age"
SKIP_FEW_NEW, SKIP_NOTHING, SKIP_RUNNING = "few_new_claims", "nothing_to_cluster", "running"


@dataclass(frozen=True)
class Decision:
    run: bool
    kind: str  # run: new_claims | max_age; skip: few_new_claims | nothing_to_cluster | running
    reason: str  # one line for the log


class ReclusterPolicy:
    """When a re-cluster is worth its cost. Plain state and an injected clock; no store, no threads."""

    def __init__(
        self,
        min_new_claims: int = 200,
        min_new_fraction: float = 0.02,
        max_age: timedelta = timedelta(hours=1),
        clock: Callable[[], datetime] = utcnow,
    ):
        self.min_new_claims, self.min_new_fraction, self.max_age = min_new_claims, min_new_fraction, max_age
        self.clock = clock
        self.last_run_at = clock()  # the start counts as a run for the age: no re-cluster just for starting
        self.claims_at_last_run = 0

    def needed(self) -> int:
        """New failing claims that make a run worth it."""
        return max(self.min_new_claims, math.ceil(self.min_new_fraction * self.claims_at_last_run), 1)

    def decide(self, new_claims: int) -> Decision:
        needed, age = self.needed(), self.clock() - self.last_run_at
        if new_claims >= needed:
            return Decision(
                True, RUN_NEW_CLAIMS, f"{new_claims} new failing claims since the last run (threshold {needed})"
            )
        if age >= self.max_age and (new_claims or self.claims_at_last_run):
            return Decision(
                True,
                RUN_MAX_AGE,
                f"the last run is {_minutes(age)} old (maximum {_minutes(self.max_age)}); "
                f"{new_claims} new failing claims",
            )
        if not new_claims and not self.claims_at_last_run:
            return Decision(False, SKIP_NOTHING, "skipped: no failing claims to cluster yet")
        due = self.last_run_at + self.max_age
        return Decision(
            False,
            SKIP_FEW_NEW,
            f"skipped: {new_claims} new failing claims since the last run, fewer than "
            f"{needed}; the next run comes at {needed} or at {due:%Y-%m-%d %H:%M}Z",
        )

    def ran(self, claims: int, at: datetime | None = None) -> None:
        """A run finished over ``claims`` failing claims (``at``: when it read them)."""
        self.last_run_at = at or self.clock()
        self.claims_at_last_run = claims


@dataclass(frozen=True)
class AlertWindow:
    """Where an open alert's failing claims are: its route, from its onset to now
    (services/alerts/explain/explainer.py)."""

    alert_id: str
    route: str
    since: datetime
    until: datetime


def open_alert_windows(alerts, now: datetime) -> list[AlertWindow]:
    """The windows of the open alerts failing claims can explain (``alerts``:
    services.alerts.lifecycle.records.AlertRecords)."""
    out = []
    for alert in alerts.open_alerts():
        if explainable(alert):
            start, end = alert_window(alert, now)
            out.append(AlertWindow(alert.alert_id, alert.route, start, end + timedelta(minutes=1, milliseconds=-1)))
    return out


class WindowFocus:
    """Which open alerts' windows to serve now: a newly open one at once, each again every ``every`` while open."""

    def __init__(self, every: timedelta = timedelta(minutes=1)):
        self.every = every
        self.served: dict[str, datetime] = {}

    def due(self, windows: list[AlertWindow], now: datetime) -> list[AlertWindow]:
        self.served = {k: v for k, v in self.served.items() if k in {w.alert_id for w in windows}}
        return [w for w in windows if w.alert_id not in self.served or now - self.served[w.alert_id] >= self.every]

    def done(self, window: AlertWindow, now: datetime) -> None:
        self.served[window.alert_id] = now


def _minutes(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 60:.0f} min"


class ClusteringSchedule:
    """Re-clusters and assigns for the leader's timers; ``close`` abandons a running re-cluster.

    ``run`` is the clustering thread, ``assign_run`` the assignment thread (default: ``run``).
    With a ``policy``, ``tick`` asks it first and assignment starts at once (against stored issues);
    without one, every ``tick`` re-clusters and nothing is assigned before the first run. With a
    ``child``, the fit runs in that child process; otherwise in the clustering thread.
    """

    def __init__(
        self,
        make_jobs: Callable[[], IssueJobs],
        metrics: Metrics,
        run: Run,
        *,
        policy: ReclusterPolicy | None = None,
        assign_run: Run | None = None,
        child: ChildProcess | None = None,
        fit: Fit = fit_claims,
        windows: Callable[[datetime], list[AlertWindow]] | None = None,
    ):
        self.make_jobs = make_jobs
        self.metrics = metrics
        self.run = run  # run(fn, *args) on the clustering thread
        self.assign_run = assign_run or run
        self.policy = policy
        self.child, self.fit = child, fit  # fit(job) runs in the child; a module-level function (it is pickled)
        self.windows = windows  # the open alerts' windows, served before the backlog
        self.focus = WindowFocus()
        self.jobs: IssueJobs | None = None
        self.running = False  # a run is awaited (event loop side)
        self.active = False  # a run is on the clustering thread
        self.cancel = threading.Event()
        self._busy = 0  # thread work in progress (collect, publish, assignment): close waits for it
        self._idle = threading.Condition()
        self._primed = False
        self._last_skip = ""

    def _jobs(self) -> IssueJobs:
        if self.jobs is None:
            self.jobs = self.make_jobs()
        return self.jobs

    def _tracked(self, fn, *args):
        """fn(*args) on a worker thread, counted so ``close`` can wait for it; refused once closing."""
        with self._idle:
            if self.cancel.is_set():
                raise Cancelled("shutting down")
            self._busy += 1
        try:
            return fn(*args)
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    # -- the timers' calls ------------------------------------------------------
    async def tick(self, now: datetime) -> RunReport | None:
        """The re-clustering timer: run if the policy says so, else count and log why not."""
        if self.policy is None:
            return await self.recluster(now)
        if self.running:
            self._skip(Decision(False, SKIP_RUNNING, "skipped: the previous run is still going"))
            return None
        jobs = self._jobs()
        try:
            if not self._primed:
                previous = await self.run(self._tracked, jobs.previous_run, self.policy.last_run_at)
                if previous is not None:
                    self.policy.ran(previous, self.policy.last_run_at)
                self._primed = True
            new = await self.run(self._tracked, jobs.new_claims, self.policy.needed())
        except Cancelled:
            return None
        except Exception:
            log.exception("could not count new failing claims; trying again at the next tick")
            return None
        self.metrics.recluster_new_claims.set(new)
        decision = self.policy.decide(new)
        if not decision.run:
            self._skip(decision)
            return None
        self._last_skip = ""
        log.info("re-clustering: %s", decision.reason)
        return await self.recluster(now)

    def _skip(self, decision: Decision) -> None:
        self.metrics.recluster_skipped.labels(decision.kind).inc()
        if decision.reason != self._last_skip:  # once per change, not every tick
            log.info("re-clustering %s", decision.reason)
            self._last_skip = decision.reason
        else:
            log.debug("re-clustering %s", decision.reason)

    async def recluster(self, now: datetime) -> RunReport | None:
        """One clustering run now; a failed or abandoned run leaves the previous issues in place and returns None."""
        jobs = self._jobs()
        self.running = True
        started = time.perf_counter()
        try:
            report = await self.run(self._recluster_on_thread, jobs, now)
        except Cancelled:  # close() came first, and logged it
            self.metrics.recluster_runs.labels("cancelled").inc()
            return None
        except asyncio.CancelledError:  # the worker is stopping; close() stops the child and says so
            self.metrics.recluster_runs.labels("cancelled").inc()
            raise
        except Exception:
            self.metrics.recluster_runs.labels("failed").inc()
            log.exception("re-clustering failed; the previous issues stay in place")
            return None
        finally:
            self.running = False
        self.metrics.recluster_runs.labels("ok").inc()
        self.metrics.recluster_seconds.observe(time.perf_counter() - started)
        if self.policy is not None and isinstance(report, RunReport):
            self.policy.ran(report.claims, now)
        log.info("clustering run: %s", report)
        return report

    def _recluster_on_thread(self, jobs: IssueJobs, now: datetime) -> RunReport:
        self.active = True  # until the thread is done, even when the awaiting timer was cancelled
        try:
            if self.child is None:
                return self._tracked(jobs.recluster, now)
            job = self._tracked(jobs.collect, now, self.cancel.is_set)
            fitted = self.child.call(self.fit, job)  # not tracked: close() stops it instead of waiting
            return self._tracked(jobs.publish, now, fitted)
        finally:
            self.active = False

    async def assign(self, now: datetime) -> int:
        """Assign failing claims ingested since the last call, against the last published issues."""
        if self.jobs is None and self.policy is None:
            return 0  # the policy-less schedule assigns only after its first run
        jobs = self._jobs()
        if self.windows is not None:
            await self.focus_windows(jobs, now)
        try:
            assigned = await self.assign_run(self._tracked, jobs.assign_new, now)
        except Cancelled:
            return 0
        except Exception:
            log.exception("online assignment failed; retrying at the next tick")
            return 0
        self.metrics.assignments.labels("assigned").inc(assigned)
        return assigned

    async def focus_windows(self, jobs: IssueJobs, now: datetime) -> list[WindowReport]:
        """The due open alerts' windows, newest claims first (see ``WindowFocus``); one failing window stops none."""
        try:
            due = self.focus.due(await self.assign_run(self._tracked, self.windows, now), now)
        except Cancelled:
            return []
        except Exception:
            log.exception("could not read the open alerts' windows; trying again at the next tick")
            return []
        reports = []
        for window in due:
            try:
                reports.append(
                    await self.assign_run(
                        self._tracked, jobs.focus_window, window.route, window.since, window.until, now
                    )
                )
            except Cancelled:
                break
            except Exception:
                log.exception("could not assign the window of alert %s; trying again at the next tick", window.alert_id)
                continue
            self.focus.done(window, now)
            self.metrics.assignments.labels("assigned").inc(reports[-1].assigned + reports[-1].clustered)
        return reports

    # -- shutdown ----------------------------------------------------------------
    def close(self, wait_seconds: float = 8.0) -> bool:
        """Abandon a running re-cluster (its child process is stopped) and refuse new work; wait up to
        ``wait_seconds`` for work already on a thread (a publish, an assignment batch) to finish, so the
        store closes after it. True when nothing is left running."""
        self.cancel.set()
        if self.active:
            log.info("re-clustering abandoned: shutting down; the previous issues stay")
        if self.child is not None:
            self.child.close()
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, wait_seconds)
