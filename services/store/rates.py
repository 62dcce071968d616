"""Windowed sums over the per-minute buckets of ``rate_minute``. Never scans raw claims.

Windows end in event time, at the newest minute stored up to the wall clock (``RateRepository``
says why), so a replayed or accelerated stream reads the same as a live one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from services.core.clock import utcnow
from services.store.convert import ch_time, parse_ch_time

if TYPE_CHECKING:
    from services.store.backends import Store

# The sums rate_minute keeps per (dim, value, route, minute), in its column order. services.rates.intervals.Counts
# has one field per column, in this order.
COUNT_FIELDS = (
    "events",
    "claims",
    "failed",
    "claims_sq",
    "failed_sq",
    "failed_claims",
    "supported",
    "unsupported",
    "contradicted",
    "overreach",
    "stale",
    "no_source",
    "trivial",
    "served",
    "served_unsafe",
    "abstained",
    "answerable",
    "answerable_abstained",
    "unanswerable",
    "unanswerable_abstained",
)
# Sampled verification (each answer weighs w = 1 / its sampling.rate): the answers sampled, then the
# weighted sums (floats) that estimates of the whole traffic need.
SAMPLING_FIELDS = (
    "sampled",
    "w_events",
    "w2_events",
    "w_claims",
    "w_failed",
    "w2_claims",
    "w2_claims_sq",
    "w2_failed_sq",
    "w2_failed_claims",
    "w_served",
    "w_served_unsafe",
    "w_abstained",
    "w_answerable",
    "w_answerable_abstained",
    "w_unanswerable",
    "w_unanswerable_abstained",
    "w_supported",
    "w_unsupported",
    "w_contradicted",
    "w_overreach",
    "w_stale",
    "w_no_source",
)
SUM_FIELDS = COUNT_FIELDS + SAMPLING_FIELDS
_SUMS = ", ".join(f"sum({c}) AS {c}" for c in SUM_FIELDS)
_SUM_LIST = ", ".join(f"toFloat64(sum({c}))" for c in SUM_FIELDS)
# rate_minute's whole-route and mix rows ordered by minute: what reads every route's minutes
_BY_TIME = "rate_minute_by_time"


def route_like(pattern: str) -> str:
    """A route filter as a LIKE pattern (matched without case): a glob (``*`` any run, ``?`` one character) matches
    whole names; text without either is found anywhere in the name. LIKE's own ``%``, ``_`` and ``\\`` are literal."""
    if "*" not in pattern and "?" not in pattern:
        return f"%{glob_like(pattern)}%"
    return glob_like(pattern)


def route_conditions(matching: str | None, routes: Collection[str] | None) -> tuple[list[str], dict]:
    """SQL conditions (and their parameters) keeping the routes ``matching`` a filter (``route_like``) and, when
    ``routes`` is given, only those."""
    where: list[str] = []
    params: dict[str, object] = {}
    if matching:
        where.append("route ILIKE {matching:String}")
        params["matching"] = route_like(matching)
    if routes is not None:
        where.append("route IN {routes:Array(String)}")
        params["routes"] = sorted(routes)
    return where, params


def glob_like(pattern: str) -> str:
    """A shell glob as a LIKE pattern matching whole names, case and all (``*`` any run, ``?`` one character)."""
    return re.sub(r"([%_\\])", r"\\\1", pattern).replace("*", "%").replace("?", "_")


def _slo_where(routes: str, version: tuple[str, str] | None) -> tuple[str, dict[str, object]]:
    if version is None:
        return "dim = '' AND route LIKE {routes:String}", {"routes": glob_like(routes)}
    key, value = version
    return (
        "dim = {dim:String} AND route LIKE {routes:String} AND value LIKE {value:String}",
        {"dim": f"version.{key}", "routes": glob_like(routes), "value": glob_like(value)},
    )


def _second(ts: datetime) -> str:
    """A bucket bound: minutes are stored as DateTime, so bounds compare at whole seconds."""
    return ch_time(ts.replace(microsecond=0))


class RateRepository:
    """Rates over windows of event time.

    A window not given an end ends at ``window_end``: the newest minute stored that is not after the
    wall clock (``clock``), of one route for that route's page; the clock's own minute when everything
    stored is ahead of it; None only when nothing is stored. Every reader (API, pages, gauges, CLI,
    issue figures, review sampling) ends its windows there.

    Live traffic so ends at the current minute, and a store holding only old data (a replay, a test
    fixture) reads up to its newest minute, as it read when it was live. An answer dated ahead of the
    clock (a producer's clock gone wrong) is stored, and counted in the window "all", but moves no
    window: it cannot push every other route out of the overview, the API or the gauges.
    """

    def __init__(self, store: Store, clock: Callable[[], datetime] = utcnow):
        self.store = store
        self.clock = clock

    # -- where the data is ----------------------------------------------------
    def window_end(self, route: str | None = None) -> datetime | None:
        """Where windows end (the class docstring gives the rule), as a minute bucket."""
        now = self.clock().astimezone(UTC).replace(second=0, microsecond=0)
        where, params = "dim = ''", {"now": _second(now)}
        if route is not None:
            where, params = "dim = '' AND route = {route:String}", {**params, "route": route}
        past = "minute <= {now:DateTime64(3)}"
        rows = self.store.query(
            f"SELECT maxIf(minute, {past}) AS m, countIf({past}) AS past, count() AS n FROM rate_minute WHERE {where}",
            params,
        )
        if not rows or not rows[0]["n"]:
            return None
        return parse_ch_time(rows[0]["m"]) if rows[0]["past"] else now

    def latest_minute(self, route: str | None = None) -> datetime | None:
        """The newest minute bucket stored (of one route, if given), even ahead of the clock; None when there is
        none. Windows end at ``window_end`` instead."""
        return self._end_minute("DESC", route)

    def first_minute(self, route: str | None = None) -> datetime | None:
        """The oldest minute bucket stored (of one route, if given); None when there is none."""
        return self._end_minute("ASC", route)

    def _end_minute(self, order: str, route: str | None) -> datetime | None:
        # of every route: the first row of rate_minute_by_time, which is ordered by minute (rate_minute by route)
        table, where, params = _BY_TIME, "dim = ''", {}
        if route is not None:
            table, where, params = "rate_minute", "dim = '' AND route = {route:String}", {"route": route}
        rows = self.store.query(
            f"SELECT toString(minute) AS m FROM {table} WHERE {where} ORDER BY minute {order} LIMIT 1", params
        )
        return parse_ch_time(rows[0]["m"]) if rows else None

    def latest_minute_by_route(self, since: datetime) -> dict[str, datetime]:
        """Each route's newest minute bucket, for the routes with a bucket at or after ``since``."""
        rows = self.store.query(
            "SELECT route, max(minute) AS m FROM rate_minute WHERE dim = '' "
            "AND minute >= {since:DateTime64(3)} GROUP BY route",
            {"since": _second(since)},
        )
        return {r["route"]: parse_ch_time(r["m"]) for r in rows}

    def window_bounds(
        self, window: timedelta | None, end: datetime | None = None
    ) -> tuple[datetime | None, datetime | None]:
        """(start, end) as minute buckets, both inclusive; start None means unbounded. ``end`` defaults to
        ``window_end``."""
        end = end or self.window_end()
        if end is None or window is None:
            return None, end
        return end - window + timedelta(minutes=1), end

    # -- sums -----------------------------------------------------------------
    def totals(
        self,
        dim: str = "",
        window: timedelta | None = None,
        end: datetime | None = None,
        route: str | None = None,
        matching: str | None = None,
        routes: Collection[str] | None = None,
        sums: Sequence[str] = SUM_FIELDS,
    ) -> list[dict]:
        """One row per (value, route) for a slice dimension ('' = whole route); of one ``route``, of the routes
        ``matching`` a filter (``route_like``), or of ``routes``, when given. ``sums``: the SUM_FIELDS read."""
        unknown = set(sums) - set(SUM_FIELDS)
        if unknown:
            raise ValueError(f"rate_minute has no sums {sorted(unknown)}")
        start, end = self.window_bounds(window, end)
        where, params = route_conditions(matching, routes)
        where, params = ["dim = {dim:String}", *where], {"dim": dim, **params}
        if start is not None:
            where.append("minute >= {start:DateTime64(3)}")
            params["start"] = _second(start)
        if end is not None and window is not None:
            where.append("minute <= {end:DateTime64(3)}")
            params["end"] = _second(end)
        if route is not None:
            where.append("route = {route:String}")
            params["route"] = route
        selected = _SUMS if sums == SUM_FIELDS else ", ".join(f"sum({c}) AS {c}" for c in sums)
        sql = f"SELECT value, route, {selected} FROM rate_minute WHERE {' AND '.join(where)} GROUP BY value, route"
        return self.store.query(sql, params)

    def totals_by_dim(self, dims: list[str], window: timedelta | None = None) -> list[dict]:
        """One row per (dim, value, route) for several slice dimensions, in one pass over the window."""
        start, end = self.window_bounds(window)
        where = ["dim IN {dims:Array(String)}"]
        params: dict[str, object] = {"dims": dims}
        if start is not None and end is not None:  # window_bounds gives a start only with an end
            where.append("minute >= {start:DateTime64(3)} AND minute <= {end:DateTime64(3)}")
            params.update(start=_second(start), end=_second(end))
        return self.store.query(
            f"SELECT dim, value, route, {_SUMS} FROM rate_minute WHERE {' AND '.join(where)} "
            "GROUP BY dim, value, route",
            params,
        )

    def dims(self, limit: int) -> list[str]:
        """Slice dimensions stored, the most events first, at most ``limit``."""
        rows = self.store.query(
            "SELECT dim FROM rate_minute WHERE dim != '' GROUP BY dim ORDER BY sum(events) DESC, dim LIMIT {n:UInt32}",
            {"n": limit},
        )
        return [r["dim"] for r in rows]

    def stored_dims(self, dims: list[str]) -> set[str]:
        """Which of ``dims`` are stored."""
        rows = self.store.query(
            "SELECT DISTINCT dim FROM rate_minute WHERE dim IN {dims:Array(String)}", {"dims": dims}
        )
        return {r["dim"] for r in rows}

    def minutes(self, route: str, start: datetime, end: datetime, dim: str = "", value: str = "") -> list[dict]:
        """Per-minute sums for one route (and slice), oldest first."""
        sql = (
            f"SELECT minute, {_SUMS} FROM rate_minute WHERE dim = {{dim:String}} AND value = {{value:String}} "
            "AND route = {route:String} AND minute >= {start:DateTime64(3)} AND minute <= {end:DateTime64(3)} "
            "GROUP BY minute ORDER BY minute"
        )
        return self.store.query(
            sql, {"dim": dim, "value": value, "route": route, "start": _second(start), "end": _second(end)}
        )

    def minutes_all_routes(self, start: datetime, end: datetime, dim: str = "") -> list[dict]:
        """Per-minute sums of every route over [start, end], for the whole route ('') or its mix slices ('mix'):
        rows of route, value, minute and ``sums``, the SUM_FIELDS in order (one list, read as numbers at once)."""
        if dim not in ("", "mix"):
            raise ValueError(f"minutes of every route are kept by time for dims '' and 'mix', not {dim!r}")
        sql = (
            f"SELECT route, value, minute, [{_SUM_LIST}] AS sums FROM {_BY_TIME} "
            "WHERE dim = {dim:String} "
            "AND minute >= {start:DateTime64(3)} AND minute <= {end:DateTime64(3)} "
            "GROUP BY route, value, minute ORDER BY minute"
        )
        return self.store.query(sql, {"dim": dim, "start": _second(start), "end": _second(end)})

    def slo_minutes(
        self, routes: str, version: tuple[str, str] | None, start: datetime, end: datetime
    ) -> list[tuple[datetime, list[float]]]:
        """Per-minute sums over [start, end] of the routes a glob matches (and, given (key, glob), of the traffic
        whose version ``key`` matches): (minute, the SUM_FIELDS in order), oldest first."""
        where, params = _slo_where(routes, version)
        rows = self.store.query(
            f"SELECT minute, [{_SUM_LIST}] AS sums FROM rate_minute WHERE {where} "
            "AND minute >= {start:DateTime64(3)} AND minute <= {end:DateTime64(3)} GROUP BY minute ORDER BY minute",
            {**params, "start": _second(start), "end": _second(end)},
        )
        return [(parse_ch_time(r["minute"]), [float(v) for v in r["sums"]]) for r in rows]

    def slo_sums(self, routes: str, version: tuple[str, str] | None, start: datetime, end: datetime) -> list[float]:
        """The sums over [start, end] of an SLO's traffic (``slo_minutes``' selection), the SUM_FIELDS in order."""
        where, params = _slo_where(routes, version)
        rows = self.store.query(
            f"SELECT [{_SUM_LIST}] AS sums FROM rate_minute WHERE {where} "
            "AND minute >= {start:DateTime64(3)} AND minute <= {end:DateTime64(3)}",
            {**params, "start": _second(start), "end": _second(end)},
        )
        return [float(v) for v in rows[0]["sums"]] if rows else [0.0] * len(SUM_FIELDS)

    def slo_routes(
        self, routes: str, version: tuple[str, str] | None, start: datetime, end: datetime
    ) -> list[tuple[str, list[float]]]:
        """Per route, the sums over [start, end] of an SLO's traffic (``slo_minutes``' selection)."""
        where, params = _slo_where(routes, version)
        rows = self.store.query(
            f"SELECT route, [{_SUM_LIST}] AS sums FROM rate_minute WHERE {where} "
            "AND minute >= {start:DateTime64(3)} AND minute <= {end:DateTime64(3)} GROUP BY route ORDER BY route",
            {**params, "start": _second(start), "end": _second(end)},
        )
        return [(r["route"], [float(v) for v in r["sums"]]) for r in rows]

    def slo_first_minute(self, routes: str, version: tuple[str, str] | None) -> datetime | None:
        """The first minute the store holds of an SLO's traffic (``slo_minutes``' selection)."""
        where, params = _slo_where(routes, version)
        rows = self.store.query(f"SELECT min(minute) AS first, count() AS n FROM rate_minute WHERE {where}", params)
        return parse_ch_time(rows[0]["first"]) if rows and rows[0]["n"] else None

    def route_buckets(
        self, routes: Collection[str], start: datetime, end: datetime, step: int, sums: Sequence[str] = SUM_FIELDS
    ) -> list[dict]:
        """Per route of ``routes`` and ``bucket`` (the ``step``-minute buckets counted from ``start``, 0 first), the
        ``sums`` over [start, end] (minute buckets, both inclusive)."""
        sql = (
            "SELECT route, intDiv(toUInt32(dateDiff('minute', {start:DateTime64(3)}, minute)), "
            f"{{step:UInt32}}) AS bucket, {', '.join(f'sum({c}) AS {c}' for c in sums)} FROM rate_minute "
            "WHERE dim = '' AND route IN {routes:Array(String)} AND minute >= {start:DateTime64(3)} "
            "AND minute <= {end:DateTime64(3)} GROUP BY route, bucket"
        )
        return self.store.query(
            sql, {"routes": sorted(routes), "start": _second(start), "end": _second(end), "step": step}
        )

    def route_slices(self, route: str, start: datetime, end: datetime) -> list[dict]:
        """The whole route (dim '') and its versions slices over [start, end]."""
        sql = (
            f"SELECT dim, value, {_SUMS} FROM rate_minute WHERE route = {{route:String}} "
            "AND (dim = '' OR startsWith(dim, 'version.')) "
            "AND minute >= {start:DateTime64(3)} AND minute <= {end:DateTime64(3)} GROUP BY dim, value"
        )
        return self.store.query(sql, {"route": route, "start": _second(start), "end": _second(end)})

    def version_spans(self, route: str, start: datetime, end: datetime, limit: int) -> tuple[list[dict], int]:
        """The version values of a route seen in [start, end] (key, value, first and last minute seen at all, as
        datetimes, and events), oldest first: the ``limit`` first seen last, and how many there are in all."""
        rows = self.store.query(
            "SELECT substring(dim, 9) AS key, value, min(minute) AS first, max(minute) AS last, sum(events) AS events, "
            "count() OVER () AS total "
            "FROM rate_minute WHERE route = {route:String} AND startsWith(dim, 'version.') GROUP BY dim, value "
            "HAVING last >= {start:DateTime64(3)} AND first <= {end:DateTime64(3)} "
            "ORDER BY first DESC, key DESC, value DESC LIMIT {n:UInt32}",
            {"route": route, "start": _second(start), "end": _second(end), "n": limit},
        )
        spans = [
            {
                "key": r["key"],
                "value": r["value"],
                "first": parse_ch_time(r["first"]),
                "last": parse_ch_time(r["last"]),
                "events": int(r["events"]),
            }
            for r in reversed(rows)
        ]
        return spans, int(rows[0]["total"]) if rows else 0
