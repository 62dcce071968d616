"""Timers: leader-only alert evaluation, Alertmanager resend, re-clustering, online assignment and sampling
claims for human review; and each worker's consumer-lag report. The work is in services/; each timer only calls it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from services.alerts.evaluation.cycle import AlertCycle
from services.core.clock import utcnow
from services.core.metrics import Metrics
from services.ingest.ingestor import BrokerHealth
from services.ingest.offsets import BrokerOffsets, OffsetTracker
from services.issues.schedule import ClusteringSchedule

log = logging.getLogger(__name__)


def register_alerting(app, alerts_topic, cycle: AlertCycle, eval_seconds: float, resend_seconds: float) -> None:
    @app.timer(eval_seconds, on_leader=True)
    async def evaluate_alerts() -> None:
        for key, value in await cycle.evaluate(utcnow()):
            await alerts_topic.send(key=key, value=value)

    @app.timer(resend_seconds, on_leader=True)
    async def resend_firing() -> None:
        await cycle.resend(utcnow())

    app.task(cycle.dispatcher.run)


def register_clustering(app, schedule: ClusteringSchedule, recluster_seconds: float, assign_seconds: float) -> None:
    @app.timer(recluster_seconds, on_leader=True)
    async def recluster() -> None:
        await schedule.tick(utcnow())  # re-clusters only when enough changed (services/issues/schedule.py)

    @app.timer(assign_seconds, on_leader=True)
    async def assign() -> None:
        await schedule.assign(utcnow())  # its own thread: never behind a re-cluster


def register_triage(app, tick: Callable[[datetime], Awaitable[list]], dispatcher, interval_seconds: float) -> None:
    @app.timer(interval_seconds, on_leader=True)
    async def triage() -> None:
        await dispatcher.enqueue(await tick(utcnow()))  # wake archived issues; the issue webhook's events


def register_review_sampling(app, sample: Callable[[datetime], Awaitable[object]], interval_seconds: float) -> None:
    @app.timer(interval_seconds, on_leader=True)
    async def sample_for_review() -> None:
        await sample(utcnow())  # within the day's budget: once it is spent, later runs queue nothing


def register_lag_report(
    app, offsets: OffsetTracker, broker: BrokerOffsets, metrics: Metrics, health: BrokerHealth, interval: float = 5.0
) -> None:
    """The lag of each partition assigned to this worker, from the broker's log ends and the group's commits (so
    it is true right after a restart) and what this worker finished since (OffsetTracker.lag). Each read's outcome
    is the broker's readiness (``health``): with no partition assigned, the broker is only pinged."""
    reported: set[tuple[str, int]] = set()
    failing = False  # log when reads start failing, not at every tick

    @app.timer(interval)
    async def report_lag() -> None:
        nonlocal reported, failing
        # Highwaters before any await: a rebalance meanwhile may take a partition away.
        highwaters = {(tp.topic, tp.partition): app.consumer.highwater(tp) for tp in app.consumer.assignment()}
        health.asking(time.monotonic())
        try:  # a metadata round trip: answered even while the group rebalances, which can hold the offset reads
            await asyncio.wait_for(broker.ping(), interval * 2)
            health.answered(time.monotonic())
            positions = await asyncio.wait_for(broker.read(highwaters), interval * 2)
        except Exception as exc:  # a gauge must not stop the worker: it keeps its last values until the broker answers
            if not failing:
                log.warning(
                    "consumer lag: cannot read offsets from the broker (%s); trying again every %.0f s",
                    f"{type(exc).__name__}: {exc}",
                    interval,
                )
            failing = True
            health.failed(f"{type(exc).__name__}: {exc}"[:300])
            return
        failing = False
        for topic, partition in reported - highwaters.keys():  # moved to another worker, which reports it now
            metrics.consumer_lag.remove(topic, str(partition))
        for (topic, partition), highwater in highwaters.items():
            lag = offsets.lag(topic, partition, positions[topic, partition], highwater)
            metrics.consumer_lag.labels(topic, str(partition)).set(lag)
        reported = set(highwaters)

    @app.on_before_shutdown.connect
    async def close_broker_clients(sender, **kwargs) -> None:
        await broker.close()
