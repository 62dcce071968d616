"""The traces page (``/traces``): the filter form, the list of traces whose claims match it (each linking to its
trace page) and links to the previous and next pages. It reads TraceService.search, as ``GET /api/traces`` and
`claimwatch traces` do; a filter it cannot read is said above the form (422), not as an error page."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Query, Request
from fastapi.responses import Response

from services.api import views
from services.contract.model import CANONICAL_VERDICTS
from services.core.readmodel import exactly
from services.issues.tracesearch import (
    ANY_FAILED,
    MAX_SEARCH_ROWS,
    MAX_TEXT,
    MAX_VERSIONS,
    TIME_FORMS,
    TraceRowRead,
)

PAGE_SIZE = 50


def handler(pages) -> Callable[..., Response]:
    """The handler of ``/traces`` over ``pages`` (services/api/pages.py Pages: its search, clock and page frame)."""

    def traces_page(
        request: Request,
        route: str = Query("", max_length=256),
        verdict: str = Query("", max_length=32),
        version: list[str] = Query([], max_length=MAX_VERSIONS),
        since: str = Query("", max_length=64),
        until: str = Query("", max_length=64),
        text: str = Query("", max_length=MAX_TEXT),
        limit: int = Query(PAGE_SIZE, ge=1, le=MAX_SEARCH_ROWS),
        offset: int = Query(0, ge=0, le=10_000_000),
    ) -> Response:
        if not pages.gate.signed_in(request):  # sign in before anything is looked up
            return pages._page(request, "traces.html")
        versions = [v for v in version if v.strip()]
        query: dict[str, str | list[str]] = {
            "route": route,
            "verdict": verdict,
            "version": versions,
            "since": since,
            "until": until,
            "text": text,
            **({"limit": str(limit)} if limit != PAGE_SIZE else {}),
        }
        context = {
            "title": "Traces",
            "filters": query,
            "verdicts": (ANY_FAILED, *CANONICAL_VERDICTS),
            "time_forms": TIME_FORMS,
        }
        try:
            found = pages.traces.search(
                pages.now(), route, [verdict] if verdict else [], versions, since, until, text, limit, offset
            )
        except ValueError as exc:  # said above the form, which keeps what was typed
            response = pages._page(
                request, "traces.html", **context, error=str(exc), traces=[], pager=None, since_at=None, until_at=None
            )
            response.status_code = 422
            return response
        return pages._page(
            request,
            "traces.html",
            **context,
            error="",
            traces=exactly(list[TraceRowRead], found.traces),
            pager=views.pager(found, query, found.traces),
            since_at=found.since,
            until_at=found.until,
        )

    return traces_page
