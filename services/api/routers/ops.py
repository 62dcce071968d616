"""Liveness, readiness, Prometheus metrics, dead-letter statistics and storage."""
from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from services.api.ingestlag import IngestLag, LagWatch
from services.api.responses import DlqReason, Health, Ready, StorageReport
from services.api.responses import IngestLag as IngestLagOut
from services.api.security import AUTH_RESPONSES, Gate
from services.core.metrics import Metrics
from services.ingest.ingestor import Health as IngestHealth
from services.rates.report import route_rates
from services.rates.window import parse_window
from services.store.backends import Store, ping
from services.core.errors import StoreError
from services.store.dlq import dlq_summary
from services.store.rates import RateRepository
from services.store.storage import StorageRepository

GAUGE_WINDOW = "30m"


def publish_route_rates(metrics, rates: RateRepository, window: str = GAUGE_WINDOW) -> None:
    """Set the per-route rate gauges from the window ending where every window ends (RateRepository.window_end).

    Routes that left the window disappear from the gauges instead of keeping a stale value.
    """
    entries = route_rates(rates.totals("", parse_window(window)))
    for gauge in (metrics.route_rate, metrics.route_rate_lo, metrics.route_rate_hi):
        gauge.clear()
    for e in entries:
        if e["rate"] is None:
            continue
        metrics.route_rate.labels(e["route"], window).set(e["rate"])
        metrics.route_rate_lo.labels(e["route"], window).set(e["interval"][0])
        metrics.route_rate_hi.labels(e["route"], window).set(e["interval"][1])


def router(store: Store, rates: RateRepository, storage: StorageRepository, health: IngestHealth, registry: Metrics,
           gate: Gate, ingest_lag: LagWatch | None, lag_warning_messages: int) -> APIRouter:
    """``health``: the ingest writes' (readiness); ``registry``: the process's metrics; ``lag_warning_messages``:
    the lag the banner warns at."""
    r = APIRouter()
    read = [Depends(gate.read())]
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}

    @r.get("/healthz", tags=["ops"], summary="Liveness: the process answers", response_model=Health)
    def healthz() -> dict:
        return {"status": "ok"}

    @r.get("/readyz", tags=["ops"], summary="Readiness: the store accepts reads and writes; a worker's broker answers",
           response_model=Ready, response_model_exclude_none=True,
           responses={503: {"model": Ready, "description": "Not ready; reason says why"}})
    def readyz() -> JSONResponse | dict:
        if not health.store_ok:
            return JSONResponse(status_code=503, content={
                "ready": False, "reason": f"store writes failing: {health.store_error}",
                "consecutive_failures": health.consecutive_failures})
        if health.broker is not None and (silent := health.broker.unreachable(time.monotonic())):
            return JSONResponse(status_code=503, content={"ready": False, "reason": f"broker unreachable: {silent}"})
        try:
            ping(store)
        except StoreError as exc:
            return JSONResponse(status_code=503, content={"ready": False, "reason": f"store unreachable: {exc}"})
        return {"ready": True}

    @r.get("/metrics", tags=["ops"], summary="Prometheus metrics (text exposition format)", dependencies=read,
           response_class=PlainTextResponse,
           responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **guarded})
    def metrics() -> Response:
        try:
            publish_route_rates(registry, rates)
        except StoreError:
            pass  # a store hiccup must not hide the ingest counters; the gauges keep their last values
        return Response(registry.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @r.get("/api/dlq", tags=["ops"], summary="Dead-lettered messages: count per contract rule, with samples",
           response_model=list[DlqReason], dependencies=read, responses=guarded)
    def get_dlq(samples: int = Query(1, ge=0, le=20, description="samples per reason"),
                route: str | None = Query(None, max_length=256, description="only dead letters of this route "
                                          "(their message key, else the route their JSON names)")) -> list[dict]:
        return dlq_summary(store, samples, route)

    @r.get("/api/ingest", tags=["ops"], summary="How far ingest is behind the broker's log (the pages' lag banner)",
           response_model=IngestLagOut, dependencies=read, responses=guarded)
    async def get_ingest() -> dict:
        found = await ingest_lag.current() if ingest_lag else None
        return (found or IngestLag(None, lag_warning_messages, "not read yet")).as_dict()

    @r.get("/api/storage", tags=["ops"], summary="Rows, bytes and bytes per claim per table, with the TTLs in force",
           response_model=StorageReport, dependencies=read, responses=guarded)
    def get_storage() -> dict:
        return storage.report()

    return r
