"""HTTP API app factory: takes the process's Services (settings + store), no globals."""
from __future__ import annotations

from fastapi import FastAPI, HTTPException, Query, Response
from fastapi.responses import JSONResponse

from services.rates.query import RateQueries, WindowError, parse_window
from services.rates.report import route_rates, slice_rates
from services.store.backends import StoreError
from services.store.dlq import dlq_summary


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

    @api.get("/api/dlq")
    def get_dlq(samples: int = Query(1, ge=0, le=20)) -> list[dict]:
        return dlq_summary(services.store, samples)

    return api
