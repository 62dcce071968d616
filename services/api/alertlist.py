"""The alerts page (``/alerts``): the list filtered by state, kind, route and team (links and a GET form, each
keeping the others), counts that say what is shown of what, and the preview of a silence typed into its form (a
GET round trip: ``preview=1`` with the form's fields). It reads AlertsService.list and .preview, as
``GET /api/alerts``, ``POST /api/silences/preview``, `claimwatch alerts list` and `alerts silence --preview` do.
A filter or matcher it cannot read is said on the page (422), which keeps what was typed."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from fastapi import Query, Request
from fastapi.responses import Response
from pydantic import ValidationError

from services.alerts.lifecycle.kinds import STATES
from services.alerts.oncall.filters import LIST_LIMIT, STATE_FILTERS, AlertFilter
from services.alerts.oncall.rules import RULE_KINDS
from services.api.models import SilencePreviewBody, plain_errors
from services.api.serialise import as_json

FILTERS = ("state", "kind", "route", "team")


def filter_url(query: dict[str, str]) -> str:
    return "/alerts" + ("?" + urlencode(query) if query else "")


def state_links(given: dict[str, str]) -> list[dict]:
    """Any state, then each of STATE_FILTERS: a link that keeps the other filters, the one in force marked."""
    kept = {k: v for k, v in given.items() if k != "state"}
    return [
        {
            "label": state or "any state",
            "href": filter_url({**kept, **({"state": state} if state else {})}),
            "selected": given.get("state", "") == state,
        }
        for state in ("", *STATE_FILTERS)
    ]


def counts(views) -> dict[str, int]:
    """How many of ``views`` are in each state (firing, pending, resolved, in that order)."""
    found = dict.fromkeys(sorted(STATES, key=("firing", "pending", "resolved").index), 0)
    for v in views:
        found[v.state] += 1
    return found


def matcher_lines(text: str) -> list[str]:
    """The silence form's matchers, one a line, as static/app.js sends them to the API (a comma may be a regex's)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def preview_of(alerts, text: str, at) -> tuple[dict | None, str]:
    """The preview of the matchers in ``text`` (the API's SilencePreviewRead as JSON), or why there is none."""
    try:
        body = SilencePreviewBody(matchers=matcher_lines(text))
    except ValidationError as exc:
        return None, plain_errors(exc.errors())
    try:
        return alerts.preview(body.matchers, at).as_dict(), ""
    except ValueError as exc:
        return None, str(exc)


def handler(pages, embed: Callable[[str], str]) -> Callable[..., Response]:
    """The handler of ``/alerts`` over ``pages`` (services/api/pages.py Pages: its alerts, clock and page frame);
    ``embed`` fits a runbook's HTML into the page (pages.embeddable_runbook)."""

    def alerts_page(
        request: Request,
        state: str = Query("", max_length=16),
        kind: str = Query("", max_length=64),
        route: str = Query("", max_length=256),
        team: str = Query("", max_length=200),
        preview: str = Query("", max_length=8),
        matchers: str = Query("", max_length=11_000),
        duration: str = Query("2h", max_length=32),
        comment: str = Query("", max_length=2000),
    ) -> Response:
        if not pages.gate.signed_in(request):  # sign in before anything is looked up
            return pages._page(request, "alerts.html")
        alerts, at = pages.alerts, pages.now()
        given = {k: v.strip() for k, v in zip(FILTERS, (state, kind, route, team)) if v.strip()}
        kept = AlertFilter(**given)  # an unknown state or kind: a 422 naming the choices
        listed = alerts.list(at, kept.route, kept.state, explain=True, kind=kept.kind, team=kept.team)
        every = alerts.list(at) if given else listed
        runbooks = {
            v.alert.alert_id: embed(found)
            for v in listed  # input-health kinds have their own
            if (found := alerts.runbook(v.alert, "html")) is not None
        }
        shown, error = preview_of(alerts, matchers, at) if preview else (None, "")
        response = pages._page(
            request,
            "alerts.html",
            title="Alerts",
            alerts=as_json(listed),
            silences=as_json(alerts.silences(at)),
            runbooks=runbooks,
            filters={k: given.get(k, "") for k in FILTERS},
            filtered=kept.described() if given else "",
            state_links=state_links(given),
            kinds=RULE_KINDS,
            teams=sorted({v.team for v in every if v.team}),
            counts=counts(listed),
            every=len(every),
            bound=LIST_LIMIT,
            preview=shown,
            preview_error=error,
            silence_form={"matchers": matchers, "duration": duration, "comment": comment},
        )
        if error:
            response.status_code = 422
        return response

    return alerts_page
