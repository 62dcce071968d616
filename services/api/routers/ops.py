"""Liveness, readiness, Prometheus metrics, dead-letter statistics and storage."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import Field

from services.alerts.oncall.service import AlertsService
from services.alerts.oncall.slos import SloReport
from services.api.ingestlag import IngestLag, IngestLagRead, LagWatch
from services.api.routeview import RouteReport
from services.api.security import AUTH_RESPONSES, Gate
from services.core.clock import utcnow
from services.core.errors import StoreError
from services.core.metrics import Metrics
from services.core.readmodel import Read
from services.ingest.ingestor import Health as IngestHealth
from services.rates.window import parse_window
from services.store.backends import Store, ping
from services.store.dlq import DeadLetterRepository
from services.store.readmodel import DlqReasonRead, StorageReportRead
from services.store.storage import StorageRepository

GAUGE_WINDOW = "30m"


class Health(Read):
    status: Literal["ok"]


class About(Read):
    store: str = Field(description="the store served: an absolute chdb path or a server's address, no credentials")


class Ready(Read):
    ready: bool
    reason: str | None = None
    consecutive_failures: int | None = Field(None, description="store writes failing: how many in a row")


OPEN_STATES = ("pending", "firing")


class RouteSeries:
    """The per-route series of /metrics, chosen at each scrape: a producer chooses route names, so a series for
    every route seen would grow with them (55,000 routes made /metrics 38 MB).

    The routes kept are those with an open alert (pending or firing), and the first ``limit`` of the overview's
    order over ``GAUGE_WINDOW`` (firing first, then furthest above expected): metrics.max_route_series. They carry
    the rate gauges (set from that window, ending where every window ends: RateRepository.window_end) and the
    per-route counters (Metrics.keep_route_series); every route counts in the fleet aggregates. A route that
    leaves the set loses its series, rather than keep a stale value."""

    def __init__(
        self,
        report: RouteReport,
        alerts: AlertsService,
        metrics: Metrics,
        limit: int,
        now: Callable[[], datetime] = utcnow,
        slos: SloReport | None = None,
    ):
        self.report, self.alerts, self.metrics, self.limit, self.now = report, alerts, metrics, limit, now
        self.slos = slos

    def publish_slos(self) -> None:
        """Each SLO's budget left and burn rates, as `claimwatch slo list` gives them; a window that cannot tell
        has no sample."""
        if self.slos is None:
            return
        self.metrics.slo_budget_remaining.clear()
        self.metrics.slo_burn_rate.clear()
        for slo in self.slos.all():
            if slo.budget_remaining is not None:
                self.metrics.slo_budget_remaining.labels(slo.name).set(slo.budget_remaining)
            for b in slo.burns:
                if b.rate is not None:
                    self.metrics.slo_burn_rate.labels(slo.name, b.window).set(b.rate)

    def publish(self) -> None:
        now, window = self.now(), parse_window(GAUGE_WINDOW)
        alerting = {v.alert.route for v in self.alerts.list(now) if v.state in OPEN_STATES}
        entries = self.report.page(window, now, "priority", limit=self.limit).routes if self.limit else []
        missing = alerting - {e["route"] for e in entries}
        if missing:
            entries += self.report.page(window, now, "priority", limit=len(missing), routes=missing).routes
        self.metrics.keep_route_series({e["route"] for e in entries} | alerting)
        metrics = self.metrics
        for gauge in (metrics.route_rate, metrics.route_rate_lo, metrics.route_rate_hi):
            gauge.clear()
        for e in entries:
            if e["rate"] is None:
                continue
            metrics.route_rate.labels(e["route"], GAUGE_WINDOW).set(e["rate"])
            metrics.route_rate_lo.labels(e["route"], GAUGE_WINDOW).set(e["interval"][0])
            metrics.route_rate_hi.labels(e["route"], GAUGE_WINDOW).set(e["interval"][1])


def router(
    store: Store,
    storage: StorageRepository,
    dead_letters: DeadLetterRepository,
    health: IngestHealth,
    registry: Metrics,
    series: RouteSeries,
    gate: Gate,
    ingest_lag: LagWatch | None,
    lag_warning_messages: int,
) -> APIRouter:
    """``health``: the ingest writes' (readiness); ``registry``: the process's metrics; ``series``: which routes
    it carries series for; ``lag_warning_messages``: the lag the banner warns at."""
    r = APIRouter()
    read = [Depends(gate.read())]
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}

    @r.get("/healthz", tags=["ops"], summary="Liveness: the process answers", response_model=Health)
    def healthz() -> dict:
        return {"status": "ok"}

    @r.get(
        "/api/about",
        tags=["ops"],
        summary="Which store this API serves",
        response_model=About,
        dependencies=read,
        responses=guarded,
    )
    def about() -> dict:
        return {"store": store.url}

    @r.get(
        "/readyz",
        tags=["ops"],
        summary="Readiness: the store accepts reads and writes; a worker's broker answers",
        response_model=Ready,
        response_model_exclude_none=True,
        responses={503: {"model": Ready, "description": "Not ready; reason says why"}},
    )
    def readyz() -> JSONResponse | dict:
        if not health.store_ok:
            return JSONResponse(
                status_code=503,
                content={
                    "ready": False,
                    "reason": f"store writes failing: {health.store_error}",
                    "consecutive_failures": health.consecutive_failures,
                },
            )
        if health.broker is not None and (silent := health.broker.unreachable(time.monotonic())):
            return JSONResponse(status_code=503, content={"ready": False, "reason": f"broker unreachable: {silent}"})
        try:
            ping(store)
        except StoreError as exc:
            return JSONResponse(status_code=503, content={"ready": False, "reason": f"store unreachable: {exc}"})
        return {"ready": True}

    @r.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus metrics (text exposition format)",
        dependencies=read,
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **guarded},
    )
    def metrics() -> Response:
        try:
            series.publish()
            series.publish_slos()
        except StoreError:
            pass  # a store hiccup must not hide the ingest counters; the gauges keep their last values
        return Response(registry.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @r.get(
        "/api/dlq",
        tags=["ops"],
        summary="Dead-lettered messages: count per contract rule, with samples",
        response_model=list[DlqReasonRead],
        dependencies=read,
        responses=guarded,
    )
    def get_dlq(
        samples: int = Query(1, ge=0, le=20, description="samples per reason"),
        route: str | None = Query(
            None,
            max_length=256,
            description="only dead letters of this route (their message key, else the route their JSON names)",
        ),
    ) -> list[DlqReasonRead]:
        return [DlqReasonRead(**reason) for reason in dead_letters.summary(samples, route)]

    @r.get(
        "/api/ingest",
        tags=["ops"],
        summary="How far ingest is behind the broker's log (the pages' lag banner)",
        response_model=IngestLagRead,
        dependencies=read,
        responses=guarded,
    )
    async def get_ingest() -> dict:
        found = await ingest_lag.current() if ingest_lag else None
        return (found or IngestLag(None, lag_warning_messages, "not read yet")).as_dict()

    @r.get(
        "/api/storage",
        tags=["ops"],
        summary="Rows, bytes and bytes per claim per table, with the TTLs in force",
        response_model=StorageReportRead,
        dependencies=read,
        responses=guarded,
    )
    def get_storage() -> StorageReportRead:
        return StorageReportRead(**storage.report())

    return r
