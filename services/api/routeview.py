"""What the route detail shows: the rate over time with its interval band, the baseline, alert
spans, the verdict breakdown and the version-change timeline. Pure functions over the rate
repository's rows; and the per-route rates every surface lists (``RouteReport``)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.detector import baseline_status, history_hours_between
from services.alerts.detection.expectations import sort_routes
from services.alerts.lifecycle.kinds import KINDS
from services.rates.intervals import Counts, ratio_interval
from services.rates.report import RANKING_SUMS, ranking_entries, rate_entry
from services.review.calibration import with_calibrated
from services.store.convert import parse_ch_time
from services.store.rates import RateRepository

MAX_POINTS = 120
MAX_VERSIONS = 50  # version values listed on a route's page: producers choose them, so the page bounds them
CURRENT_MINUTES = 30  # "current rate": the overview's window, ending where it does (RateRepository.window_end)
STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 240, 720, 1440)


ROUTES_PER_PAGE = 100  # a page of the route list (the overview, GET /api/rates, `claimwatch rates`), by default
MAX_ROUTES_PER_PAGE = 1000  # and at most: a producer chooses route names, so no list answers with all of them


@dataclass(frozen=True)
class RoutePage:
    """One page of the route list: its entries with every figure, in the list's order, and where it lies in the
    list (``total`` routes, those the filter keeps)."""

    routes: list[dict]
    total: int
    offset: int
    limit: int

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts; None on the last page."""
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def after(self) -> int:
        """Routes of the list after this page."""
        return max(0, self.total - self.offset - len(self.routes))


class RouteReport:
    """Each route's rate over a window beside the drift detector's expectation, sorted and a page at a time: what
    ``GET /api/rates``, the overview and `claimwatch rates` list (services/alerts/detection/expectations.py).

    Every route of the window is ranked (``ranking_entries``: the rate and interval alone, for all at once); only
    the page's routes are given every figure, by the same ``rate_entry`` and comparison as one route's page, so a
    route's figures are the same on every page and surface."""

    def __init__(self, rates, review, alerts):
        self.rates, self.review, self.alerts = rates, review, alerts

    def page(
        self,
        window: timedelta | None,
        now: datetime,
        sort: str = "priority",
        calibrated: bool = False,
        *,
        limit: int = ROUTES_PER_PAGE,
        offset: int = 0,
        matching: str | None = None,
        routes: Collection[str] | None = None,
    ) -> RoutePage:
        """The ``limit`` routes from ``offset`` of the list in ``sort`` order; of the routes ``matching`` a filter
        (a glob, or a part of the name: services/store/rates.py route_like) or of ``routes``, when given."""
        end = self.rates.window_end()  # one window for the ranking and the page, though a minute turns between
        ranked = self.rates.totals("", window, end, matching=matching, routes=routes, sums=RANKING_SUMS)
        compare = self.alerts.comparison(now)
        order = sort_routes([compare(e) for e in ranking_entries(ranked)], sort)
        shown = [e["route"] for e in order[offset : offset + limit]]
        rows = {r["route"]: r for r in self.rates.totals("", window, end, routes=shown)} if shown else {}
        entries = [rate_entry(rows[route]) for route in shown if route in rows]
        if calibrated:
            entries = with_calibrated(entries, self.review.calibrated(window, now, [e["route"] for e in entries]))
        return RoutePage([compare(e) for e in entries], len(order), offset, limit)


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def step_for(start: datetime, end: datetime, max_points: int = MAX_POINTS) -> int:
    """The smallest round bucket width (minutes) that keeps the series under ``max_points``."""
    minutes = int((end - start).total_seconds() // 60) + 1
    for step in STEPS:
        if minutes / step <= max_points:
            return step
    return STEPS[-1]


def series(rows: list[dict], start: datetime, step: int) -> list[dict]:
    """Per-minute rows -> buckets of ``step`` minutes from ``start``, each with rate and 95% interval."""
    buckets: dict[int, Counts] = {}
    for row in rows:
        index = int((parse_ch_time(row["minute"]) - start).total_seconds() // 60) // step
        buckets[index] = buckets.get(index, Counts.zero()) + Counts.from_row(row)
    out = []
    for index in sorted(buckets):
        c = buckets[index]
        interval = ratio_interval(c)
        out.append(
            {
                "minute": iso(start + timedelta(minutes=index * step)),
                "events": c.events,
                "claims": c.claims,
                "failed": c.failed,
                "rate": c.rate,
                "lo": interval.lo if interval else None,
                "hi": interval.hi if interval else None,
            }
        )
    return out


def overlaps(alert: dict, start: datetime, end: datetime) -> bool:
    began = datetime.fromisoformat(alert["pending_since"])
    ended = datetime.fromisoformat(alert["ends_at"]) if alert["ends_at"] else None
    return began <= end and (ended is None or ended >= start)


def alert_spans(alerts: list[dict]) -> list[dict]:
    return [
        {
            "alert_id": a["alert_id"],
            "state": a["state"],
            "severity": a["severity"],
            "start": a["pending_since"],
            "firing_at": a["starts_at"],
            "end": a["ends_at"],
        }
        for a in alerts
    ]


def baseline_from(current: dict | None, alerts: list[dict], before: Counts | None, before_minutes: int) -> dict | None:
    """The chart's dashed line, always a claim-level rate: the drift detector's expectation of the route now (what
    the overview and `claimwatch rates` compare against); else the newest drift alert's baseline; else the
    preceding window's rate. Input-health alerts' baselines are counts or shares, never drawn here."""
    if current is not None and current.get("expected") is not None:
        return {
            "rate": current["expected"],
            "interval": None,
            "expectation": True,
            "source": f"the drift detector's expectation: {current['expected_basis']}",
        }
    for alert in alerts:  # newest first
        if alert["kind"] in KINDS and alert.get("baseline") is not None:
            return {
                "rate": alert["baseline"],
                "interval": alert.get("baseline_interval"),
                "expectation": False,
                "source": f"alert {alert['alert_id']}",
            }
    if before is None or not before.claims:
        return None
    interval = ratio_interval(before)
    return {
        "rate": before.rate,
        "interval": interval.as_list() if interval else None,
        "expectation": False,
        "source": f"the {before_minutes} minutes before this range",
    }


class RouteHistory:
    """Reads for one route's page, through the rate repository."""

    def __init__(self, rates: RateRepository):
        self.rates = rates

    def versions(self, route: str, start: datetime, end: datetime) -> tuple[list[dict], int]:
        """The version values seen in [start, end], the ``MAX_VERSIONS`` first seen last: the first and last minute
        each was seen at all; and how many were seen in all."""
        spans, total = self.rates.version_spans(route, start, end, MAX_VERSIONS)
        return [
            {
                "key": r["key"],
                "value": r["value"],
                "first_seen": iso(r["first"]),
                "last_seen": iso(r["last"]),
                "events": r["events"],
            }
            for r in spans
        ], total

    def counts(self, route: str, start: datetime, end: datetime) -> Counts:
        rows = self.rates.minutes(route, start, end)
        total = Counts.zero()
        for row in rows:
            total += Counts.from_row(row)
        return total

    def current(self, route: str, end: datetime | None = None, minutes: int = CURRENT_MINUTES) -> dict | None:
        """The route's rate over the latest ``minutes`` (ending at ``end``, else where the overview's window ends);
        None when nothing is stored."""
        end = end or self.rates.window_end()
        if end is None:
            return None
        total = Counts.zero()
        for row in self.rates.totals("", timedelta(minutes=minutes), end, route):
            total += Counts.from_row(row)
        return {**rate_entry({"route": route, **total.as_dict()}), "window_minutes": minutes, "end": iso(end)}

    def detail(
        self,
        route: str,
        window: timedelta,
        end: datetime | None,
        alerts: list[dict],
        step: int | None,
        detector: DetectorConfig,
        compare: Callable[[list[dict]], list[dict]] | None = None,
    ) -> dict | None:
        """Everything the route page draws; None if the route has never been seen. ``compare`` sets the current
        rate beside the expectation (AlertsService.compare_rates), which is of now: only when ``end`` is None."""
        current = self.current(route, end)
        if current is not None and compare is not None and end is None:
            current = compare([current])[0]
        end = end or self.rates.window_end(route)
        if end is None:
            return None
        end = end.replace(second=0, microsecond=0)
        start = end - window + timedelta(minutes=1)
        step = step or step_for(start, end)
        rows = self.rates.minutes(route, start, end)
        totals = Counts.zero()
        for row in rows:
            totals += Counts.from_row(row)
        baseline_minutes = detector.baseline_minutes
        before = self.counts(route, start - timedelta(minutes=baseline_minutes), start - timedelta(minutes=1))
        first = self.rates.first_minute(route)
        history_hours = 0.0 if first is None else history_hours_between(first, end, detector)
        in_range = [a for a in alerts if overlaps(a, start, end + timedelta(minutes=1))]
        versions, versions_seen = self.versions(route, start, end)
        return {
            "route": route,
            "start": iso(start),
            "end": iso(end),
            "step_minutes": step,
            "totals": rate_entry({"route": route, **totals.as_dict()}),
            "current": current,
            "series": series(rows, start, step),
            "baseline": baseline_from(current, in_range, before, baseline_minutes),
            "baseline_status": baseline_status(history_hours, detector),
            "alerts": alert_spans(in_range),
            "versions": versions,
            "versions_seen": versions_seen,
        }
