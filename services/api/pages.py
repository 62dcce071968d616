"""The web dashboard: server-rendered pages (Jinja2, autoescaped), static JS only, Plotly served locally.

Pages read the same services as the API. Everything that changes state goes through
the JSON API from static/app.js with the bearer token the user typed into the token
field (kept in sessionStorage), so the API's auth and rate limits apply unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from services.alerts.detection.expectations import PRIORITY, SORTS
from services.alerts.explain.figures import (
    REFUSED_REMEDY,
    counted,
    dlq_command,
    expected_text,
    figure,
    hallucination_sentence,
    other_sources,
    refused_sentence,
    served_sentence,
)
from services.alerts.lifecycle.kinds import MONITOR_KINDS
from services.alerts.notify.receivers import FAILING_ALARM
from services.alerts.oncall.slos import budget_text, spent_text
from services.api import alertlist, alertpage, evalpage, tracelist, views
from services.api.assets import Assets, asked_version, cache_control
from services.api.auth import READ_COOKIE, same_origin
from services.api.ingestlag import LagWatch
from services.api.plotly_assets import BASE_STYLE_ID, PlotlyAssets
from services.api.routeview import ROUTES_PER_PAGE, RouteHistory, RouteReport
from services.api.security import Gate
from services.api.serialise import as_json
from services.core.errors import NotFound
from services.core.names import visible_controls
from services.core.numbers import pct, plural, pts, thousands, utc_minute
from services.core.readmodel import exactly
from services.evalset.readmodel import AgreementRead
from services.issues.activity import ActivityPage
from services.issues.readmodel import IssueDetailRead, IssueRead
from services.issues.traces import MAX_CLAIMS_PAGE
from services.rates.readmodel import RouteDetailRead, RouteRateRead
from services.rates.report import RANKING_SUMS
from services.rates.window import WindowError, parse_window

HERE = Path(__file__).resolve().parent
PLOTLY = PlotlyAssets()
ASSETS = Assets(HERE / "static", {"plotly.min.js": PLOTLY.bundle})  # the plotly package's own bundle: no CDN
API_PREFIXES = ("/api/", "/v1/", "/metrics", "/healthz", "/readyz", "/openapi.json", "/static/")
WINDOWS = ("5m", "30m", "90m", "6h", "24h", "7d", "all")
TREND_MINUTES, TREND_STEP = 360, 15
ISSUE_SORTS = ("priority", "last_seen", "first_seen", "count", "name")
ISSUE_STATES = ("new", "ongoing", "regressed", "resolved", "archived")


REVIEW_WINDOW = "24h"  # the review page's calibrated rates: the day the leader samples from by default


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        plotly_base_id=BASE_STYLE_ID,
        plotly_style_ids=lambda: PLOTLY.injected_style_ids,
        static_url=ASSETS.url,
        ingest_lag=None,
    )  # pages pass the figure; error pages have none
    env.filters.update(
        pct=pct,
        plural=plural,
        thousands=thousands,
        shown=visible_controls,
        interval=views.interval_pair,
        when=utc_minute,
        route_url=views.route_url,
        issue_url=views.issue_url,
        trace_url=views.trace_url,
        spark=views.sparkline,
        segment=views.segment,
        duration=views.duration,
        pts=pts,
        figure=figure,
        counted=counted,
        expected=expected_text,
        budget=budget_text,
        spent=lambda s: spent_text(s["budget_spent"], s["budget_spent_interval"]),
    )
    env.globals.update(
        served_sentence=served_sentence,
        hallucination_sentence=hallucination_sentence,
        dlq_command=dlq_command,
        input_kinds=MONITOR_KINDS,
        refused_sentence=refused_sentence,
        other_sources=other_sources,
        refused_remedy=REFUSED_REMEDY,
    )
    return env


ENV = environment()


_ALIGN_STYLE = re.compile(r' style="text-align:(left|right|center)"')
_HEADING = re.compile(r"<(/?)h([1-4])>")


def embeddable_runbook(html: str) -> str:
    """Fit runbook HTML into the issue page: headings below the page's own h1/h2, and table
    alignment as classes (markdown-it writes style attributes, which the CSP blocks)."""
    html = _HEADING.sub(lambda m: f"<{m[1]}h{int(m[2]) + 2}>", html)
    return _ALIGN_STYLE.sub(r' class="align-\1"', html)


def render(name: str, status: int = 200, **context) -> HTMLResponse:
    return HTMLResponse(ENV.get_template(name).render(**context), status_code=status)


def wants_page(request: Request) -> bool:
    return not request.url.path.startswith(API_PREFIXES)


def error_page(status: int, message: str, headers: Mapping[str, str] | None = None) -> HTMLResponse:
    response = render(
        "error.html",
        status,
        page="error",
        title=f"{status} {HTTPStatus(status).phrase}",
        message=message,
        signed_in=True,
        tokens_configured=True,
    )
    response.headers.update(headers or {})
    return response


def mount_static(api: FastAPI) -> None:
    @api.get("/static/plotly-base.css", include_in_schema=False)
    def plotly_css(request: Request) -> Response:
        # Derived from the bundle, so versioned by it.
        cache = cache_control(asked_version(request.scope), ASSETS.version("plotly.min.js"))
        return Response(PLOTLY.base_css, media_type="text/css", headers={"Cache-Control": cache})

    api.mount("/static", ASSETS, name="static")


class Pages:
    """The dashboard's pages, one handler each, over the services they read."""

    def __init__(
        self,
        gate: Gate,
        now: Callable,
        *,
        rates,
        report: RouteReport,
        alerts,
        review,
        traces,
        detector,
        issues=None,
        evalset=None,
        receivers: Callable[[datetime], list[dict]] = lambda now: [],
        ingest: Callable[[], list[dict]] = list,
        budgets: Callable[[list[str]], dict[str, dict]] = lambda routes: {},
    ):
        """``report``: the routes' rates a page at a time (services/api/routeview.py RouteReport);
        ``detector``: the drift detector's configuration in force (the route page's expectation); ``receivers``:
        now -> each notification receiver's state (services/alerts/notify/receivers.py: receiver_status); ``ingest``:
        this process's side of ingest (views.ingest_status)."""
        self.gate, self.now, self.rates, self.report = gate, now, rates, report
        self.alerts, self.review, self.traces, self.detector = alerts, review, traces, detector
        self.issues, self.evalset, self.receivers, self.ingest = issues, evalset, receivers, ingest
        self.budgets = budgets  # routes -> the covering SLO with least budget left (services/api/slopage.py)
        self.history = RouteHistory(rates)

    def _page(self, request: Request, name: str, **context) -> Response:
        if not self.gate.signed_in(request):
            return _signin_redirect(request)
        return render(
            name,
            page=name.removesuffix(".html"),
            signed_in=True,
            ingest_lag=request.state.ingest_lag,
            protect_reads=self.gate.policy.protect_reads,
            tokens_configured=self.gate.tokens.configured,
            **context,
        )

    def overview(
        self,
        request: Request,
        window: str = Query("30m", max_length=16),
        sort: str = Query("priority", max_length=16),
        route: str = Query("", max_length=256),
        offset: int = Query(0, ge=0, le=10_000_000),
    ) -> Response:
        window = _window_or_default(window, "30m")
        sort = sort if sort in SORTS else "priority"
        page = self.report.page(parse_window(window), self.now(), sort, offset=offset, matching=route or None)
        shown = [r["route"] for r in page.routes]
        open_alerts = as_json(self.alerts.list(self.now()))
        trends: dict = {}
        span = views.trend_window(self.rates.window_end(), TREND_MINUTES)
        if span and shown:
            rows = self.rates.route_buckets(shown, *span, TREND_STEP, RANKING_SUMS)
            trends = views.route_trends(rows, TREND_MINUTES // TREND_STEP)
        found = self.review.calibrated(parse_window(window), self.now(), shown) if shown else {}
        calibrated = {r: c.as_dict() for r, c in found.items()}
        return self._page(
            request,
            "overview.html",
            title="Overview",
            routes=exactly(list[RouteRateRead], page.routes),
            window=window,
            windows=WINDOWS,
            sort=sort,
            sorts=SORTS,
            priority=PRIORITY,
            route_filter=route,
            pager=views.pager(page, {"window": window, "sort": sort, "route": route}),
            trends=trends,
            route_badges=views.alert_badges(open_alerts),
            trend_hours=TREND_MINUTES // 60,
            calibrated_rates=calibrated,
            budgets=self.budgets(shown) if shown else {},
        )

    def route_page(self, request: Request, route: str, window: str = Query("6h", max_length=16)) -> Response:
        window = _window_or_default(window, "6h") if window != "all" else "6h"
        alerts = self.alerts
        route_alerts = as_json(alerts.list(self.now(), route, explain=True))  # each with the issues behind it
        span = parse_window(window)
        assert span is not None, "'all' was replaced by 6h above"
        detail = self.history.detail(
            route,
            span,
            None,
            route_alerts,
            None,
            self.detector,
            lambda entries: alerts.compare_rates(entries, self.now()),
        )
        if detail is None:
            raise NotFound(f"no events stored for route {route!r}")
        found = self.review.calibrated(span, self.now(), [route]).get(route)
        return self._page(
            request,
            "route.html",
            title=f"Route {route}",
            route=route,
            detail=exactly(RouteDetailRead, detail),
            window=window,
            ranges=views.range_links(views.route_url(route), request.query_params, window),
            alerts=route_alerts,
            calibrated_rate=found.as_dict() if found else None,
        )

    def ops_page(self, request: Request) -> Response:
        return self._page(
            request,
            "ops.html",
            title="Operations",
            receivers=self.receivers(self.now()),
            ingest=self.ingest(),
            alarm_minutes=int(FAILING_ALARM.total_seconds() // 60),
        )

    def rules_page(self, request: Request) -> Response:
        return self._page(request, "rules.html", title="Alert rules", rules=as_json(self.alerts.rules()))

    def alert_page(self, request: Request, alert_id: str) -> Response:
        """One alert whole (where notifications link): its timeline, its rate around it, suspects, the issues
        behind it with their shares, the runbook, and ack and silence."""
        if not self.gate.signed_in(request):
            return _signin_redirect(request)
        at = self.now()
        alert = as_json(self.alerts.show(alert_id, at))  # NotFound for an unknown id
        runbook = self.alerts.runbook(self.alerts.get(alert_id), "html")  # input-health kinds have their own
        top = next((i["issue_id"] for i in (alert.get("explanation") or {}).get("issues") or []), None)
        if runbook is None and top is not None and self.issues is not None:
            runbook = self.issues.runbook(top, "html", alert_id)
        window, end = alertpage.chart_range(alert, at)
        return self._page(
            request,
            "alert.html",
            title=f"Alert {alert_id}",
            a=alert,
            timeline=alertpage.timeline(alert, as_json(self.alerts.silences(at))),
            chart={"window": window, "end": end.isoformat()},
            runbook=None if runbook is None else embeddable_runbook(runbook),
            runbook_issue=top,
        )

    def issues_page(
        self,
        request: Request,
        state: str | None = Query(None, max_length=32),
        route: str | None = Query(None, max_length=256),
        q: str | None = Query(None, max_length=200),
        sort: str = Query("priority", max_length=32),
        owner: str | None = Query(None, max_length=200),
        assignee: str | None = Query(None, max_length=200),
    ) -> Response:
        sort = sort if sort in ISSUE_SORTS else "priority"
        state = state if state in ISSUE_STATES else None
        filters = {"state": state, "route": route, "q": q, "owner": owner, "assignee": assignee}
        found = (
            []
            if self.issues is None
            else self.issues.list(**{k: v or None for k, v in filters.items()}, sort=sort, limit=200)
        )
        return self._page(
            request,
            "issues.html",
            title="Issues",
            issues=exactly(list[IssueRead], found),
            available=self.issues is not None,
            filters={**{k: v or "" for k, v in filters.items()}, "sort": sort},
        )

    def issue_page(
        self,
        request: Request,
        issue_id: str,
        alert: str | None = Query(None, max_length=200),
        activity_offset: int = Query(0, ge=0, le=10_000_000),
    ) -> Response:
        """``alert``: the alert page the reader came from (its window gives the representative traces);
        ``activity_offset``: the page of its activity shown (newest first)."""
        if self.issues is None:
            raise NotFound("issues are not available in this build yet")
        shown, runbook = self.issues.page(issue_id, alert, ActivityPage(activity_offset))
        issue = exactly(IssueDetailRead, shown)
        return self._page(
            request,
            "issue.html",
            title=issue["name"],
            issue=issue,
            runbook=embeddable_runbook(runbook),
            can_promote=self.evalset is not None,
        )

    def trace_page(
        self, request: Request, trace_id: str, claims_page: int = Query(1, ge=1, le=MAX_CLAIMS_PAGE)
    ) -> Response:
        if not self.gate.signed_in(request):  # sign in before anything is looked up
            return self._page(request, "trace.html")
        trace = self.traces.get(trace_id, claims_page)
        return self._page(request, "trace.html", title=f"Trace {trace_id}", trace=trace)

    def eval_page(
        self, request: Request, baseline: str = Query("", max_length=500), candidate: str = Query("", max_length=500)
    ) -> Response:
        if self.evalset is None:
            return self._page(
                request, "eval.html", title="Eval set", available=False, items=[], queue=[], report={}, agreement={}
            )
        items = as_json(self.evalset.items())
        return self._page(
            request,
            "eval.html",
            title="Eval set",
            available=True,
            items=items,
            queue=[i for i in items if i.get("state") == "proposed"],
            report=as_json(self.evalset.report()),
            agreement=AgreementRead.of(self.evalset.agreement()).as_dict(),
            **evalpage.comparison(self.evalset, baseline, candidate),
        )

    def review_page(self, request: Request) -> Response:
        """Its route tables show the first ROUTES_PER_PAGE routes each: those with labels of their own, then by
        name; the plan most needed first (`claimwatch review plan` lists every route)."""
        review = self.review
        calibrated = review.calibrated(parse_window(REVIEW_WINDOW), self.now())
        labelled_first = sorted(calibrated.items(), key=lambda rc: (not rc[1].own_labels, rc[0]))
        return self._page(
            request,
            "review.html",
            title="Review",
            guide_version=review.queue.guide_version,
            progress=as_json(review.progress()),
            agreement=as_json(review.agreement()),
            calibrated_rates=[c.as_dict() | {"route": r, "raw": c.raw} for r, c in labelled_first[:ROUTES_PER_PAGE]],
            calibrated_window=REVIEW_WINDOW,
            routes_in_window=len(calibrated),
            plan=as_json(review.planner.plan_all(calibrated.values(), review.plan_width)[:ROUTES_PER_PAGE]),
            plan_width=review.plan_width,
        )

    # Reads protected by token: a browser signs in once and gets a read-only session, never the token.
    def _signin_form(self, next: str, status: int = 200, error: str = "") -> Response:
        response = render(
            "signin.html",
            status,
            page="signin",
            title="Sign in",
            next=_local(next),
            signed_in=False,
            protect_reads=self.gate.policy.protect_reads,
            tokens_configured=self.gate.tokens.configured,
            error=error,
        )
        # The form's post must carry its Origin, which the site-wide no-referrer policy would blank to "null".
        response.headers["Referrer-Policy"] = "same-origin"
        return response

    def signin_page(self, request: Request, next: str = Query("/", max_length=500)) -> Response:
        return self._signin_form(next)

    def signin(
        self, request: Request, token: str = Form(max_length=500), next: str = Form("/", max_length=500)
    ) -> Response:
        gate = self.gate
        if not same_origin(request.headers.get("host"), request.headers.get("origin"), request.headers.get("referer")):
            return self._signin_form(next, 403, "Sign in from this site's own sign-in page.")
        wait = gate.signin_wait(request)
        if wait > 0:
            return self._signin_form(next, 429, "Too many sign-in attempts from your address; wait a minute.")
        refusal = gate.tokens.refusal(token)
        if refusal is not None:
            return self._signin_form(next, refusal.status, refusal.detail)
        response = RedirectResponse(_local(next), status_code=303)
        response.set_cookie(
            READ_COOKIE,
            gate.sessions.issue(token),
            max_age=gate.sessions.max_age_seconds,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response


def router(pages: Pages, ingest_lag: LagWatch | None = None, slos: tuple[Callable, ...] = ()) -> APIRouter:
    async def read_ingest_lag(request: Request) -> None:
        # Async, so the broker is read on the event loop (the pages themselves run in threads).
        request.state.ingest_lag = await ingest_lag.current() if ingest_lag else None

    r = APIRouter(include_in_schema=False, dependencies=[Depends(read_ingest_lag)])
    gets: tuple[tuple[str, Callable[..., Any]], ...] = (
        ("/", pages.overview),
        ("/routes/{route:path}", pages.route_page),
        ("/alerts", alertlist.handler(pages, embeddable_runbook)),  # filters and a silence's preview
        ("/alerts/rules", pages.rules_page),
        ("/alerts/{alert_id}", pages.alert_page),  # rules before {alert_id}
        ("/issues", pages.issues_page),
        ("/issues/{issue_id}", pages.issue_page),
        ("/traces", tracelist.handler(pages)),  # the list, before one trace
        ("/traces/{trace_id:path}", pages.trace_page),
        ("/eval", pages.eval_page),
        *zip(("/slos", "/slos/{name}"), slos),
        ("/review", pages.review_page),
        ("/ops", pages.ops_page),
        ("/signin", pages.signin_page),
    )
    for path, handler in gets:
        r.add_api_route(path, handler, methods=["GET"], response_class=HTMLResponse)
    r.add_api_route("/signin", pages.signin, methods=["POST"], response_class=HTMLResponse)
    return r


def _window_or_default(text: str, default: str) -> str:
    try:
        parse_window(text)
    except WindowError:
        return default
    return text


def _signin_redirect(request: Request) -> Response:
    return RedirectResponse(f"/signin?next={quote(request.url.path)}", status_code=303)


def _local(target: str) -> str:
    """Only redirect within this site."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"
