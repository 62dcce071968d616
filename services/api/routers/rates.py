"""Per-route rates with intervals and slices, worst first, and one route's history."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response
from pydantic import AwareDatetime

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.expectations import PRIORITY, SORTS
from services.alerts.oncall.service import AlertsService
from services.api.models import ERROR_RESPONSES
from services.api.routeview import MAX_ROUTES_PER_PAGE, ROUTES_PER_PAGE, RouteHistory, RoutePage, RouteReport
from services.api.security import AUTH_RESPONSES, Gate
from services.api.serialise import as_json
from services.core.clock import utcnow
from services.core.errors import NotFound
from services.rates.readmodel import RouteDetailRead, RouteRateRead, SliceRead
from services.rates.report import MAX_SLICE_DIMS, MAX_SLICE_VALUES, slice_report
from services.rates.window import WindowError, parse_window
from services.store.rates import RateRepository

MAX_RANGE_MINUTES = 31 * 24 * 60
ROUTE_FILTER = (
    "a glob matched against whole route names (`billing-*`, `*/faq`; * any run, ? one character), or "
    "without * or ? a part of the name; without case"
)


def window_of(text: str, allow_all: bool = True):
    try:
        window = parse_window(text)
    except WindowError as exc:
        raise HTTPException(422, str(exc)) from None
    if window is None and not allow_all:
        raise HTTPException(422, "window 'all' is not allowed here; give a length such as 6h")
    if window is not None and window.total_seconds() > MAX_RANGE_MINUTES * 60:
        raise HTTPException(422, f"window {text!r} is longer than 31 days; use a shorter one")
    return window


def page_headers(request: Request, page: RoutePage) -> dict[str, str]:
    """``X-Total-Count`` and a ``Link`` to the next and previous pages (RFC 8288), as paths on this API."""
    links = [(page.next_offset, "next"), (max(0, page.offset - page.limit) if page.offset else None, "prev")]
    link = ", ".join(
        f'<{request.url.path}?{request.url.include_query_params(offset=at).query}>; rel="{rel}"'
        for at, rel in links
        if at is not None
    )
    return {"X-Total-Count": str(page.total), **({"Link": link} if link else {})}


def router(
    rates: RateRepository,
    alerts: AlertsService,
    report: RouteReport,
    detector: DetectorConfig,
    gate: Gate,
    now: Callable[[], datetime] = utcnow,
) -> APIRouter:
    r = APIRouter(
        tags=["rates"],
        dependencies=[Depends(gate.read())],
        responses=AUTH_RESPONSES if gate.policy.protect_reads else {},
    )
    history = RouteHistory(rates)

    @r.get(
        "/api/rates",
        summary="Claim-level hallucination rate per route beside its expected rate, a page at a time",
        description="A page of the route list. `X-Total-Count` gives how many routes the list holds (those the "
        '`route` filter keeps), and `Link` the next and previous pages (`rel="next"`, `rel="prev"`).',
        response_model=list[RouteRateRead],
        response_model_exclude_unset=True,
        responses={422: ERROR_RESPONSES[422]},
    )
    def get_rates(
        request: Request,
        response: Response,
        window: str = Query("30m", max_length=16, description="e.g. 5m, 30m, 90m, 24h, or all"),
        calibrated: bool = Query(
            False,
            description="add each route's rate corrected for the verifier's "
            "errors measured against human labels (field `calibrated`)",
        ),
        sort: str = Query(
            "rate", pattern=f"^({'|'.join(SORTS)})$", description=f"rate: highest rate first; priority: {PRIORITY}"
        ),
        route: str | None = Query(None, max_length=256, description=f"only routes matching {ROUTE_FILTER}"),
        limit: int = Query(ROUTES_PER_PAGE, ge=1, le=MAX_ROUTES_PER_PAGE, description="routes per page"),
        offset: int = Query(0, ge=0, le=10_000_000, description="routes of the list to skip"),
    ) -> list[dict]:
        page = report.page(window_of(window), now(), sort, calibrated, limit=limit, offset=offset, matching=route)
        response.headers.update(page_headers(request, page))
        return page.routes

    @r.get(
        "/api/slices",
        summary="Rates by slice (query_type, stakes, version.*), worst first",
        response_model=dict[str, list[SliceRead]],
        responses={422: ERROR_RESPONSES[422]},
    )
    def get_slices(
        window: str = Query("30m", max_length=16),
        dim: list[str] | None = Query(
            None, description=f"slice dimensions, at most {MAX_SLICE_DIMS}; default the ones with the most events"
        ),
        limit: int = Query(MAX_SLICE_VALUES, ge=1, le=500, description="values per dimension, worst first"),
    ) -> dict:
        return slice_report(rates, window_of(window), dim, limit)

    @r.get(
        "/api/routes/{route:path}",
        summary="One route over time: rate with interval band, baseline, alert "
        "spans, verdict breakdown and version changes",
        response_model=RouteDetailRead,
        responses=ERROR_RESPONSES,
    )
    def get_route(
        route: str = Path(max_length=256),
        window: str = Query("6h", max_length=16, description="length of the range, ending at `end`"),
        end: AwareDatetime | None = Query(
            None, description="end of the range; default the route's newest minute up to now"
        ),
        step: int | None = Query(None, ge=1, le=1440, description="minutes per point; default keeps <= 120"),
    ) -> dict:
        w = window_of(window, allow_all=False)
        if end is not None and not 1971 <= end.year <= 2105:
            raise HTTPException(422, f"end {end.isoformat()}: must fall between 1971 and 2105")
        detail = history.detail(
            route,
            w,
            end,
            as_json(alerts.list(now(), route)),
            step,
            detector,
            lambda entries: alerts.compare_rates(entries, now()),
        )
        if detail is None:
            raise NotFound(f"no events stored for route {route!r}; list routes with GET /api/rates?window=all")
        return detail

    return r
