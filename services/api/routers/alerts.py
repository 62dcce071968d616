"""Alerts and silences: list, detail (with the runbook of an input-health alert), the rules, ack, silence,
unsilence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from fastapi import APIRouter, Depends, Query, Request

from services.alerts.oncall.filters import LIST_LIMIT
from services.alerts.oncall.readmodel import AlertDetailRead, AlertRead, RuleRead, SilencePreviewRead, SilenceRead
from services.alerts.oncall.rules import RULE_KINDS
from services.alerts.oncall.service import AlertsService, SilenceView
from services.api.models import (
    ERROR_RESPONSES,
    PROBLEM_JSON,
    AckBody,
    SilenceBody,
    SilencePreviewBody,
    UnsilenceBody,
    path_id,
)
from services.api.security import AUTH_RESPONSES, MUTATION_RESPONSES, Gate, too_many

READ_LIMITED = {
    "description": "Too many reads from this address without a token or sign-in; retry after Retry-After seconds",
    "content": PROBLEM_JSON,
}


def router(alerts: AlertsService, gate: Gate, now: Callable) -> APIRouter:
    r = APIRouter(tags=["alerts"])
    read = [Depends(gate.read())]
    write = [Depends(gate.mutation())]
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}
    changes = {**MUTATION_RESPONSES, **ERROR_RESPONSES}

    def anonymous_read_limit(request: Request) -> None:
        """A read sent as a POST (a silence preview) meets the anonymous read limit, as a GET does
        (services/api/middleware.py AnonymousReadLimit)."""
        if not gate.known_reader(request) and (wait := gate.anonymous_read_wait(request)) > 0:
            raise too_many(wait, "requests from your address without signing in", "api.anonymous_reads_per_minute")

    @r.get(
        "/api/alerts",
        summary=f"Alerts, firing then pending then resolved, newest first: the {LIST_LIMIT} newest the filters keep",
        response_model=list[AlertRead],
        dependencies=read,
        responses={**guarded, 422: ERROR_RESPONSES[422]},
    )
    def list_alerts(
        route: str | None = Query(None, max_length=256),
        state: Literal["active", "pending", "firing", "resolved"] | None = Query(
            None, description="active: pending or firing"
        ),
        kind: str | None = Query(
            None,
            max_length=64,
            description=f"one of {', '.join(RULE_KINDS)}",
            json_schema_extra={"enum": list(RULE_KINDS)},
        ),
        team: str | None = Query(None, max_length=200, description="the owning team (an alert's team field)"),
    ) -> list[AlertRead]:
        return [view.read() for view in alerts.list(now(), route, state, kind=kind, team=team)]

    # before /api/alerts/{alert_id}, which would take "rules" for an id
    @r.get(
        "/api/alerts/rules",
        summary="Each alert kind's rule: severity, thresholds in force, measured quality",
        response_model=list[RuleRead],
        dependencies=read,
        responses=guarded,
    )
    def alert_rules() -> list[RuleRead]:
        return [rule.read() for rule in alerts.rules()]

    @r.get(
        "/api/alerts/{alert_id}",
        summary="One alert with its intervals, suspect changes, transitions and runbook",
        response_model=AlertDetailRead,
        dependencies=read,
        responses={**guarded, **ERROR_RESPONSES},
    )
    def show_alert(alert_id: str = path_id()) -> AlertRead:
        return alerts.show(alert_id, now()).read()

    @r.post(
        "/api/alerts/{alert_id}/ack",
        summary="Acknowledge an alert",
        response_model=AlertRead,
        dependencies=write,
        responses=changes,
    )
    def ack_alert(body: AckBody, request: Request, alert_id: str = path_id()) -> AlertRead:
        return alerts.ack(alert_id, gate.acting_as(request, body.by), body.note, now()).read()

    @r.get(
        "/api/silences",
        summary="Silences (all, or only the active ones)",
        response_model=list[SilenceRead],
        dependencies=read,
        responses=guarded,
    )
    def list_silences(active: bool = False) -> list[SilenceRead]:
        return [view.read() for view in alerts.silences(now(), active)]

    @r.post(
        "/api/silences",
        status_code=201,
        summary="Silence alerts whose labels match, until a time",
        response_model=SilenceRead,
        dependencies=write,
        responses=changes,
    )
    def create_silence(body: SilenceBody, request: Request) -> SilenceRead:
        at = now()
        made = alerts.silence(
            body.matchers,
            gate.acting_as(request, body.by),
            body.comment,
            at,
            duration=body.duration,
            ends_at=body.ends_at,
        )
        return SilenceView(made, made.is_active(at)).read()

    @r.post(
        "/api/silences/preview",
        summary="The alerts a silence of these matchers would silence now (read only: nothing is created)",
        response_model=SilencePreviewRead,
        dependencies=[*read, Depends(anonymous_read_limit)],
        responses={**guarded, 413: MUTATION_RESPONSES[413], 422: ERROR_RESPONSES[422], 429: READ_LIMITED},
    )
    def preview_silence(body: SilencePreviewBody) -> SilencePreviewRead:
        return alerts.preview(body.matchers, now()).read()

    @r.delete(
        "/api/silences/{silence_id}",
        summary="End a silence now",
        response_model=SilenceRead,
        dependencies=write,
        responses=changes,
    )
    def expire_silence(body: UnsilenceBody, request: Request, silence_id: str = path_id()) -> SilenceRead:
        at = now()
        ended = alerts.unsilence(silence_id, gate.acting_as(request, body.by), at)
        return SilenceView(ended, ended.is_active(at)).read()

    return r
