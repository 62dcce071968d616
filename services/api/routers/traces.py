"""Traces: the list, searched by route, verdict, version, time range and claim text (a page at a time); and one
trace whole: question, answer, every claim with its verdict, span and chunk, versions, first failed stage, issues."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from fastapi import APIRouter, Depends, Query, Request, Response

from services.api.models import ERROR_RESPONSES, path_id
from services.api.routers.rates import page_headers
from services.api.security import AUTH_RESPONSES, Gate
from services.api.serialise import as_json
from services.contract.model import CANONICAL_VERDICTS
from services.core.clock import utcnow
from services.issues.traces import CLAIMS_PER_PAGE, MAX_CLAIMS_PAGE, TraceView
from services.issues.tracesearch import (
    ANY_FAILED,
    MAX_SEARCH_ROWS,
    MAX_TEXT,
    MAX_VERSIONS,
    TIME_FORMS,
    TRACES_PER_PAGE,
    TraceRowRead,
)


def router(traces, gate: Gate, now: Callable[[], datetime] = utcnow) -> APIRouter:
    r = APIRouter(tags=["traces"])
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}

    @r.get(
        "/api/traces",
        summary="Traces whose claims match a search, newest first, a page at a time",
        description="One entry per trace with a claim in the time range (`since` to `until`, default the last 24 "
        "hours, at most 31 days) that passes every filter given; its figures count those claims. `X-Total-Count` "
        'gives how many traces match, and `Link` the next and previous pages (`rel="next"`, `rel="prev"`).',
        response_model=list[TraceRowRead],
        dependencies=[Depends(gate.read())],
        responses={**guarded, 422: ERROR_RESPONSES[422]},
    )
    def list_traces(
        request: Request,
        response: Response,
        route: str | None = Query(None, max_length=256, description="the route's whole name"),
        verdict: list[str] | None = Query(
            None,
            max_length=len(CANONICAL_VERDICTS),
            description=f"any of: {', '.join(CANONICAL_VERDICTS)}, or {ANY_FAILED} (any failed verdict)",
        ),
        version: list[str] | None = Query(
            None, max_length=MAX_VERSIONS, description="key=value in the claim's versions, e.g. model=gen-2026-11"
        ),
        since: str | None = Query(None, max_length=64, description=f"start of the range: {TIME_FORMS}"),
        until: str | None = Query(None, max_length=64, description="end of the range (not included); default now"),
        text: str | None = Query(None, max_length=MAX_TEXT, description="claim text contains this, without case"),
        limit: int = Query(TRACES_PER_PAGE, ge=1, le=MAX_SEARCH_ROWS, description="traces per page"),
        offset: int = Query(0, ge=0, le=10_000_000, description="traces of the list to skip"),
    ) -> list[dict]:
        page = traces.search(now(), route, verdict or (), version or (), since, until, text, limit, offset)
        response.headers.update(page_headers(request, page))
        return as_json(page.traces)

    @r.get(
        "/api/traces/{trace_id:path}",
        summary="One trace: its answer, claims with evidence, and their issues",
        response_model=TraceView,
        dependencies=[Depends(gate.read())],
        responses={**guarded, **ERROR_RESPONSES},
    )
    def show_trace(
        trace_id: str = path_id(),
        claims_page: int = Query(
            1, ge=1, le=MAX_CLAIMS_PAGE, description=(f"page of each event's claims, {CLAIMS_PER_PAGE} a page")
        ),
    ) -> dict:
        return as_json(traces.get(trace_id, claims_page))

    return r
