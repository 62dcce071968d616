"""The long-running processes, wired from compose's Components: the worker and the API server.

`run_worker` adds what only a worker has to the shared objects (services/app/compose.py): the ingest
pipeline, the leader timers and, with ``serve_api``, the API in the same event loop; Faust runs them
(streams/). `run_api` serves the API alone. Each small builder below wires one part and hands the
timers and agents the services they call and the intervals they keep, never Components or Settings.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

from services.alerts.evaluation.cycle import AlertCycle
from services.alerts.notify.dispatch import Dispatcher
from services.api.ingestlag import LagWatch
from services.app.broker import create_topics, topic_epoch
from services.app.compose import (
    Components,
    agreement_test,
    dispatcher_for,
    evaluator_for,
    open_components,
    opened,
    recluster_policy,
    service_cli,
    slo_watch,
)
from services.app.settings import Settings
from services.core.backoff import Backoff
from services.core.clock import utcnow
from services.core.gcpolicy import tune_for_bulk
from services.core.threads import ChildProcess, in_thread, named_executor
from services.ingest.durable import DurableWriter
from services.ingest.ingestor import BrokerHealth
from services.ingest.offsets import BrokerOffsets, OffsetTracker, unread
from services.ingest.pipeline import IngestPipeline
from services.issues.schedule import ClusteringSchedule, open_alert_windows
from services.review.agreement_alerts import AgreementWatch, InstrumentAlerts
from services.store.damage import damage_message, find_damage
from services.store.repair import repair_recent
from streams import timers

log = logging.getLogger("claimwatch")
SHUTDOWN_GRACE_SECONDS = (
    8  # open HTTP requests get this long after SIGINT/SIGTERM; the process is gone well within 15 s
)


def ingest_lag_watch(settings: Settings) -> LagWatch:
    """How far the worker's group is behind on the verdicts topic, read from the broker (the dashboard's banner)."""
    return LagWatch(
        lambda: unread(settings.bootstrap, settings.consumer_group, settings.verdicts_topic),
        settings.ingest.lag_warning_messages,
    )


@dataclass
class WorkerThreads:
    """The worker's own threads, besides the store's (Components.store_thread)."""

    decode: ThreadPoolExecutor = field(  # decodes the next batch while one is written
        default_factory=lambda: named_executor("decode")
    )
    clustering: ThreadPoolExecutor = field(  # long runs must not stall ingest
        default_factory=lambda: named_executor("clustering")
    )
    assign: ThreadPoolExecutor = field(  # nor online assignment
        default_factory=lambda: named_executor("assign")
    )
    alerts: ThreadPoolExecutor = field(  # nor alert evaluation, which catches up minute by minute after a backlog
        default_factory=lambda: named_executor("alerts")
    )
    notify: ThreadPoolExecutor = field(  # the notification log's writes: never behind ingest's or an evaluation
        default_factory=lambda: named_executor("notify")
    )

    def close(self) -> None:
        self.decode.shutdown(wait=True)
        self.clustering.shutdown(wait=False, cancel_futures=True)
        self.assign.shutdown(wait=False, cancel_futures=True)
        self.alerts.shutdown(wait=True)
        self.notify.shutdown(wait=True)


def run_worker(settings: Settings, *, serve_api: bool, on_ready: Callable[[Components], None] | None = None) -> None:
    """Run the Faust worker (and the API) in the foreground until SIGINT/SIGTERM."""
    from streams.app import create_app  # Faust loads only in a worker

    # Its callers set kafka (the embedded broker's address when none was given), so bootstrap is kafka.
    create_topics(
        settings.bootstrap, [settings.verdicts_topic, settings.dlq_topic, settings.alerts_topic], settings.partitions
    )
    epoch = topic_epoch(settings.bootstrap, settings.verdicts_topic)
    c = open_components(settings, starting=True, cli=service_cli())
    threads = WorkerThreads()
    schedule = None
    try:
        refuse_damaged_store(c)
        if settings.clickhouse.startswith("chdb:"):  # this process alone writes: safe to repair before consuming
            repair_torn_writes(c)
        app, topics = create_app(settings)
        add_ingest(app, topics, c, threads, settings, epoch)
        dispatcher = add_alerting(app, topics.alerts, c, threads, settings)
        add_triage(app, c, dispatcher, settings.triage.tick_seconds)
        schedule = add_clustering(app, c, threads, settings) if settings.clustering.in_worker else None
        if settings.review.sample_every_minutes:
            add_review_sampling(app, c, settings)
        if serve_api:
            app.task(api_task(c))
        if on_ready:
            on_ready(c)
        tune_for_bulk()  # after start-up: see services/core/gcpolicy.py
        run_faust(app)
    finally:
        if schedule is not None:  # a re-cluster in progress is abandoned: its process stops, the last issues stay
            schedule.close()
        threads.close()
        c.close()


def refuse_damaged_store(c: Components) -> None:
    """Never consume into a damaged store: its rates would be wrong and replays skipped (services/store/damage.py).
    Only the parts ClickHouse set aside when it opened the store (missing or short files): CHECK TABLE reads every
    byte (39 s for 820 MB here), so it runs in `claimwatch repair --damaged`, not at every start."""
    damage = find_damage(c.store, check=False)
    if damage:
        raise WorkerStopped(damage_message(damage, c.store.url))


def repair_torn_writes(c: Components) -> None:
    report = repair_recent(c.store, utcnow())
    if report.changed:
        log.warning("repaired a torn write: %s", report)


def add_ingest(app, topics, c: Components, threads: WorkerThreads, settings: Settings, epoch: str) -> None:
    """The ingest agent over the verdicts topic, and each worker's consumer-lag report and broker readiness."""
    from streams import agents  # Faust loads only in a worker

    i = settings.ingest
    c.metrics.watch_buffer(app.byte_budget)

    def backoff() -> Backoff:
        return Backoff(i.retry_initial_seconds, i.retry_max_seconds)

    offsets = OffsetTracker()
    writer = DurableWriter(
        c.ingestor(epoch),
        c.health,
        c.metrics,
        backoff(),
        in_thread(c.store_thread),
        in_thread(threads.decode),
        clock=utcnow,
        stopping=lambda: app.should_stop,
    )
    pipeline = IngestPipeline(writer, agents.dead_letter_sender(topics.dlq, backoff), c.metrics, offsets)
    agents.register_ingest(app, topics.verdicts, pipeline, i)
    # Faust's consumer group is the app's id. Its reads say whether the broker answers (readiness): only a process
    # that consumes has c.health.broker.
    broker = c.health.broker = BrokerHealth()
    c.metrics.watch_broker(lambda: broker.unreachable(time.monotonic()) is None)
    timers.register_lag_report(app, offsets, BrokerOffsets(settings.bootstrap, app.conf.id), c.metrics, broker)


def add_alerting(app, alerts_topic, c: Components, threads: WorkerThreads, settings: Settings) -> Dispatcher:
    """The leader's alert evaluation and resends; returns the dispatcher that notifies."""
    dispatcher = dispatcher_for(settings, c, in_thread(threads.notify))
    agreement = InstrumentAlerts(AgreementWatch(agreement_test()), c.review.reviewed, c.repos.alerts)
    evaluator = evaluator_for(settings, c.repos.rates, c.repos.dead_letters, c.repos.alerts)
    slos = slo_watch(settings, c.repos.rates, c.repos.alerts, c.owners, evaluator)
    cycle = AlertCycle(
        evaluator,
        c.repos.alerts,
        dispatcher,
        c.metrics,
        in_thread(threads.alerts),
        explainer=c.alerts.explainer,
        hooks=(agreement, c.cardinality_watch(), slos),  # SLOs after the evaluator: they step the minutes it did
    )
    timers.register_alerting(
        app, alerts_topic, cycle, settings.drift.eval_interval_seconds, settings.notify.resend_seconds
    )
    return dispatcher


def add_triage(app, c: Components, dispatcher: Dispatcher, interval_seconds: float) -> None:
    run_in_store = in_thread(c.store_thread)
    timers.register_triage(app, lambda now: run_in_store(c.triage.tick, now), dispatcher, interval_seconds)


def add_clustering(app, c: Components, threads: WorkerThreads, settings: Settings) -> ClusteringSchedule:
    """The leader's re-clustering and online assignment, each on its own thread."""
    s = settings.clustering
    schedule = ClusteringSchedule(
        lambda: c.issue_jobs,
        c.metrics,
        in_thread(threads.clustering),
        policy=recluster_policy(settings),
        assign_run=in_thread(threads.assign),
        child=ChildProcess(name="claimwatch-recluster"),
        windows=lambda now: open_alert_windows(c.repos.alerts, now),
    )
    timers.register_clustering(app, schedule, s.interval_minutes * 60, s.assign_interval_seconds)
    return schedule


def add_review_sampling(app, c: Components, settings: Settings) -> None:
    r = settings.review
    window, run_in_store = timedelta(hours=r.sample_window_hours), in_thread(c.store_thread)
    timers.register_review_sampling(
        app, lambda now: run_in_store(c.review.review_tick, window, now), r.sample_every_minutes * 60
    )


class WorkerStopped(Exception):
    """The worker stopped, or would not start, on what it cannot carry on from; the message says why and what to do,
    on one line."""


def crash_message(reason: BaseException) -> str:
    """Why the worker stopped and what to do next. Nothing unstored was acked, so a restart loses nothing."""
    text = str(reason)
    cause = " ".join((text if text.startswith(type(reason).__name__) else f"{type(reason).__name__}: {text}").split())
    if type(reason).__name__ == "UnsupportedCodecError":
        return (
            f"the worker stopped: it cannot decompress a batch from the broker ({cause}). Install the codec "
            "libraries (pip install 'aiokafka[lz4,snappy,zstd]', which claimwatch depends on) and restart the "
            "worker: the batch was not acknowledged, so it is read again"
        )
    return (
        f"the worker stopped on an unexpected error while consuming ({cause}). Nothing it had not stored was "
        "acknowledged: restart it (a supervisor does) and it resumes from its committed offsets; if it stops "
        "again at the same point, keep this log and see docs/operations.md#reliability-and-security"
    )


def run_faust(app) -> None:
    """Faust's worker in the foreground; WorkerStopped when it stopped on a crash (mode exits 0 after one, so a
    supervisor would see a clean stop and not restart it)."""
    import faust  # Faust loads only in a worker

    worker = faust.Worker(app, loglevel=logging.getLogger().getEffectiveLevel(), quiet=True, redirect_stdouts=False)
    try:
        worker.execute_from_commandline()
    except SystemExit:
        pass
    if worker.crash_reason is not None:
        raise WorkerStopped(crash_message(worker.crash_reason))


def api_task(c: Components):
    """The API served in the worker's event loop (`claimwatch up`)."""
    import uvicorn  # FastAPI and uvicorn load only in a process that serves HTTP

    from services.api.app import create_api
    from services.app.intake import BrokerIntake

    class EmbeddedServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):  # Faust owns the signals in this process
            yield

    intake = BrokerIntake(c.settings.bootstrap, c.settings.verdicts_topic)
    config = server_config(
        create_api(c, ingest_lag=ingest_lag_watch(c.settings), intake=intake),
        c.settings.api.host,
        c.settings.api.port,
        lifespan="off",
        access_log=False,
    )

    async def serve_api() -> None:
        try:
            await EmbeddedServer(config).serve()
        finally:
            intake.close()

    return serve_api


def server_config(app, host: str, port: int, **options):
    """How claimwatch serves HTTP. The caller's address is the socket's: uvicorn's own proxy handling (on by default,
    trusting loopback) would take it from X-Forwarded-For before the API's limits see it, so it is off, and the API
    reads X-Forwarded-For only from api.trusted_proxies (services/api/auth.py: ClientAddress)."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="warning", proxy_headers=False, **options)


def run_api(settings: Settings) -> None:
    """The HTTP API alone (against a ClickHouse server; in embedded mode use `claimwatch up`)."""
    import uvicorn  # FastAPI and uvicorn load only in a process that serves HTTP

    from services.api.app import create_api
    from services.app.intake import BrokerIntake

    intake = BrokerIntake(settings.bootstrap, settings.verdicts_topic)
    with opened(settings, starting=True, cli=service_cli()) as components:
        try:
            uvicorn.Server(
                server_config(
                    create_api(components, ingest_lag=ingest_lag_watch(settings), intake=intake),
                    settings.api.host,
                    settings.api.port,
                    timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
                )
            ).run()
        finally:
            intake.close()
