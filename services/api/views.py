"""Plain helpers that shape service data for the dashboard templates (no I/O)."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

from services.core.numbers import pct
from services.rates.intervals import Counts
from services.store.convert import parse_ch_time


def interval_text(interval) -> str:
    if not interval:
        return "—"
    lo, hi = interval
    return f"{pct(lo)}–{pct(hi)}"


def when(value: str | datetime | None) -> str:
    """A timestamp as 'YYYY-MM-DD HH:MM UTC' (compact; sortable)."""
    if not value:
        return "—"
    ts = datetime.fromisoformat(value) if isinstance(value, str) else value
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def segment(value: str) -> str:
    """One URL path segment: every reserved character escaped, '/' included."""
    return quote(str(value), safe="")


def route_url(route: str) -> str:
    return "/routes/" + segment(route)


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


def route_trends(rows: list[dict], start: datetime, minutes: int, step: int) -> dict[str, list[float | None]]:
    """Per-route rate per ``step``-minute bucket over [start, start + minutes), from per-minute rows."""
    buckets = minutes // step
    sums: dict[str, list[Counts]] = defaultdict(lambda: [Counts.zero()] * buckets)
    for row in rows:
        index = int((parse_ch_time(row["minute"]) - start).total_seconds() // 60) // step
        if 0 <= index < buckets:
            sums[row["route"]][index] = sums[row["route"]][index] + Counts.from_row(row)
    return {route: [c.rate for c in counts] for route, counts in sums.items()}


def alert_badges(alerts: list[dict]) -> dict[str, dict[str, int]]:
    """Open alerts per route: {route: {"firing": n, "pending": n}}."""
    badges: dict[str, dict[str, int]] = defaultdict(lambda: {"firing": 0, "pending": 0})
    for a in alerts:
        if a["state"] in ("firing", "pending"):
            badges[a["route"]][a["state"]] += 1
    return dict(badges)


def trend_window(end: datetime | None, minutes: int) -> tuple[datetime, datetime] | None:
    if end is None:
        return None
    return end - timedelta(minutes=minutes - 1), end


def duration(seconds: float | None) -> str:
    """An age or a wait, coarse: '45 s', '12 min', '3 h 5 min'."""
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60} min"
