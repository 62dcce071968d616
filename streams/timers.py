"""Timers: leader-only alert evaluation, Alertmanager resend, re-clustering, online assignment and sampling
claims for human review; and each worker's consumer-lag report. The work is in services/; each timer only calls it."""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Awaitable, Callable

from services.alerts.cycle import AlertCycle
from services.core.clock import utcnow
from services.core.metrics import Metrics
from services.ingest.offsets import OffsetTracker
from services.issues.schedule import ClusteringSchedule

if TYPE_CHECKING:
    from services.app.settings import Settings


def register_alerting(app, alerts_topic, cycle: AlertCycle, settings: Settings) -> None:
    @app.timer(settings.drift.eval_interval_seconds, on_leader=True)
    async def evaluate_alerts() -> None:
        for key, value in await cycle.evaluate(utcnow()):
            await alerts_topic.send(key=key, value=value)

    @app.timer(settings.notify.resend_seconds, on_leader=True)
    async def resend_firing() -> None:
        await cycle.resend(utcnow())

    app.task(cycle.dispatcher.run)


def register_clustering(app, schedule: ClusteringSchedule, settings: Settings) -> None:
    @app.timer(settings.clustering.interval_minutes * 60, on_leader=True)
    async def recluster() -> None:
        await schedule.tick(utcnow())  # re-clusters only when enough changed (services/issues/schedule.py)

    @app.timer(settings.clustering.assign_interval_seconds, on_leader=True)
    async def assign() -> None:
        await schedule.assign(utcnow())  # its own thread: never behind a re-cluster


def register_review_sampling(app, sample: Callable[[datetime], Awaitable[object]], interval_seconds: float) -> None:
    @app.timer(interval_seconds, on_leader=True)
    async def sample_for_review() -> None:
        await sample(utcnow())  # within the day's budget: once it is spent, later runs queue nothing


def register_lag_report(app, offsets: OffsetTracker, metrics: Metrics, interval: float = 5.0) -> None:
    @app.timer(interval)
    async def report_lag() -> None:
        for tp in app.consumer.assignment():
            highwater = app.consumer.highwater(tp)
            if highwater is not None:
                metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(offsets.lag(tp.topic, tp.partition, highwater))
