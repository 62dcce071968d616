"""Named issues: list with filters and sorting, detail, members, 2-D map, runbook; resolve, merge and the rest of
triage (assign, archive, notes, ticket links)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse

from services.alerts.lifecycle.silences import parse_duration
from services.api.models import (
    ERROR_RESPONSES,
    TEXT_ERROR_RESPONSES,
    ArchiveBody,
    AssignBody,
    ByBody,
    LinkBody,
    MergeBody,
    NoteBody,
    ResolveBody,
    path_id,
)
from services.api.security import AUTH_RESPONSES, MUTATION_RESPONSES, Gate
from services.issues.activity import ACTIVITY_PAGE, MAX_ACTIVITY_PAGE, ActivityPage
from services.issues.readmodel import IssueDetailRead, IssueMapRead, IssueMemberRead, IssueRead

RUNBOOK_TYPES = {"md": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8"}


STATES = Literal["new", "ongoing", "regressed", "resolved", "archived"]


def router(issues, triage, gate: Gate) -> APIRouter:
    r = APIRouter(tags=["issues"])
    read = [Depends(gate.read())]
    write = [Depends(gate.mutation())]
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}
    reads = {**guarded, **ERROR_RESPONSES}
    changes = {
        **MUTATION_RESPONSES,
        **ERROR_RESPONSES,
        409: {"model": ERROR_RESPONSES[404]["model"], "description": "Clashes with the issue's state"},
    }

    @r.get(
        "/api/issues",
        summary="Issues, filtered and sorted (Sentry-style list)",
        response_model=list[IssueRead],
        dependencies=read,
        responses={**guarded, 422: ERROR_RESPONSES[422]},
    )
    def list_issues(
        state: STATES | None = Query(None, description="archived issues are listed only with archived"),
        route: str | None = Query(None, max_length=256),
        q: str | None = Query(None, max_length=200, description="words in the name or keywords"),
        sort: Literal["priority", "last_seen", "first_seen", "count", "name"] = Query(
            "priority",
            description="priority (default): issues driving a firing alert first, then "
            "regressed or escalating ones, then the rest, each by claims in the last 24 hours",
        ),
        limit: int = Query(100, ge=1, le=1000),
        owner: str | None = Query(None, max_length=200, description="the issue's team or owner"),
        assignee: str | None = Query(None, max_length=200),
    ) -> list[dict]:
        return issues.list(state=state, route=route, q=q, sort=sort, limit=limit, owner=owner, assignee=assignee)

    @r.get(
        "/api/issues/{issue_id}",
        summary="One issue with its exemplars and a page of its activity",
        response_model=IssueDetailRead,
        dependencies=read,
        responses=reads,
    )
    def show_issue(
        issue_id: str = path_id(),
        alert: str | None = Query(
            None,
            max_length=200,
            description="the alert the reader came from: its window gives the representative traces",
        ),
        activity_offset: int = Query(0, ge=0, le=10_000_000, description="activity entries to skip, newest first"),
        activity_limit: int = Query(ACTIVITY_PAGE, ge=1, le=MAX_ACTIVITY_PAGE, description="activity entries to give"),
    ) -> dict:
        return issues.show(issue_id, alert, ActivityPage(activity_offset, activity_limit))

    @r.get(
        "/api/issues/{issue_id}/members",
        summary="The issue's failing claims, most typical first",
        response_model=list[IssueMemberRead],
        dependencies=read,
        responses=reads,
    )
    def issue_members(issue_id: str = path_id(), limit: int = Query(200, ge=1, le=5000)) -> list[dict]:
        return issues.members(issue_id, limit)

    @r.get(
        "/api/issues/{issue_id}/map",
        summary="2-D map of the issue's members with neighbouring issues",
        response_model=IssueMapRead,
        dependencies=read,
        responses=reads,
    )
    def issue_map(issue_id: str = path_id()) -> dict:
        return issues.map(issue_id)

    @r.get(
        "/api/issues/{issue_id}/runbook",
        summary="The issue's runbook, as Markdown or HTML",
        response_class=PlainTextResponse,
        dependencies=read,
        responses={
            200: {
                "content": {
                    "text/markdown": {"schema": {"type": "string"}},
                    "text/html": {"schema": {"type": "string"}},
                }
            },
            **guarded,
            **TEXT_ERROR_RESPONSES,
        },
    )
    def issue_runbook(
        issue_id: str = path_id(),
        format: Literal["md", "html"] = "md",
        alert: str | None = Query(
            None,
            max_length=200,
            description="the alert the reader came from: its window gives the representative traces",
        ),
    ) -> PlainTextResponse:
        text = issues.runbook(issue_id, format, alert)
        return PlainTextResponse(text, media_type=RUNBOOK_TYPES[format])

    @r.post(
        "/api/issues/{issue_id}/resolve",
        summary="Mark the issue resolved",
        response_model=IssueRead,
        dependencies=write,
        responses=changes,
    )
    def resolve_issue(body: ResolveBody, request: Request, issue_id: str = path_id()) -> dict:
        return triage.resolve(issue_id, gate.acting_as(request, body.by), body.in_next_version)

    @r.post(
        "/api/issues/{issue_id}/merge",
        summary="Merge the issue into another; returns the one that absorbed it",
        response_model=IssueDetailRead,
        dependencies=write,
        responses=changes,
    )
    def merge_issue(body: MergeBody, request: Request, issue_id: str = path_id()) -> dict:
        return issues.merge(issue_id, body.into, gate.acting_as(request, body.by))

    @r.post(
        "/api/issues/{issue_id}/assign",
        summary="Assign the issue to someone",
        response_model=IssueRead,
        dependencies=write,
        responses=changes,
    )
    def assign_issue(body: AssignBody, request: Request, issue_id: str = path_id()) -> dict:
        return triage.assign(issue_id, body.assignee, gate.acting_as(request, body.by))

    @r.post(
        "/api/issues/{issue_id}/unassign",
        summary="Leave the issue to its owner",
        response_model=IssueRead,
        dependencies=write,
        responses=changes,
    )
    def unassign_issue(body: ByBody, request: Request, issue_id: str = path_id()) -> dict:
        return triage.unassign(issue_id, gate.acting_as(request, body.by))

    @r.post(
        "/api/issues/{issue_id}/archive",
        summary="Archive until it escalates, for a duration or until N more claims",
        response_model=IssueRead,
        dependencies=write,
        responses=changes,
    )
    def archive_issue(body: ArchiveBody, request: Request, issue_id: str = path_id()) -> dict:
        duration = parse_duration(body.duration) if body.duration else None
        return triage.archive(issue_id, gate.acting_as(request, body.by), duration, body.claims)

    @r.post(
        "/api/issues/{issue_id}/unarchive",
        summary="Bring an archived issue back",
        response_model=IssueRead,
        dependencies=write,
        responses=changes,
    )
    def unarchive_issue(body: ByBody, request: Request, issue_id: str = path_id()) -> dict:
        return triage.unarchive(issue_id, gate.acting_as(request, body.by))

    @r.post(
        "/api/issues/{issue_id}/notes",
        summary="Add a note to the issue's activity",
        response_model=IssueRead,
        status_code=201,
        dependencies=write,
        responses=changes,
    )
    def note_issue(body: NoteBody, request: Request, issue_id: str = path_id()) -> dict:
        return triage.note(issue_id, body.text, gate.acting_as(request, body.by))

    @r.post(
        "/api/issues/{issue_id}/link",
        summary="Link the issue to its ticket",
        response_model=IssueRead,
        dependencies=write,
        responses=changes,
    )
    def link_issue(body: LinkBody, request: Request, issue_id: str = path_id()) -> dict:
        return triage.link(issue_id, body.url, gate.acting_as(request, body.by))

    return r
