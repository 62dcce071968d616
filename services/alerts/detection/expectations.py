"""Each route's rate beside what the drift detector expects of it now: the overview, `claimwatch rates`,
the route page and ``GET /api/rates`` all compare through here, so their figures agree (and write the expectation
with services/alerts/explain/figures.py ``expected_text``). An issue's routes without an open alert are set beside
the same expectation (services/issues/figures.py).

The evaluator publishes, after every evaluation, each route's expectation (a row per route, written when it
changes): its regression view's ``expected``, the time-of-day expectation an alert on the route carries as
``expected`` (over the detector's latest window, or since onset while an alert is open). A reader sets a
window's rate beside it: ``delta = rate - expected`` (points) and
``delta_lo = 95% interval's lower end - expected``, the rise the data is sure of. "Worst" means furthest
above the expectation (``PRIORITY``): routes with a firing alert first, then by ``delta_lo``, then routes
without an expectation yet, by rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from services.rates.report import worst_first

if TYPE_CHECKING:
    from services.alerts.detection.route_view import RouteView

SORTS = ("priority", "rate")  # priority: firing, then delta_lo (the module docstring); rate: highest first
PRIORITY = (
    "firing alerts first, then by how far the rate's 95% interval lies above the expectation "
    "(its lower end minus expected)"
)
NOT_EVALUATED = "no expectation yet: the drift evaluator has not evaluated this route"
NO_HISTORY = "learning: no finished hour of history yet"
NO_CLAIMS = "no claims in the drift detector's latest window"


class ExpectationStore(Protocol):
    """Where the expectations are kept, a row per route (services.store.alerts.AlertRepository)."""

    def expectations(self, routes: Iterable[str] | None = None) -> dict[str, dict[str, Any]]: ...
    def save_expectations(self, minute: datetime, expectations: Mapping[str, Mapping[str, Any]]) -> None: ...


@dataclass(frozen=True)
class Expectation:
    """What the detector expects of one route's claim-level rate now; ``expected`` None: it cannot say yet."""

    expected: float | None
    basis: str  # why it is what it is (the alert's ``expected_basis``), or why there is none
    learning: bool  # under a day of history: a recent level, no time-of-day profile yet
    history_hours: int | None = None  # while learning, whole hours of history (changes hourly: published rarely)
    detectable_rise: float | None = None  # the smallest rise seen within an hour, where more than the threshold

    @classmethod
    def of(cls, view: RouteView) -> Expectation:
        """From a detector's RouteView (services/alerts/detection/detector.py)."""
        hours = int(view.history_hours) if view.learning else None
        if view.expected is not None:
            return cls(view.expected, view.expected_basis, view.learning, hours, view.detectable_rise)
        return cls(
            None, NO_HISTORY if view.baseline is None else NO_CLAIMS, view.baseline is None or view.learning, hours
        )


def publish(
    store: ExpectationStore,
    expectations: Mapping[str, Expectation],
    minute: datetime,
    previous: Mapping[str, Expectation] | None = None,
) -> None:
    """Store each route's expectation as of ``minute``; only those that differ from ``previous`` (as last published)."""
    changed = {route: e.__dict__ for route, e in expectations.items() if (previous or {}).get(route) != e}
    if changed:
        store.save_expectations(minute, changed)


def published(store: ExpectationStore, routes: Iterable[str] | None = None) -> dict[str, Expectation]:
    """The expectations the evaluator stored last, of every route or of ``routes`` (none before it has run)."""
    return {route: Expectation(**fields) for route, fields in store.expectations(routes).items()}


def compare(entry: dict[str, Any], expectation: Expectation | None, firing: Iterable[str] = ()) -> dict[str, Any]:
    """A rate entry (services/rates/report.py) with its expectation, how far above it the rate is, and the
    route's firing alerts."""
    e = expectation or Expectation(None, NOT_EVALUATED, False)
    rate, interval, expected = entry.get("rate"), entry.get("interval"), e.expected
    delta = None if expected is None or rate is None else rate - expected
    return {
        **entry,
        "expected": expected,
        "expected_basis": e.basis,
        "learning": e.learning,
        "history_hours": e.history_hours,
        "detectable_rise": e.detectable_rise,
        "delta": delta,
        "delta_lo": interval[0] - expected if delta is not None and interval else None,
        "firing_alerts": list(firing),
    }


def by_priority(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Firing first, then the surest rise over the expectation, then routes without one by rate (PRIORITY)."""
    return sorted(
        entries,
        key=lambda e: (
            not e["firing_alerts"],
            e["delta_lo"] is None,
            -(e["delta_lo"] or 0.0),
            e["rate"] is None,
            -(e["rate"] or 0.0),
            -e["claims"],
        ),
    )


def sort_routes(entries: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """``entries`` in the order ``sort`` names; ties by route name, so that pages of the list cut it the same way
    every time."""
    if sort not in SORTS:
        raise ValueError(f"sort {sort!r} is unknown; use one of {', '.join(SORTS)}")
    by_name = sorted(entries, key=lambda e: e["route"])
    return by_priority(by_name) if sort == "priority" else worst_first(by_name)
