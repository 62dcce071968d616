"""SLOs on hallucinated claims (issue 54): each one's error budget, burn windows and open burn alerts; one in full with
the issues that spend its budget and the budget's burn-down (services/alerts/oncall/slos.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from services.alerts.oncall.readmodel import SloDetailRead, SloRead
from services.alerts.oncall.slos import SloReport
from services.api.models import ERROR_RESPONSES, path_id
from services.api.security import AUTH_RESPONSES, Gate
from services.api.serialise import as_json


def router(slos: SloReport, gate: Gate) -> APIRouter:
    r = APIRouter(tags=["slos"])
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}

    @r.get(
        "/api/slos",
        summary="Every SLO: its error budget over the window, each burn window, its open burn alerts",
        response_model=list[SloRead],
        dependencies=[Depends(gate.read())],
        responses=guarded,
    )
    def list_slos() -> list[dict]:
        return as_json(slos.all())

    @r.get(
        "/api/slos/{name}",
        summary="One SLO in full: budget, burn windows, alerts, what spends the budget, and its burn-down",
        response_model=SloDetailRead,
        dependencies=[Depends(gate.read())],
        responses={**guarded, **ERROR_RESPONSES},
    )
    def show_slo(name: str = path_id()) -> dict:
        return as_json(slos.get(name))

    return r
