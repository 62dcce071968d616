"""The route bound: at most ``max_active`` routes sending within ``window``; events of a further new route are
dead-lettered (rule ``route.limit``) instead of growing every per-route structure without bound.

A producer chooses route names freely, and one bug that puts a request id into the route makes every event a new
route: per-route detectors, gauges and page rows would grow until the process runs out of memory. The bound keeps
the worker's routes to what it can carry; the routes it refuses name the producer creating them (``source``).
Routes are counted per worker (each consumes its own partitions), seeded at start with the routes the store has
seen within the window.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime, timedelta

from services.contract.model import VerdictEvent
from services.contract.rejection import Problem, Rejection

ROUTE_LIMIT = "route.limit"
MAX_ACTIVE = 20_000  # routes.max_active's default
ACTIVE_WINDOW = timedelta(hours=24)  # routes.active_hours's default
SOURCE_KEYS = ("verifier", "model", "prompt")  # the versions that say which producer a route comes from
SOURCE_PATH, REFUSED_PATH = "source", "refused_route"  # a refusal's second and third problems: who, and which route


def source(event: VerdictEvent) -> str:
    """Who sent an event, as far as it says: its verifier, model and prompt versions, and its tenant."""
    parts = [f"{key}={event.versions[key]}" for key in SOURCE_KEYS if event.versions.get(key)]
    if event.tenant:
        parts.append(f"tenant={event.tenant}")
    return ", ".join(parts) or "no versions or tenant given"


class RouteGuard:
    """Routes by when they last sent, oldest first; a route quiet for longer than ``window`` no longer counts."""

    def __init__(
        self,
        max_active: int = MAX_ACTIVE,
        window: timedelta = ACTIVE_WINDOW,
        known: Iterable[str] = (),
        now: datetime | None = None,
    ):
        self.max_active = max_active
        self.window = window
        self.last_seen: OrderedDict[str, datetime] = OrderedDict()
        for route in known:
            if len(self.last_seen) >= max_active:
                break
            self.last_seen[route] = now or datetime.min

    def __len__(self) -> int:
        return len(self.last_seen)

    def admit(self, route: str, now: datetime) -> bool:
        """Whether an event of ``route`` arriving at ``now`` is within the bound (and the route now counts)."""
        if route in self.last_seen:
            self.last_seen.move_to_end(route)
            self.last_seen[route] = now
            return True
        while self.last_seen and next(iter(self.last_seen.values())) < now - self.window:
            self.last_seen.popitem(last=False)
        if len(self.last_seen) >= self.max_active:
            return False
        self.last_seen[route] = now
        return True

    def refusal(self, event: VerdictEvent) -> Rejection:
        """The dead letter's reason, then who sent it (path ``source``) and the route refused (path ``route``):
        the route_cardinality alert counts refusals by those two (services/store/dlq.py, refused_routes)."""
        hours = self.window / timedelta(hours=1)
        who = source(event)
        reason = (
            f"route {event.route!r} would be route {self.max_active + 1:,} active in the last {hours:g} h, over "
            f"routes.max_active ({self.max_active:,}); a producer that puts request ids or other unbounded values "
            f"into the route is the usual cause: this one came from {who}. Fix the producer, or raise "
            "routes.max_active; events of routes already active are stored as before"
        )
        return Rejection(
            (
                Problem(ROUTE_LIMIT, "route", reason),
                Problem(ROUTE_LIMIT, SOURCE_PATH, who),
                Problem(ROUTE_LIMIT, REFUSED_PATH, event.route),
            ),
            event_id=event.event_id,
            observed_at=event.observed_at,
        )
