"""`claimwatch mcp`: claimwatch for assistants (Claude, Cursor, an IDE), over the Model Context Protocol.

Each tool is one request to the claimwatch API, sent with the caller's token: over stdio the user's own (as the CLI
finds it: $CLAIMWATCH_TOKEN, else the one `claimwatch up` stored for the API's URL), over HTTP the bearer token the
assistant's client sends. So the API's token rules hold as they are: a change needs a token that may change, and is
recorded under the token's holder. A tool returns the API's own object as structured content, with the lines the
CLI prints for it as text an assistant can quote, so every figure agrees with the API, the CLI and the pages.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ListResourcesResult, Resource, TextContent

from services.alerts.explain.figures import expected_text, figure
from services.app.cli.alerts import alert_columns, alert_text, top_issue
from services.app.cli.base import refusal
from services.app.cli.data import RATE_COLUMNS
from services.app.cli.evalset import COMPARE_COLUMNS, compare_fields
from services.app.cli.issues import issue_columns, issue_fields
from services.app.cli.silences import preview_summary
from services.app.cli.slos import SLO_COLUMNS, slo_fields
from services.app.cli.tables import labelled, render
from services.app.cli.traces import trace_columns
from services.app.credentials import find_token
from services.app.settings import Settings
from services.core.clock import utcnow
from services.core.numbers import interval_text, pct, thousands

WIDTH = 100  # the text an assistant quotes: the CLI's lines at this width
Caller = Callable[..., Any]


class ApiGateway:
    """The claimwatch API at ``url``, asked with a token: the given one, else ``default_token``."""

    TIMEOUT_SECONDS = 30

    def __init__(self, url: str, default_token: str | None, transport: httpx.AsyncBaseTransport | None = None):
        self.url, self.default_token, self.transport = url.rstrip("/"), default_token, transport

    async def call(
        self, method: str, path: str, token: str | None, params: dict | None = None, body: dict | None = None
    ) -> Any:
        return (await self.page(method, path, token, params, body))[0]

    async def page(
        self, method: str, path: str, token: str | None, params: dict | None = None, body: dict | None = None
    ) -> tuple[Any, int | None]:
        """The answer, and the total of a paged list (X-Total-Count) when the API gives one."""
        token = token or self.default_token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        params = {k: v for k, v in (params or {}).items() if v is not None}
        async with httpx.AsyncClient(transport=self.transport, timeout=self.TIMEOUT_SECONDS) as client:
            try:
                response = await client.request(method, self.url + path, params=params, json=body, headers=headers)
            except httpx.TransportError as exc:
                raise ToolError(
                    f"no claimwatch API answers at {self.url} ({exc}): start one with `claimwatch up`, or point "
                    "`claimwatch mcp` at it with --api-url"
                ) from None
        if response.status_code >= 400:
            raise ToolError(refusal(response, self.url + path))
        total = response.headers.get("x-total-count")
        data = (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else response.text
        )
        return data, int(total) if total is not None and total.isdigit() else None


def caller_token(ctx: Context) -> str | None:
    """The bearer token of the HTTP request this tool call came in (None over stdio)."""
    return bearer(ctx.request_context.request)


def bearer(request: Any) -> str | None:
    header = request.headers.get("authorization", "") if request is not None else ""
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def answer(data: Any, text: str) -> CallToolResult:
    """The API's object as structured content, and the lines to quote."""
    structured = data if isinstance(data, dict) else {"items": data}
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def alerts_text(alerts: list[dict], at: datetime) -> str:
    if not alerts:
        return "no alerts match"
    return "\n".join(render(alert_columns(at), alerts, WIDTH))


def silence_preview_text(found: dict, at: datetime) -> str:
    """The preview as `claimwatch alerts silence --preview` prints it: the alerts, then what they add up to."""
    table = render(alert_columns(at), found["alerts"], WIDTH) if found["alerts"] else []
    return "\n".join([*table, preview_summary(found)])


def issues_text(issues: list[dict], at: datetime) -> str:
    return "\n".join(render(issue_columns(at), issues, WIDTH)) if issues else "no issues match"


def route_text(route: dict) -> str:
    """A route's recent history in a few lines: its rate now against the expectation (as `claimwatch rates` says
    them), and its alerts in the range."""
    lines = [f"route {route['route']}"]
    if current := route.get("current"):
        lines.append(
            f"rate {pct(current['rate'])} ({interval_text(*(current['interval'] or (None, None)))}) over "
            f"{thousands(current['claims'])} claims in the last {current['window_minutes']} min; expected "
            f"{expected_text(current)}; delta {figure(current.get('delta'), change=True)}"
        )
    lines += [
        f"alert {a['alert_id']}: {a['state']} ({a['severity']}) since {a['start']}" for a in route.get("alerts", [])
    ]
    return "\n".join(lines)


class ClaimwatchServer(MCPServer):
    """An MCP server whose resource list names the runbook of each open alert, as the caller may read them now
    (the runbooks themselves are read through the ``claimwatch://alerts/{alert_id}/runbook`` template)."""

    def __init__(self, gateway: ApiGateway, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.gateway = gateway

    async def _handle_list_resources(self, ctx: Any, params: Any) -> ListResourcesResult:
        listed = await super()._handle_list_resources(ctx, params)
        open_alerts = await self.gateway.call("GET", "/api/alerts", bearer(ctx.request), {"state": "active"})
        runbooks = [
            Resource(
                uri=RUNBOOK_URI.format(alert_id=a["alert_id"]),
                name=f"runbook-{a['alert_id']}",
                title=f"Runbook: {a['route']} {a['kind']} ({a['state']})",
                description=f"What to do about {a['alert_id']}: the runbook of the issue behind most of its rise",
                mime_type="text/markdown",
            )
            for a in open_alerts
        ]
        return ListResourcesResult(resources=[*listed.resources, *runbooks])


RUNBOOK_URI = "claimwatch://alerts/{alert_id}/runbook"


def build_server(gateway: ApiGateway) -> MCPServer:
    """The MCP server: claimwatch's reads and changes as tools, and each open alert's runbook as a resource."""
    server = ClaimwatchServer(
        gateway,
        "claimwatch",
        log_level="WARNING",
        instructions=(
            "claimwatch monitors claim-level hallucination per route. Start with list_alerts(state='active'), "
            "then show_alert for the page's figures, suspects and issues, and runbook for what to do; search_traces "
            "finds the answers behind them, slo_status says what is promised and how much budget is left, eval_compare "
            "checks a fix against the eval set. Changes "
            "(ack_alert, silence, assign_issue, note_issue, propose_traces) need a token that may change."
        ),
    )

    async def get(ctx: Context, path: str, params: dict | None = None) -> Any:
        return await gateway.call("GET", path, caller_token(ctx), params)

    async def post(ctx: Context, path: str, body: dict) -> Any:
        return await gateway.call("POST", path, caller_token(ctx), None, body)

    @server.tool()
    async def list_alerts(
        ctx: Context,
        state: Literal["active", "pending", "firing", "resolved"] | None = None,
        route: str | None = None,
        kind: str | None = None,
        team: str | None = None,
    ) -> CallToolResult:
        """Alerts, firing then pending then resolved, newest first: state 'active' is pending or firing; kind e.g.
        hallucination_rate_rise, route_silent (the API names the choices); team: the owning team."""
        found = await get(ctx, "/api/alerts", {"state": state, "kind": kind, "team": team, "route": route})
        return answer(found, alerts_text(found, utcnow()))

    @server.tool()
    async def show_alert(ctx: Context, alert_id: str) -> CallToolResult:
        """One alert: its rate against what was expected, the rise split into mix and rate, suspect version
        changes, the issues that account for it with their shares, its transitions and runbook link."""
        alert = await get(ctx, f"/api/alerts/{alert_id}")
        return answer(alert, "\n".join(alert_text(alert, utcnow(), WIDTH)))

    @server.tool()
    async def list_issues(
        ctx: Context, route: str | None = None, state: str | None = None, limit: int = 20
    ) -> CallToolResult:
        """Named issues (clusters of failing claims) in priority order; state e.g. new, ongoing, regressed."""
        found = await get(ctx, "/api/issues", {"route": route, "state": state, "limit": limit})
        return answer(found, issues_text(found, utcnow()))

    @server.tool()
    async def show_issue(ctx: Context, issue_id: str) -> CallToolResult:
        """One issue: its title, verdicts, routes, versions, trend, representative traces and triage."""
        issue = await get(ctx, f"/api/issues/{issue_id}")
        return answer(issue, "\n".join(labelled(issue_fields(issue, utcnow()), WIDTH)))

    @server.tool()
    async def runbook(ctx: Context, alert_id: str | None = None, issue_id: str | None = None) -> CallToolResult:
        """The runbook (Markdown): an issue's, or an alert's (its own for input-health alerts, else the runbook of
        the issue that accounts for most of its rise)."""
        text = await runbook_text(ctx, alert_id, issue_id)
        return answer({"runbook": text, "alert_id": alert_id, "issue_id": issue_id}, text)

    async def runbook_text(ctx: Context, alert_id: str | None, issue_id: str | None) -> str:
        if (alert_id is None) == (issue_id is None):
            raise ToolError("give alert_id or issue_id (one of them)")
        if alert_id is not None:
            alert = await get(ctx, f"/api/alerts/{alert_id}")
            if alert.get("runbook"):
                return str(alert["runbook"])
            top = top_issue(alert)
            if top is None:
                raise ToolError(
                    f"alert {alert_id} has no issue to take a runbook from yet (its claims are unclustered)"
                )
            issue_id, params = top, {"alert": alert_id}
        else:
            params = {}
        found = await get(ctx, f"/api/issues/{issue_id}/runbook", params)
        return str(found["runbook"] if isinstance(found, dict) else found)

    @server.tool()
    async def rates(ctx: Context, route: str | None = None, window: str = "30m") -> CallToolResult:
        """Claim-level hallucination rates per route over a window (e.g. 30m, 6h), worst first, each with its
        interval and what the drift detector expects."""
        found = await get(ctx, "/api/rates", {"route": route, "window": window})
        return answer(found, "\n".join(render(RATE_COLUMNS, found, WIDTH)) if found else "no rates in this window")

    @server.tool()
    async def explain_route(ctx: Context, route: str, window: str = "6h") -> CallToolResult:
        """A route's recent history: its rate against the expectation and its alerts."""
        found = await get(ctx, f"/api/routes/{route}", {"window": window})
        return answer(found, route_text(found))

    @server.tool()
    async def search_traces(
        ctx: Context,
        text: str | None = None,
        route: str | None = None,
        verdict: list[str] | None = None,
        version: list[str] | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> CallToolResult:
        """Traces with a claim matching every filter, newest first: text (claim text contains, without case), route,
        verdict (any of; 'failed' is any failed verdict), version (key=value, e.g. model=gen-2026-11), since and
        until (6h or RFC 3339; default the last 24 hours, at most 31 days), limit (at most 100) and offset."""
        params = {"text": text, "route": route, "verdict": verdict or None, "version": version or None}
        found, total = await gateway.page(
            "GET",
            "/api/traces",
            caller_token(ctx),
            {**params, "since": since, "until": until, "limit": limit, "offset": offset},
        )
        if not found:
            return answer({"items": [], "total": total}, "no traces match")
        shown = f"traces {offset + 1} to {offset + len(found)} of {thousands(total or len(found))}"
        table = "\n".join(render(trace_columns(utcnow()), found, WIDTH))
        return answer({"items": found, "total": total}, f"{table}\n{shown}")

    @server.tool()
    async def slo_status(ctx: Context, name: str | None = None) -> CallToolResult:
        """SLOs on hallucinated claims: each one's error budget left and burn rates (1x spends the budget exactly
        over its window) and its open burn alerts; with a name, that SLO in full, with the issues spending its
        budget."""
        if name is None:
            found = await get(ctx, "/api/slos")
            text = "\n".join(render(SLO_COLUMNS, found, WIDTH)) if found else "no SLOs are set ([[slo]] in the config)"
            return answer(found, text)
        one = await get(ctx, f"/api/slos/{quote(name, safe='')}")
        return answer(one, "\n".join(labelled(slo_fields(one), WIDTH)))

    @server.tool()
    async def eval_compare(ctx: Context, baseline: str, candidate: str = "") -> CallToolResult:
        """Two eval runs on the approved items both answered: each metric's change (faithfulness first) with a
        paired 95% interval, then faithfulness by slice, the candidate's largest loss first. baseline and
        candidate: a run id, or versions as key=value[,key=value] (e.g. model=gen-2026-10); candidate defaults
        to the newest run."""
        found = await get(ctx, "/api/eval/compare", {"baseline": baseline, "candidate": candidate})
        table = render(COMPARE_COLUMNS, found["metrics"] + found["slices"], WIDTH)
        return answer(found, "\n".join([*labelled(compare_fields(found), WIDTH), "", *table]))

    @server.tool()
    async def ack_alert(ctx: Context, alert_id: str, note: str = "") -> CallToolResult:
        """Acknowledge an alert (needs a token that may change; recorded under the token's holder)."""
        acked = await post(ctx, f"/api/alerts/{alert_id}/ack", {"note": note})
        return answer(acked, f"acked {acked['alert_id']} ({acked['route']}, {acked['state']}) by {acked['acked_by']}")

    @server.tool()
    async def silence(
        ctx: Context, matchers: list[str], duration: str = "", comment: str = "", preview: bool = False
    ) -> CallToolResult:
        """Silence alerts whose labels match (e.g. route=billing-faq, severity=~warn.*) for a duration (e.g. 2h),
        saying why; with preview=True, only list the alerts it would silence (a read: nothing is created)."""
        if preview:
            found = await post(ctx, "/api/silences/preview", {"matchers": matchers})
            return answer(found, silence_preview_text(found, utcnow()))
        if not duration or not comment:
            raise ToolError("give duration (e.g. 2h) and comment (why), or preview=True to only see what it matches")
        made = await post(ctx, "/api/silences", {"matchers": matchers, "duration": duration, "comment": comment})
        return answer(made, f"silence {made['silence_id']} until {made['ends_at']}: {', '.join(made['matchers'])}")

    @server.tool()
    async def assign_issue(ctx: Context, issue_id: str, assignee: str) -> CallToolResult:
        """Assign an issue to the person who works it."""
        issue = await post(ctx, f"/api/issues/{issue_id}/assign", {"assignee": assignee})
        return answer(issue, f"{issue.get('issue_id', issue_id)} assigned to {assignee}")

    @server.tool()
    async def note_issue(ctx: Context, issue_id: str, text: str) -> CallToolResult:
        """Add a note to an issue's activity."""
        noted = await post(ctx, f"/api/issues/{issue_id}/notes", {"text": text})
        return answer(noted, f"noted on {issue_id}")

    @server.tool()
    async def propose_traces(ctx: Context, issue_id: str, trace_ids: list[str] | None = None) -> CallToolResult:
        """Propose an issue's representative traces (or the given ones) for the eval set; a second person signs
        them off."""
        proposed = await post(ctx, "/api/promotions", {"issue_id": issue_id, "trace_ids": trace_ids})
        ids = ", ".join(p.get("item_id", "?") for p in proposed) or "nothing new"
        return answer(proposed, f"proposed for the eval set: {ids}")

    @server.resource(RUNBOOK_URI, mime_type="text/markdown")
    async def alert_runbook(alert_id: str, ctx: Context) -> str:
        """The runbook of an alert's top issue (or the alert's own, for input-health alerts)."""
        return await runbook_text(ctx, alert_id, None)

    return server


def gateway_for(settings: Settings, user_token: bool) -> ApiGateway:
    """The API at ``settings.api.url``; with ``user_token`` (stdio: the assistant runs as this user) the user's
    token for calls that bring none. Over HTTP a call without a token goes without one: the server must not lend
    its user's token to whoever reaches its port."""
    found = find_token(settings.api.url) if user_token else None
    return ApiGateway(settings.api.url, found[0] if found else None)
