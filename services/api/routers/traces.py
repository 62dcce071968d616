"""One trace: question, answer, every claim with its verdict, span and chunk, versions, first failed stage, issues."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from services.api.models import ERROR_RESPONSES, path_id
from services.api.security import AUTH_RESPONSES, Gate
from services.api.serialise import as_json
from services.issues.traces import CLAIMS_PER_PAGE, MAX_CLAIMS_PAGE, TraceView


def router(traces, gate: Gate) -> APIRouter:
    r = APIRouter(tags=["traces"])
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}

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
