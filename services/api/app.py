"""HTTP API and dashboard, built by an app factory from the process's components (no globals).

API errors are JSON ``{"detail": ...}`` with a 4xx for bad input: 404 for an unknown id,
409 for a clash with the current state, 413 for an oversize body, 422 for a malformed
one (naming the field), 401/403 for a missing or wrong token, 429 when rate limited
(services/api/security.py: Gate),
503 when the store is down. A page request gets the same status and sentence as the styled error page.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.alerts.notify.dispatch import RELOAD_WITHIN
from services.alerts.notify.receivers import ALERTMANAGER, ISSUE_WEBHOOK, WEBHOOK, receiver_status
from services.api import pages, slopage, views
from services.api.ingestlag import LagWatch
from services.api.middleware import AnonymousReadLimit, BodyLimit, SecurityHeaders
from services.api.models import Problem, error_location, plain_errors
from services.api.routers import alerts as alerts_routes
from services.api.routers import evalset as evalset_routes
from services.api.routers import issues as issues_routes
from services.api.routers import ops, otlp, rates
from services.api.routers import review as review_routes
from services.api.routers import slos as slos_routes
from services.api.routers import traces as traces_routes
from services.api.routeview import RouteReport
from services.api.security import ApiPolicy, Gate
from services.api.serialise import as_json
from services.core.clock import utcnow
from services.core.errors import Conflict, NotFound, StoreError
from services.evalset.promotion import NearDuplicateError, PromotionError

TAGS = [
    {"name": "rates", "description": "Claim-level hallucination rates with 95% intervals, worst first"},
    {"name": "alerts", "description": "Drift alerts and silences"},
    {"name": "issues", "description": "Failing claims clustered into named issues, with runbooks"},
    {"name": "traces", "description": "One trace whole: answer, claims with their evidence, and their issues"},
    {"name": "slos", "description": "Objectives on hallucinated claims: error budgets, burn rates, what spends them"},
    {"name": "eval", "description": "Promotion of traces into the eval set, and its report, agreement and gate"},
    {"name": "review", "description": "Blind human labels of sampled claims, agreement and calibration"},
    {"name": "ops", "description": "Health, readiness, Prometheus metrics, dead letters"},
    {"name": "otlp", "description": "OTLP/HTTP intake: OpenTelemetry spans and evaluation events as verdicts"},
]

GZIP_MIN_BYTES = 1024  # smaller answers gain less than compressing them costs


def refusal(
    request: Request, status: int, detail: str, field: str | None = None, headers: Mapping[str, str] | None = None
) -> Response:
    """The styled error page for a page request; ``Problem`` JSON for everything else (services/api/pages.py)."""
    if pages.wants_page(request):
        return pages.error_page(status, detail, headers)
    return JSONResponse(
        status_code=status, content={"detail": detail, **({"field": field} if field else {})}, headers=headers
    )


def install_error_handlers(api: FastAPI) -> None:
    @api.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400:  # FastAPI's answer to a body it cannot decode (not UTF-8): malformed, so 422
            return refusal(request, 422, "the body is not UTF-8 JSON; send a JSON object", "body")
        if pages.wants_page(request):
            return pages.error_page(exc.status_code, str(exc.detail), exc.headers)
        return await http_exception_handler(request, exc)

    @api.exception_handler(RequestValidationError)
    async def _malformed(request: Request, exc: RequestValidationError):
        # One sentence naming each field, never pydantic's list (it echoes the input and its internals).
        errors = exc.errors()
        return refusal(request, 422, plain_errors(errors), error_location(errors[0]) if errors else None)

    @api.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound):
        return refusal(request, 404, str(exc))

    @api.exception_handler(Conflict)
    async def _conflict(request: Request, exc: Conflict):
        return refusal(request, 409, str(exc))

    @api.exception_handler(PromotionError)
    async def _refused(request: Request, exc: PromotionError):
        return refusal(request, 409 if isinstance(exc, NearDuplicateError) else 422, str(exc))

    @api.exception_handler(ValueError)
    async def _bad_value(request: Request, exc: ValueError):
        return refusal(request, 422, str(exc))

    @api.exception_handler(StoreError)
    async def _store_down(request: Request, exc: StoreError):
        return refusal(request, 503, f"store unavailable: {exc}")

    @api.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        # Starlette re-raises the exception after this answer, so the server still logs it with its traceback.
        return refusal(request, 500, "Something went wrong on the server; its log has the details.")


def create_api(
    components,
    policy: ApiPolicy | None = None,
    now: Callable[[], datetime] = utcnow,
    clock: Callable[[], float] = time.monotonic,
    ingest_lag: LagWatch | None = None,
    intake: otlp.Intake | None = None,
) -> FastAPI:
    """The API and dashboard over the process's components (services/app/compose.py builds them).

    ``policy`` defaults to ``components.settings.api``. ``ingest_lag`` feeds the pages' lag banner and
    GET /api/ingest; without it, neither knows the lag. ``intake`` puts OTLP exports on the verdicts topic; without
    it, /v1/logs and /v1/traces answer 503.
    """
    policy = policy or components.settings.api
    gate = Gate(policy, clock)
    api = FastAPI(
        title="claimwatch",
        version="0.1.0",
        openapi_tags=TAGS,
        docs_url=None,
        redoc_url=None,
        description="Claim-level hallucination rates, drift alerts, named issues, runbooks and the eval set. "
        "Changes need `Authorization: Bearer <token>`.",
    )
    install_error_handlers(api)
    alerts, issues, evalset = components.alerts, components.issues, components.evalset

    repos = components.repos
    report = RouteReport(repos.rates, components.review, alerts)
    detector = components.settings.drift.detector_config()
    series = ops.RouteSeries(
        report, alerts, components.metrics, components.settings.metrics.max_route_series, now, components.slos
    )
    api.include_router(
        ops.router(
            components.store,
            repos.storage,
            repos.dead_letters,
            components.health,
            components.metrics,
            series,
            gate,
            ingest_lag,
            components.settings.ingest.lag_warning_messages,
        )
    )
    api.include_router(rates.router(repos.rates, alerts, report, detector, gate, now))
    api.include_router(alerts_routes.router(alerts, gate, now))
    api.include_router(issues_routes.router(issues, components.triage, gate))
    api.include_router(evalset_routes.router(evalset, gate))
    api.include_router(traces_routes.router(components.traces, gate, now))
    api.include_router(slos_routes.router(components.slos, gate))
    api.include_router(review_routes.router(components.review, gate, now))
    api.include_router(otlp.router(intake, gate))
    site = pages.Pages(
        gate,
        now,
        rates=repos.rates,
        report=report,
        alerts=alerts,
        review=components.review,
        traces=components.traces,
        detector=detector,
        issues=issues,
        evalset=evalset,
        receivers=notification_receivers(components),
        ingest=lambda: views.ingest_status(components.health, components.metrics, time.monotonic(), now()),
        budgets=lambda routes: slopage.route_budgets(as_json(components.slos.all(burns=False)), routes),
    )
    rules = components.settings.slo_alerts.burn_rules()
    api.include_router(pages.router(site, ingest_lag, slopage.handlers(site, components.slos, rules)))
    pages.mount_static(api)

    if policy.cors_origins:  # off unless configured
        from fastapi.middleware.cors import CORSMiddleware

        api.add_middleware(
            CORSMiddleware,
            allow_origins=list(policy.cors_origins),
            allow_credentials=False,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["X-Total-Count", "Link"],
        )  # a page of a list says where it lies
    api.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES)
    api.add_middleware(AnonymousReadLimit, gate=gate)
    api.add_middleware(
        BodyLimit,
        max_bytes=policy.max_body_bytes,
        wider={"/v1/": (policy.otlp_max_body_bytes, "otlp_max_body_bytes")},
    )
    api.add_middleware(SecurityHeaders)
    document_plain_validation_errors(api)
    return api


def notification_receivers(components) -> Callable[[datetime], list[dict]]:
    """now -> each notification receiver's state, read from the notification log that the leader's dispatcher
    writes (so the API shows it from any process)."""
    s = components.settings
    configured = {
        ALERTMANAGER: bool(s.notify.alertmanager_url),
        WEBHOOK: bool(s.notify.webhook_url),
        ISSUE_WEBHOOK: bool(s.triage.webhook_url),
    }
    log = components.repos.notifications
    return lambda now: receiver_status(log.receivers(now - RELOAD_WITHIN), configured, now)


def document_plain_validation_errors(api: FastAPI) -> None:
    """The OpenAPI document describes 422 answers as they are sent (``Problem``: one sentence and a field), not as
    FastAPI's default list of pydantic errors, which ``install_error_handlers`` never sends."""
    default = api.openapi

    def openapi() -> dict:
        if api.openapi_schema is None:
            schema = default()
            schemas = schema.get("components", {}).get("schemas", {})
            if "HTTPValidationError" in schemas:
                schemas["HTTPValidationError"] = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
                schemas.pop("ValidationError", None)
        return api.openapi_schema or schema

    api.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to customise the schema
