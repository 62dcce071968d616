"""Alerts and silences: list, detail (with the runbook of an input-health alert), the rules, ack, silence,
unsilence."""
from __future__ import annotations

from typing import Callable

from fastapi import APIRouter, Depends, Query, Request

from services.alerts.service import AlertsService
from services.api.models import ERROR_RESPONSES, AckBody, SilenceBody, UnsilenceBody, path_id
from services.api.responses import AlertDetail, AlertRule, AlertView, SilenceListed, SilenceView
from services.api.serialise import as_json
from services.api.security import AUTH_RESPONSES, MUTATION_RESPONSES, Gate


def router(alerts: AlertsService, gate: Gate, now: Callable) -> APIRouter:
    r = APIRouter(tags=["alerts"])
    read = [Depends(gate.read())]
    write = [Depends(gate.mutation())]
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}
    changes = {**MUTATION_RESPONSES, **ERROR_RESPONSES}

    @r.get("/api/alerts", summary="Alerts, newest first", response_model=list[AlertView], dependencies=read,
           responses={**guarded, 422: ERROR_RESPONSES[422]})
    def list_alerts(route: str | None = Query(None, max_length=256),
                    state: str | None = Query(None, pattern="^(pending|firing|resolved)$")) -> list[dict]:
        return as_json(alerts.list(now(), route, state))

    # before /api/alerts/{alert_id}, which would take "rules" for an id
    @r.get("/api/alerts/rules", summary="Each alert kind's rule: severity, thresholds in force, measured quality",
           response_model=list[AlertRule], dependencies=read, responses=guarded)
    def alert_rules() -> list[dict]:
        return as_json(alerts.rules())

    @r.get("/api/alerts/{alert_id}", summary="One alert with its intervals, suspect changes, transitions and runbook",
           response_model=AlertDetail, dependencies=read, responses={**guarded, **ERROR_RESPONSES})
    def show_alert(alert_id: str = path_id()) -> dict:
        return as_json(alerts.show(alert_id, now()))

    @r.post("/api/alerts/{alert_id}/ack", summary="Acknowledge an alert", response_model=AlertView,
            dependencies=write, responses=changes)
    def ack_alert(body: AckBody, request: Request, alert_id: str = path_id()) -> dict:
        return as_json(alerts.ack(alert_id, gate.acting_as(request, body.by), body.note, now()))

    @r.get("/api/silences", summary="Silences (all, or only the active ones)", response_model=list[SilenceListed],
           dependencies=read, responses=guarded)
    def list_silences(active: bool = False) -> list[dict]:
        return as_json(alerts.silences(now(), active))

    @r.post("/api/silences", status_code=201, summary="Silence alerts whose labels match, until a time",
            response_model=SilenceView, dependencies=write, responses=changes)
    def create_silence(body: SilenceBody, request: Request) -> dict:
        return as_json(alerts.silence(body.matchers, gate.acting_as(request, body.by), body.comment, now(),
                                      duration=body.duration, ends_at=body.ends_at))

    @r.delete("/api/silences/{silence_id}", summary="End a silence now", response_model=SilenceView,
              dependencies=write, responses=changes)
    def expire_silence(body: UnsilenceBody, request: Request, silence_id: str = path_id()) -> dict:
        return as_json(alerts.unsilence(silence_id, gate.acting_as(request, body.by), now()))

    return r
