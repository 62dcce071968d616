"""Windowed sums over the per-minute buckets. Never scans raw claims.

Windows end at the newest event time stored (the event-time watermark), so a
replayed or accelerated stream reads the same as a live one.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from services.store.backends import Store

SUM_COLUMNS = (
    "events", "claims", "failed", "claims_sq", "failed_sq", "failed_claims",
    "supported", "unsupported", "contradicted", "overreach", "stale", "no_source", "trivial",
    "served", "served_unsafe", "abstained", "answerable", "answerable_abstained", "unanswerable", "unanswerable_abstained",
)
_SUMS = ", ".join(f"sum({c}) AS {c}" for c in SUM_COLUMNS)
_WINDOW_RE = re.compile(r"(\d+)\s*([smhd])")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class WindowError(ValueError):
    pass


def parse_window(text: str) -> timedelta | None:
    """'30m', '90m', '24h', '7d' or 'all' (None: everything stored)."""
    text = text.strip().lower()
    if text == "all":
        return None
    match = _WINDOW_RE.fullmatch(text)
    if not match or int(match[1]) == 0:
        raise WindowError(f"window {text!r}: use a positive number followed by s, m, h or d (e.g. 30m), or 'all'")
    return timedelta(**{_UNIT[match[2]]: int(match[1])})


def _ch(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


class RateQueries:
    def __init__(self, store: Store):
        self.store = store

    def latest_minute(self) -> datetime | None:
        rows = self.store.query("SELECT max(minute) AS m, count() AS n FROM rate_minute WHERE dim = ''")
        if not rows or not rows[0]["n"]:
            return None
        return datetime.fromisoformat(rows[0]["m"]).replace(tzinfo=timezone.utc)

    def window_bounds(self, window: timedelta | None, end: datetime | None = None) -> tuple[datetime | None, datetime | None]:
        """(start, end) as minute buckets, both inclusive; start None means unbounded."""
        end = end or self.latest_minute()
        if end is None or window is None:
            return None, end
        return end - window + timedelta(minutes=1), end

    def totals(self, dim: str = "", window: timedelta | None = None, end: datetime | None = None,
               route: str | None = None) -> list[dict]:
        """One row per (value, route) for a slice dimension ('' = whole route)."""
        start, end = self.window_bounds(window, end)
        where, params = ["dim = {dim:String}"], {"dim": dim}
        if start is not None:
            where.append("minute >= {start:DateTime}")
            params["start"] = _ch(start)
        if end is not None and window is not None:
            where.append("minute <= {end:DateTime}")
            params["end"] = _ch(end)
        if route is not None:
            where.append("route = {route:String}")
            params["route"] = route
        sql = f"SELECT value, route, {_SUMS} FROM rate_minute WHERE {' AND '.join(where)} GROUP BY value, route"
        return self.store.query(sql, params)

    def dims(self) -> list[str]:
        return [r["dim"] for r in self.store.query("SELECT DISTINCT dim FROM rate_minute WHERE dim != '' ORDER BY dim")]

    def minutes(self, route: str, start: datetime, end: datetime, dim: str = "", value: str = "") -> list[dict]:
        """Per-minute sums for one route (and slice), oldest first."""
        sql = (f"SELECT minute, {_SUMS} FROM rate_minute WHERE dim = {{dim:String}} AND value = {{value:String}} "
               "AND route = {route:String} AND minute >= {start:DateTime} AND minute <= {end:DateTime} "
               "GROUP BY minute ORDER BY minute")
        return self.store.query(sql, {"dim": dim, "value": value, "route": route, "start": _ch(start), "end": _ch(end)})

    def minutes_all_routes(self, start: datetime, end: datetime, dim: str = "") -> list[dict]:
        sql = (f"SELECT route, value, minute, {_SUMS} FROM rate_minute WHERE dim = {{dim:String}} "
               "AND minute >= {start:DateTime} AND minute <= {end:DateTime} GROUP BY route, value, minute ORDER BY minute")
        return self.store.query(sql, {"dim": dim, "start": _ch(start), "end": _ch(end)})

    def route_slices(self, route: str, start: datetime, end: datetime) -> list[dict]:
        """The whole route (dim '') and its versions slices over [start, end]."""
        sql = (f"SELECT dim, value, {_SUMS} FROM rate_minute WHERE route = {{route:String}} "
               "AND (dim = '' OR startsWith(dim, 'version.')) AND minute >= {start:DateTime} AND minute <= {end:DateTime} "
               "GROUP BY dim, value")
        return self.store.query(sql, {"route": route, "start": _ch(start), "end": _ch(end)})
