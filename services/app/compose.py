"""Composition root for long-running processes (`claimwatch up`, `worker`, `api`).

In embedded mode one process owns the chDB directory, so the worker, the alert
evaluator, the clustering schedule and the API all run here, in one event loop,
sharing one store. With a ClickHouse server, several workers can run side by side.
"""
from __future__ import annotations

import contextlib
import logging

import orjson
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from services.contract.decode import Decoder
from services.core.gcpolicy import tune_for_bulk
from services.core.metrics import Metrics
from services.app.settings import Settings
from services.store.backends import Store, open_store
from services.store.migrate import migrate
from services.store.writer import EventWriter
from services.ingest.ingestor import Health, Ingestor

log = logging.getLogger("claimwatch")


@dataclass
class Services:
    """Everything that shares the store; built once per process."""

    settings: Settings
    store: Store
    metrics: Metrics = field(default_factory=Metrics)
    health: Health = field(default_factory=Health)
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="store"))
    dispatcher: object | None = None

    @classmethod
    def open(cls, settings: Settings) -> "Services":
        store = open_store(settings.clickhouse)
        migrate(store)
        return cls(settings, store)

    def embedder(self):
        """The clustering model as a texts -> vectors function (loaded on first use, cached in the store)."""
        if not hasattr(self, "_embed"):
            from services.evalset.service import lazy_embedder

            self._embed = lazy_embedder(self.settings, self.store)
        return self._embed

    def eval_service(self):
        from services.evalset.service import EvalService

        return EvalService(self.store, self.embedder())

    def ingestor(self) -> Ingestor:
        from services.ingest.privacy import Redactor

        return Ingestor(EventWriter(self.store), Decoder(self.settings.ingest.max_event_bytes),
                        Redactor(self.settings.privacy))

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        self.store.close()


def _api_task(services: Services):
    import uvicorn

    from services.api.app import create_api

    class EmbeddedServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):  # Faust owns the signals in this process
            yield

    api = create_api(services)
    config = uvicorn.Config(api, host=services.settings.api.host, port=services.settings.api.port,
                            log_level="warning", lifespan="off", access_log=False)

    async def serve_api() -> None:
        await EmbeddedServer(config).serve()

    return serve_api


def run_worker(settings: Settings, *, serve_api: bool, on_ready=None) -> None:
    """Run the Faust worker (and the API) in the foreground until SIGINT/SIGTERM."""
    import faust

    from streams.app import WorkerParts, create_app
    from services.app.broker import create_topics

    create_topics(settings.kafka, [settings.verdicts_topic, settings.dlq_topic, settings.alerts_topic], settings.partitions)
    services = Services.open(settings)
    try:
        if settings.clickhouse.startswith("chdb:"):  # this process alone writes: safe to repair before consuming
            from datetime import datetime, timezone

            from services.store.repair import repair_recent

            report = repair_recent(services.store, datetime.now(timezone.utc))
            if report.claims_rows or report.buckets_corrected:
                log.warning("repaired a torn write: %s", report)
        parts = WorkerParts(settings, services.ingestor(), services.metrics, services.health, services.executor)
        if serve_api:
            parts.tasks.append(_api_task(services))
        app = create_app(parts)
        register_alerting(app, services)
        if settings.clustering.in_worker:
            register_clustering(app, services)
        if on_ready:
            on_ready(services)
        tune_for_bulk()  # after start-up: see services/core/gcpolicy.py
        worker = faust.Worker(app, loglevel=logging.getLogger().getEffectiveLevel(), quiet=True, redirect_stdouts=False)
        try:
            worker.execute_from_commandline()
        except SystemExit:
            pass
    finally:
        services.close()


def register_clustering(app, services: Services) -> None:
    """Leader-only: re-cluster on a schedule, and assign new failing claims to issues in between."""
    import asyncio
    from datetime import datetime, timezone

    from services.issues.jobs import IssueJobs
    from services.store.issues import IssueStore

    s = services.settings
    cluster_thread = ThreadPoolExecutor(1, thread_name_prefix="clustering")  # long runs must not stall ingest
    state: dict = {}

    def jobs() -> IssueJobs:
        if "jobs" not in state:
            state["jobs"] = IssueJobs.from_settings(s, IssueStore(services.store))
        return state["jobs"]

    def recluster() -> None:
        report = jobs().recluster(datetime.now(timezone.utc))
        log.info("clustering run: %s", report)

    def assign() -> int:
        return jobs().assign_new(datetime.now(timezone.utc))

    @app.timer(s.clustering.interval_minutes * 60, on_leader=True)
    async def recluster_timer() -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(cluster_thread, recluster)
        except Exception:  # a failed run leaves the previous issues in place; the next tick retries
            log.exception("re-clustering failed; the previous issues stay in place")

    @app.timer(s.clustering.assign_interval_seconds, on_leader=True)
    async def assign_timer() -> None:
        if "jobs" not in state:
            return  # nothing to assign to before the first run
        try:
            assigned = await asyncio.get_running_loop().run_in_executor(cluster_thread, assign)
        except Exception:
            log.exception("online assignment failed; retrying at the next tick")
            return
        services.metrics.assignments.labels("assigned").inc(assigned)


def run_api(settings: Settings) -> None:
    """The HTTP API alone (against a ClickHouse server; in embedded mode use `claimwatch up`)."""
    import uvicorn

    from services.api.app import create_api

    services = Services.open(settings)
    try:
        uvicorn.run(create_api(services), host=settings.api.host, port=settings.api.port, log_level="warning")
    finally:
        services.close()


def register_alerting(app, services: Services) -> None:
    """The leader-only evaluator timer, the Alertmanager resend timer and the notification task."""
    import asyncio
    import time
    from collections import Counter
    from datetime import datetime, timedelta, timezone

    from services.alerts.evaluator import evaluator_for
    from services.alerts.notify import Dispatcher
    from services.store.alerts import AlertStore
    from services.store.rates import RateQueries

    s = services.settings
    alerts = AlertStore(services.store)
    evaluator = evaluator_for(s, RateQueries(services.store), alerts)
    dispatcher = Dispatcher(s.notify.alertmanager_url, s.notify.webhook_url, s.notify.external_url,
                            timedelta(seconds=s.notify.resend_seconds), services.metrics)
    topic = app.topic(s.alerts_topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    services.dispatcher = dispatcher

    async def in_store_thread(fn, *args):
        return await asyncio.get_running_loop().run_in_executor(services.executor, fn, *args)

    @app.timer(s.drift.eval_interval_seconds, on_leader=True)
    async def evaluate_alerts() -> None:
        now = datetime.now(timezone.utc)
        started = time.perf_counter()
        try:
            transitions = await in_store_thread(evaluator.evaluate, now)
            silences = await in_store_thread(alerts.silences, now)
        except Exception:  # the evaluator must not die with a store hiccup; it resumes next tick
            log.exception("alert evaluation failed; retrying at the next tick")
            return
        services.metrics.eval_seconds.observe(time.perf_counter() - started)
        for alert in transitions:
            services.metrics.alert_transitions.labels(alert.recorded_state).inc()
            record = {"alert_id": alert.alert_id, **alert.transition_record()}
            await topic.send(key=alert.route.encode(), value=orjson.dumps(record))
            dispatcher.enqueue(dispatcher.plan(None, alert, silences, now))
        states = Counter(a.recorded_state for a in evaluator.open.values())
        for state in ("pending", "firing"):
            services.metrics.alerts.labels(state).set(states.get(state, 0))

    @app.timer(s.notify.resend_seconds, on_leader=True)
    async def resend_firing() -> None:
        now = datetime.now(timezone.utc)
        try:
            silences = await in_store_thread(alerts.silences, now)
        except Exception:
            log.exception("could not read silences; skipping this resend")
            return
        dispatcher.enqueue(dispatcher.resend(evaluator.open.values(), silences, now))

    app.task(dispatcher.run)
