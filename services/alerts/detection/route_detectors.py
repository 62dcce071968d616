"""Every route's detectors, stepped a minute at a time all at once: a ``DriftFleet`` per detector configuration
(routes with their own threshold share one) and one ``InputHealthEngine``.

A minute costs a few numpy steps over all routes instead of two detectors' Python per route, and a route's state
is its rows of those arrays: ``state`` takes it out and ``load`` puts it back (services/alerts/evaluation/route_state.py
writes it as bytes). ``RouteMinute`` is what one route is fed in a minute; the evaluator stores those too, so a
restart replays each route from its own snapshot's minute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.expectations import NO_CLAIMS, NO_HISTORY, Expectation
from services.alerts.detection.fleet import N_FIELDS, DriftFleet
from services.alerts.detection.health_engine import OK, WIDTH, InputHealthConfig, InputHealthEngine
from services.alerts.detection.input_health import HealthView
from services.alerts.detection.route_view import RouteView, expected_basis
from services.alerts.detection.rows import StateMismatch


@dataclass
class RouteMinute:
    """One route's minute as its detectors read it: the sums (``effective_sums``), the input-health columns
    (``health_inputs``) and each mix slice's effective claims and failed claims."""

    x: np.ndarray = field(default_factory=lambda: np.zeros(N_FIELDS))
    health: np.ndarray = field(default_factory=lambda: np.zeros(WIDTH))
    slices: dict[str, tuple[float, float]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return msgspec.msgpack.encode(
            {"x": self.x.tolist(), "h": self.health.tolist(), "s": {k: list(v) for k, v in self.slices.items()}}
        )

    @classmethod
    def decode(cls, data: bytes) -> RouteMinute:
        fields = msgspec.msgpack.decode(data)
        return cls(
            np.array(fields["x"], dtype=float),
            np.array(fields["h"], dtype=float),
            {k: tuple(v) for k, v in fields["s"].items()},
        )


class RouteDetectors:
    def __init__(self, config_for: Callable[[str], DetectorConfig], health_config: InputHealthConfig):
        self.config_for = config_for
        self.fleets: dict[DetectorConfig, DriftFleet] = {}
        self.health = InputHealthEngine(health_config, 0)
        self.rows: dict[str, tuple[DriftFleet, int, int]] = {}  # route -> (its fleet, its row there, its health row)
        self.minute: int | None = None  # the last minute stepped (or loaded at)

    def __contains__(self, route: str) -> bool:
        return route in self.rows

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, routes: list[str]) -> None:
        """New routes, each as fresh detectors that start at the next step."""
        routes = [r for r in dict.fromkeys(routes) if r not in self.rows]
        by_config: dict[DetectorConfig, list[str]] = {}
        for route in routes:
            by_config.setdefault(self.config_for(route), []).append(route)
        for config, members in by_config.items():
            fleet = self.fleets.get(config)
            if fleet is None:
                fleet = self.fleets[config] = DriftFleet(config)
                fleet.last_minute = self.minute
            for route, row, health_row in zip(
                members, fleet.add_rows(len(members)), self.health.add_rows(len(members))
            ):
                self.rows[route] = (fleet, int(row), int(health_row))

    def step(self, minute: int, inputs: dict[str, RouteMinute]) -> None:
        """One minute for every route: ``inputs`` by route (a route without any had an empty minute)."""
        per_fleet: dict[int, tuple[np.ndarray, dict[int, dict[str, tuple[float, float]]]]] = {
            id(f): (np.zeros((f.n_routes, N_FIELDS)), {}) for f in self.fleets.values()
        }
        health = np.zeros((self.health.n_routes, WIDTH))
        for route, given in inputs.items():
            fleet, row, health_row = self.rows[route]
            x, slices = per_fleet[id(fleet)]
            x[row] = given.x
            if given.slices:
                slices[row] = given.slices
            health[health_row] = given.health
        for fleet in self.fleets.values():
            x, slices = per_fleet[id(fleet)]
            fleet.step(x, minute, slices)
        self.health.step(health, minute)
        self.minute = minute

    # -- what alerts read ------------------------------------------------------------------------------
    def regression(self, route: str) -> RouteView:
        fleet, row, _ = self.rows[route]
        return fleet.regression_view(row)

    def mix_shift(self, route: str) -> RouteView:
        fleet, row, _ = self.rows[route]
        return fleet.mix_shift_view(row)

    def health_view(self, route: str) -> HealthView:
        return HealthView(self.health, self.rows[route][2])

    def watched(self) -> set[str]:
        """The routes any of whose detectors is not ok this minute."""
        fleets = {id(f): set(f.watched().tolist()) for f in self.fleets.values()}
        health = set(np.flatnonzero((self.health.state != OK).any(axis=0)).tolist())
        return {
            route
            for route, (fleet, row, health_row) in self.rows.items()
            if row in fleets[id(fleet)] or health_row in health
        }

    def expectations(self) -> dict[str, Expectation]:
        """Every route's expectation now (``Expectation.of`` its regression view, for all routes at once)."""
        out = {}
        # per fleet: expected, has a baseline, learning, hours of history (arrays over its routes, made once)
        per_fleet = {
            id(f): (*f.expectations(), f._engine.baseline.learning, f._engine.baseline.history_hours)
            for f in self.fleets.values()
        }
        for route, (fleet, row, _) in self.rows.items():
            expected, has_baseline, learning_rows, hours_rows = per_fleet[id(fleet)]
            learning = bool(learning_rows[row])
            hours = int(hours_rows[row]) if learning else None  # as Expectation.of gives them
            if not np.isnan(expected[row]):
                out[route] = Expectation(float(expected[row]), expected_basis(fleet._engine, row), learning, hours)
            else:
                out[route] = Expectation(
                    None, NO_CLAIMS if has_baseline[row] else NO_HISTORY, not has_baseline[row] or learning, hours
                )
        return out

    # -- a route's state -----------------------------------------------------------------------------------
    def state(self, route: str) -> dict[str, Any]:
        fleet, row, health_row = self.rows[route]
        return {"drift": fleet.row_state(row), "health": self.health.row_state(health_row)}

    def load(self, states: dict[str, dict[str, Any]], minute: int) -> None:
        """Routes as ``state`` gave each after ``minute``, which must be the minute these detectors are at (or they
        have not begun)."""
        if self.minute not in (None, minute):
            raise StateMismatch(f"a route's state after minute {minute} cannot join routes at minute {self.minute}")
        self.minute = minute
        self.add(list(states))
        by_fleet: dict[int, tuple[DriftFleet, list[int], list[dict[str, Any]]]] = {}
        for route, state in states.items():
            fleet, row, _ = self.rows[route]
            _, rows, drift = by_fleet.setdefault(id(fleet), (fleet, [], []))
            rows.append(row)
            drift.append(state["drift"])
        for fleet, rows, drift in by_fleet.values():
            fleet.load_rows(rows, drift, minute)
        self.health.load_rows([self.rows[route][2] for route in states], [s["health"] for s in states.values()], minute)
