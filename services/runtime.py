"""Composition root for long-running processes (`claimwatch up`, `worker`, `api`).

In embedded mode one process owns the chDB directory, so the worker, the alert
evaluator, the clustering schedule and the API all run here, in one event loop,
sharing one store. With a ClickHouse server, several workers can run side by side.
"""
from __future__ import annotations

import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from services.contract.decode import Decoder
from services.metrics import Metrics
from services.settings import Settings
from services.store.backends import Store, open_store
from services.store.migrate import migrate
from services.store.writer import EventWriter
from streams.ingest import Health, Ingestor

log = logging.getLogger("claimwatch")


@dataclass
class Services:
    """Everything that shares the store; built once per process."""

    settings: Settings
    store: Store
    metrics: Metrics = field(default_factory=Metrics)
    health: Health = field(default_factory=Health)
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="store"))

    @classmethod
    def open(cls, settings: Settings) -> "Services":
        store = open_store(settings.clickhouse)
        migrate(store)
        return cls(settings, store)

    def ingestor(self) -> Ingestor:
        return Ingestor(EventWriter(self.store), Decoder(self.settings.ingest.max_event_bytes))

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
    from streams.broker import create_topics

    create_topics(settings.kafka, [settings.verdicts_topic, settings.dlq_topic, settings.alerts_topic], settings.partitions)
    services = Services.open(settings)
    try:
        parts = WorkerParts(settings, services.ingestor(), services.metrics, services.health, services.executor)
        for interval, timer in leader_timers(services):
            parts.leader_timers.append((interval, timer))
        if serve_api:
            parts.tasks.append(_api_task(services))
        app = create_app(parts)
        if on_ready:
            on_ready(services)
        worker = faust.Worker(app, loglevel=logging.getLogger().getEffectiveLevel(), quiet=True, redirect_stdouts=False)
        try:
            worker.execute_from_commandline()
        except SystemExit:
            pass
    finally:
        services.close()


def leader_timers(services: Services) -> list:
    """Leader-only periodic jobs: one evaluator and one clustering schedule per deployment."""
    return []
