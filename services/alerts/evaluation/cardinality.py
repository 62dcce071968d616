"""The route bound's own alert (issue 49): ``route_cardinality`` fires while events of new routes are refused.

Above ``routes.max_active`` the worker dead-letters every event of a new route (rule ``route.limit``,
services/ingest/routes.py), so a producer that puts request ids into the route cannot run the monitor out of
memory. Those routes are then invisible: no rate, no drift, no silence alert. This alert says so, on route
``*`` (every route at once), with the producers and versions sending the refused routes, most first. It fires at
the first refusal (there is nothing to wait for: each refused event is a route nobody watches) and resolves once
``window`` passes without one. The alert cycle runs it beside the rate alerts (services/alerts/evaluation/cycle.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from services.alerts.lifecycle.alert import Alert, make_alert_id
from services.alerts.lifecycle.kinds import CARDINALITY_KIND, FLEET_ROUTE, SERVICE_LABELS
from services.alerts.lifecycle.records import AlertRecords
from services.alerts.lifecycle.transitions import merge, resolve

WINDOW = timedelta(minutes=10)
Refusals = Callable[[datetime, datetime], dict[str, Any]]  # services.store.dlq.refused_routes over a span of minutes


class RouteCardinalityWatch:
    """The alert cycle's hook: one ``route_cardinality`` alert, open while routes are refused within ``window``."""

    def __init__(self, refusals: Refusals, alerts: AlertRecords, max_active: int, window: timedelta = WINDOW):
        self.refusals = refusals
        self.alerts = alerts
        self.max_active = max_active
        self.window = window
        self.open: dict[str, Alert] = {}  # route -> the open alert, for the cycle's resends

    def observe(self, found: dict[str, Any], now: datetime) -> Alert | None:
        """The alert that ``found`` (``refused_routes``'s answer over the window to ``now``) makes; None if none."""
        if not found["events"]:
            return None
        minutes = int(self.window / timedelta(minutes=1))
        top = found["sources"][0] if found["sources"] else {}
        return Alert(
            alert_id=make_alert_id(FLEET_ROUTE, CARDINALITY_KIND, now),
            route=FLEET_ROUTE,
            kind=CARDINALITY_KIND,
            severity="critical",
            labels=dict(SERVICE_LABELS),
            window=minutes,
            pending_since=now,
            starts_at=now,
            rate=found["events"] / minutes,
            expected=0.0,
            delta=found["events"] / minutes,
            claims=found["events"],
            unit="per_minute",
            updated_at=now,
            expected_basis=f"no refusals while routes stay within routes.max_active ({self.max_active:,})",
            details={
                "refused_events": found["events"],
                "refused_routes": found["routes"],
                "max_active": self.max_active,
                "top_source": top.get("source"),
                "sources": list(found["sources"]),
            },
        )

    def evaluate(self, now: datetime) -> list[Alert]:
        """The transitions at ``now`` (firing or resolved); a changed figure is saved without one."""
        previous = next((a for a in self.alerts.open_alerts() if a.kind == CARDINALITY_KIND), None)
        observed = self.observe(self.refusals(now - self.window, now), now)
        if observed is None:
            current = None if previous is None else resolve(previous, now)
        else:
            current = merge(previous, observed)
        if current is None:
            self.open = {}
            return []
        self.alerts.save(current)
        self.open = {} if current.ends_at is not None else {current.route: current}
        if previous is not None and previous.recorded_state == current.recorded_state:
            return []
        self.alerts.record_transition(current)
        return [current]
