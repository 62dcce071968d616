"""The leader-only clustering schedule as a plain object: re-cluster periodically, assign new claims in between.

Both run through ``run`` (one clustering thread, so a long run never stalls ingestion and the
two never overlap). The jobs, and with them the embedding model, are made on the first run.
"""
from __future__ import annotations

import logging
from datetime import datetime
from typing import Callable

from services.core.threads import Run
from services.core.metrics import Metrics
from services.issues.jobs import IssueJobs, RunReport

log = logging.getLogger(__name__)


class ClusteringSchedule:
    def __init__(self, make_jobs: Callable[[], IssueJobs], metrics: Metrics, run: Run):
        self.make_jobs = make_jobs
        self.metrics = metrics
        self.run = run  # run(fn, *args) on the clustering thread
        self.jobs: IssueJobs | None = None

    def _recluster(self, now: datetime) -> RunReport:
        if self.jobs is None:
            self.jobs = self.make_jobs()  # loads the model: on the clustering thread, not the event loop
        return self.jobs.recluster(now)

    async def recluster(self, now: datetime) -> RunReport | None:
        """One clustering run; a failed run leaves the previous issues in place and returns None."""
        try:
            report = await self.run(self._recluster, now)
        except Exception:
            log.exception("re-clustering failed; the previous issues stay in place")
            return None
        log.info("clustering run: %s", report)
        return report

    async def assign(self, now: datetime) -> int:
        """Assign failing claims ingested since the last call; nothing before the first run."""
        if self.jobs is None:
            return 0
        try:
            assigned = await self.run(self.jobs.assign_new, now)
        except Exception:
            log.exception("online assignment failed; retrying at the next tick")
            return 0
        self.metrics.assignments.labels("assigned").inc(assigned)
        return assigned
