"""HTTP API app factory: takes the process's Services (settings + store), no globals."""
from __future__ import annotations

from datetime import datetime, timezone

from fastapi import FastAPI, HTTPException, Query, Response
from fastapi.responses import JSONResponse

from services.alerts.service import AlertsService
from services.alerts.store import AlertStore, NotFound
from services.api.models import AckBody, SilenceBody
from services.rates.query import RateQueries, WindowError, parse_window
from services.rates.report import route_rates, slice_rates
from services.store.backends import StoreError
from services.store.dlq import dlq_summary


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def create_api(services) -> FastAPI:
    api = FastAPI(title="claimwatch", version="0.1.0",
                  description="Claim-level hallucination rates, drift alerts, named issues, runbooks and the eval set.")
    rates = RateQueries(services.store)

    @api.exception_handler(StoreError)
    async def _store_down(request, exc: StoreError):
        return JSONResponse(status_code=503, content={"detail": f"store unavailable: {exc}"})

    def window_of(text: str):
        try:
            return parse_window(text)
        except WindowError as exc:
            raise HTTPException(422, str(exc)) from None

    @api.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok"}

    @api.get("/readyz")
    def readyz(response: Response) -> dict:
        health = services.health
        if not health.store_ok:
            response.status_code = 503
            return {"ready": False, "reason": f"store writes failing: {health.store_error}",
                    "consecutive_failures": health.consecutive_failures}
        try:
            services.store.query("SELECT 1 AS ok")
        except StoreError as exc:
            response.status_code = 503
            return {"ready": False, "reason": f"store unreachable: {exc}"}
        return {"ready": True}

    @api.get("/metrics")
    def metrics() -> Response:
        return Response(services.metrics.render(), media_type="text/plain; version=0.0.4")

    @api.get("/api/rates")
    def get_rates(window: str = Query("30m", description="e.g. 5m, 30m, 90m, 24h, or all")) -> list[dict]:
        return route_rates(rates.totals("", window_of(window)))

    @api.get("/api/slices")
    def get_slices(window: str = Query("30m"), dim: list[str] | None = Query(None)) -> dict:
        w = window_of(window)
        dims = dim or rates.dims()
        return {d: slice_rates(rates.totals(d, w), d) for d in dims}

    alerts = AlertsService(AlertStore(services.store))

    @api.exception_handler(NotFound)
    async def _not_found(request, exc: NotFound):
        return JSONResponse(status_code=404, content={"detail": str(exc)})

    @api.exception_handler(ValueError)
    async def _bad_value(request, exc: ValueError):
        return JSONResponse(status_code=422, content={"detail": str(exc)})

    @api.get("/api/alerts")
    def list_alerts(route: str | None = None, state: str | None = Query(None, pattern="^(pending|firing|resolved)$")) -> list[dict]:
        return alerts.list(utcnow(), route, state)

    @api.get("/api/alerts/{alert_id}")
    def show_alert(alert_id: str) -> dict:
        return alerts.show(alert_id, utcnow())

    @api.post("/api/alerts/{alert_id}/ack")
    def ack_alert(alert_id: str, body: AckBody) -> dict:
        return alerts.ack(alert_id, body.by, body.note, utcnow())

    @api.get("/api/silences")
    def list_silences(active: bool = False) -> list[dict]:
        return alerts.silences(utcnow(), active)

    @api.post("/api/silences", status_code=201)
    def create_silence(body: SilenceBody) -> dict:
        return alerts.silence(body.matchers, body.by, body.comment, utcnow(), duration=body.duration, ends_at=body.ends_at)

    @api.delete("/api/silences/{silence_id}")
    def expire_silence(silence_id: str) -> dict:
        return alerts.unsilence(silence_id, utcnow())

    @api.get("/api/dlq")
    def get_dlq(samples: int = Query(1, ge=0, le=20)) -> list[dict]:
        return dlq_summary(services.store, samples)

    return api
