"""Plain helpers that shape service data for the dashboard templates (no I/O)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from urllib.parse import quote, urlencode

from services.alerts.lifecycle.kinds import FLEET_ROUTE
from services.core.numbers import MISSING, interval_text, utc_minute
from services.rates.report import ranking_entries
from services.rates.window import parse_window


def interval_pair(interval) -> str:
    """An interval given as [lo, hi] (or none)."""
    return interval_text(*interval) if interval else MISSING


def segment(value: str) -> str:
    """One URL path segment: every reserved character escaped, '/' included."""
    return quote(str(value), safe="")


def route_url(route: str) -> str:
    """The route's page; the overview for an alert on every route at once."""
    return "/" if route == FLEET_ROUTE else "/routes/" + segment(route)


def issue_url(issue_id: str) -> str:
    return "/issues/" + segment(issue_id)


def trace_url(trace_id: str) -> str:
    return "/traces/" + segment(trace_id)


def sparkline(values: list[float | None], width: int = 100, height: int = 20) -> str:
    """SVG polyline points for a small trend; buckets without data (None) are left out, not drawn as 0."""
    if not values:
        return ""
    top = max((v for v in values if v is not None), default=0.0) or 1.0
    step = width / max(1, len(values) - 1)
    points = []
    for i, v in enumerate(values):
        if v is None:
            continue
        y = height - 1 - (height - 2) * (v / top)
        points.append(f"{i * step:.1f},{y:.1f}")
    return " ".join(points)


def route_trends(rows: list[dict], buckets: int) -> dict[str, list[float | None]]:
    """Per route, its rate in each of ``buckets`` buckets, from per-(route, bucket) sums (RateRepository.route_buckets
    with RANKING_SUMS); None where a bucket has no claims."""
    trends: dict[str, list[float | None]] = defaultdict(lambda: [None] * buckets)
    for row, entry in zip(rows, ranking_entries(rows)):
        if 0 <= row["bucket"] < buckets:
            trends[row["route"]][row["bucket"]] = entry["rate"]
    return dict(trends)


def alert_badges(alerts: list[dict]) -> dict[str, dict[str, int]]:
    """Open alerts per route: {route: {"firing": n, "pending": n, "inhibited": n}}. A firing alert another alert
    inhibits (inhibited_by) is not notified: it counts as inhibited, not firing."""
    badges: dict[str, dict[str, int]] = defaultdict(lambda: {"firing": 0, "pending": 0, "inhibited": 0})
    for a in alerts:
        if a["state"] in ("firing", "pending"):
            badges[a["route"]]["inhibited" if a.get("inhibited_by") else a["state"]] += 1
    return dict(badges)


def trend_window(end: datetime | None, minutes: int) -> tuple[datetime, datetime] | None:
    if end is None:
        return None
    return end - timedelta(minutes=minutes - 1), end


CHART_RANGES = ("1h", "6h", "24h", "7d")  # every time chart's range selector


def range_links(base: str, query: Mapping[str, str], current: str, key: str = "window") -> list[dict]:
    """A chart's range selector: a link per CHART_RANGES (and the range shown, when the URL gave another) that keeps
    the page's other ``query`` parameters, shortest first, the one shown marked ``selected``."""
    kept = {k: v for k, v in query.items() if k != key}
    shown = sorted({*CHART_RANGES, current}, key=lambda r: parse_window(r) or timedelta.max)
    return [{"label": r, "href": f"{base}?{urlencode({**kept, key: r})}", "selected": r == current} for r in shown]


def pager(page, query: Mapping[str, str | list[str]], rows: Sequence | None = None) -> dict:
    """Where a page of a list lies (the route list's RoutePage, services/api/routeview.py; the traces' TracePage
    with its ``rows``), and links to its neighbours that keep the list's ``query`` (empty values left out)."""
    rows = page.routes if rows is None else rows

    def link(offset: int) -> str:
        kept = {k: v for k, v in query.items() if v}
        return "?" + urlencode({**kept, **({"offset": offset} if offset else {})}, doseq=True)

    previous = max(0, page.offset - page.limit) if page.offset else None
    return {
        "first": page.offset + 1 if rows else 0,
        "last": page.offset + len(rows),
        "total": page.total,
        "after": page.after,
        "next": link(page.next_offset) if page.next_offset is not None else None,
        "prev": link(previous) if previous is not None else None,
        "start": link(0),
    }


def duration(seconds: float | None) -> str:
    """An age or a wait, coarse: '45 s', '12 min', '3 h 5 min'."""
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60} min"


def ingest_status(health, metrics, monotonic_now: float, now: datetime) -> list[dict]:
    """This process's side of ingest as the ops page shows it: store writes, the broker, the route bound and the
    evaluator, each with a ``state`` (ok, failing, off: not this process's) and a ``detail``."""
    sample = metrics.registry.get_sample_value
    rows = []
    if not health.writes:
        rows.append(
            {
                "part": "store writes",
                "state": "off",
                "detail": "this process writes no events (the worker's ops page and /readyz say how its writes go)",
            }
        )
    elif health.store_ok:
        rows.append({"part": "store writes", "state": "ok", "detail": "the last batch was stored and checked"})
    else:
        since = health.failing_since
        rows.append(
            {
                "part": "store writes",
                "state": "failing",
                "detail": (
                    f"{health.consecutive_failures:,} failed writes in a row"
                    + (f" since {utc_minute(since)}" if since else "")
                    + f"; retried with backoff, offsets not committed: {health.store_error}"
                ),
            }
        )
    broker = health.broker
    silent = broker.unreachable(monotonic_now) if broker is not None else None
    rows.append(
        {
            "part": "broker",
            "state": "off" if broker is None else "failing" if silent else "ok",
            "detail": "this process consumes nothing"
            if broker is None
            else f"unreachable: {silent}"
            if silent
            else "answers",
        }
    )
    active, limit = sample("claimwatch_active_routes"), sample("claimwatch_active_routes_limit")
    refused = sample("claimwatch_dlq_total", {"reason": "route.limit"}) or 0
    if health.writes and active is not None and limit:
        rows.append(
            {
                "part": "routes",
                "state": "failing" if refused or active >= 0.9 * limit else "ok",
                "detail": (
                    f"{active:,.0f} of {limit:,.0f} active (routes.max_active)"
                    + (
                        f"; {refused:,.0f} events of further new routes dead-lettered (rule route.limit)"
                        if refused
                        else ""
                    )
                ),
            }
        )
    lag = sample("claimwatch_evaluator_lag_seconds")
    rows.append(
        {
            "part": "alert evaluation",
            "state": "off" if not lag else "failing" if lag > 300 else "ok",
            "detail": "not evaluated in this process yet (the leader evaluates)"
            if not lag
            else f"evaluated up to {duration(lag)} ago",
        }
    )
    return rows
