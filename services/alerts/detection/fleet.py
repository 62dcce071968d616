"""Drift detection for many routes in lockstep: one numpy step a minute for every route of a fleet.

The evaluator keeps one ``DriftFleet`` per detector configuration and steps all its routes at once; a
route is a row of the fleet's two engines (services/alerts/detection/drift_engine.py) and ``RouteView``
(services/alerts/detection/route_view.py) reads one row as an alert reads a detector. A route joins with ``add_rows``
and behaves exactly as a detector that started then (each row is computed on its own), and ``row_state``/``load_rows``
take one route's state out and put it back (services/alerts/evaluation/route_state.py stores it). ``DriftDetector``
(services/alerts/detection/detector.py) is a fleet of one route.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from services.alerts.detection.columns import CLAIMS, SEASONAL
from services.alerts.detection.config import MAX_GAP_MINUTES, DetectorConfig
from services.alerts.detection.drift_engine import DriftEngine, mix_shift_state
from services.alerts.detection.engines import make_engine
from services.alerts.detection.minutes import minute_start
from services.alerts.detection.route_view import RouteView
from services.alerts.detection.rows import HISTORY, StateMismatch, grow, into_ring, oldest_first
from services.store.rates import COUNT_FIELDS

MAX_SLICES = 12  # slices a detector tells apart by name; later ones share one (route_view.OTHER_SLICE)
N_FIELDS = len(COUNT_FIELDS)


class DriftFleet:
    """Routes of one detector configuration, stepped a minute at a time in event-time order.

    Two engines of ``config.kind`` watch each route: ``regression`` tests the mix-adjusted expectation (worse
    on the same questions: pages), and a second tests the seasonal expectation without the mix
    adjustment; a rise there that is mostly mix is a ``mix_shift`` (a warning)."""

    def __init__(self, config: DetectorConfig | None = None, n_routes: int = 0):
        self.config = config or DetectorConfig()
        self._engine = make_engine(self.config, n_routes, N_FIELDS, MAX_SLICES + 1, mix_adjusted=True)
        self._total = make_engine(self.config, n_routes, N_FIELDS, MAX_SLICES + 1, mix_adjusted=False)
        self.mix_state = np.zeros(n_routes, dtype=np.int8)
        self.slice_names: list[list[str]] = [[] for _ in range(n_routes)]
        self.last_minute: int | None = None
        # each route's last rate_window_minutes minutes: the input sums, then each engine's three expected columns
        self.recent = np.zeros((n_routes, self.config.rate_window_minutes, N_FIELDS + 6), dtype=HISTORY)
        self.recent_len = np.zeros(n_routes, dtype=np.int64)
        self.ticks = 0

    @property
    def n_routes(self) -> int:
        return self.mix_state.shape[0]

    # -- one minute for every route ------------------------------------------------------------------------
    def step(self, x: np.ndarray, minute: int, slices: dict[int, dict[str, tuple[float, float]]] | None = None) -> None:
        """x: (routes, COUNT_FIELDS) sums of the minute (``Counts.as_array``); ``slices``: by route row, its claims
        and failed claims per mix slice (query type × stakes), effective as ``Counts.effective`` counts them."""
        if self.last_minute is not None:
            if minute <= self.last_minute:
                raise ValueError(
                    f"minute {minute_start(minute).isoformat()} is not after the last bucket "
                    f"{minute_start(self.last_minute).isoformat()}; feed minute buckets in event-time order"
                )
            empty = np.zeros_like(x)  # empty minutes in between still count as time
            for skipped in range(max(self.last_minute + 1, minute - MAX_GAP_MINUTES), minute):
                self._step(empty, skipped, None)
        self._step(x, minute, self._slice_array(slices))

    def _slice_array(self, slices: dict[int, dict[str, tuple[float, float]]] | None) -> np.ndarray | None:
        if not slices:
            return None
        out = np.zeros((self.n_routes, MAX_SLICES + 1, 2))
        for row, named in slices.items():
            names = self.slice_names[row]
            for name in sorted(named):  # the store returns slices in any order; indices must not depend on it
                if name not in names and len(names) < MAX_SLICES:
                    names.append(name)
                i = names.index(name) if name in names else MAX_SLICES
                out[row, i] += named[name]
        return out

    def _step(self, x: np.ndarray, minute: int, slices: np.ndarray | None) -> None:
        self._engine.step(x, minute, slices)
        self._total.step(x, minute, slices)
        self.mix_state = mix_shift_state(self._total, self._engine, self.mix_state)
        claims = x[:, CLAIMS][:, None]
        self.recent[:, self.ticks % self.recent.shape[1]] = np.concatenate(
            [
                x,
                *(
                    claims
                    * np.stack(
                        [e.expected.mixed if e.mix_adjusted else e.expected.total, e.expected.total, e.expected.mixed],
                        axis=1,
                    )
                    for e in (self._engine, self._total)
                ),
            ],
            axis=1,
        )
        self.recent_len = np.minimum(self.recent_len + 1, self.recent.shape[1])
        self.ticks += 1
        self.last_minute = minute

    def recent_sums(self, engine: DriftEngine, rows: np.ndarray | None = None) -> np.ndarray:
        """The last ``rate_window_minutes`` minutes' sums as ``engine`` saw them (with its expected columns), oldest
        minute first, of every route or of ``rows``."""
        recent = self.recent if rows is None else self.recent[rows]
        ordered = np.roll(recent, -(self.ticks % recent.shape[1]), axis=1).sum(axis=1)
        first = N_FIELDS + (0 if engine is self._engine else 3)
        return np.concatenate([ordered[:, :N_FIELDS], ordered[:, first : first + 3]], axis=1)

    # -- what alerts read --------------------------------------------------------------------------------
    def regression_view(self, row: int) -> RouteView:
        return RouteView(self, self._engine, row, int(self._engine.state[row]))

    def mix_shift_view(self, row: int) -> RouteView:
        return RouteView(self, self._total, row, int(self.mix_state[row]))

    def watched(self) -> np.ndarray:
        """The rows whose regression or mix shift is not ok."""
        return np.flatnonzero((self._engine.state != 0) | (self.mix_state != 0))

    def expectations(self) -> tuple[np.ndarray, np.ndarray]:
        """Every route's regression ``expected`` (nan where a view's is None) and whether it has a baseline."""
        e = self._engine
        sums = np.where(((e.state != 0) & (e.onset >= 0))[:, None], e.evidence, self.recent_sums(e))
        has_baseline = np.rint(e.total[:, CLAIMS]) > 0  # as the view's baseline_counts (whole claims) has a rate
        known = (sums[:, CLAIMS] > 0) & has_baseline
        expected = np.where(known, sums[:, e.n_fields + SEASONAL] / np.maximum(sums[:, CLAIMS], 1e-300), np.nan)
        return expected, has_baseline

    # -- routes joining, and a route's state ---------------------------------------------------------------
    def add_rows(self, k: int) -> np.ndarray:
        """``k`` new routes, each as a fresh detector that starts at the next step; returns their rows."""
        n = self.n_routes
        for engine in (self._engine, self._total):
            engine.add_rows(k)
        grow(self, {"mix_state": 0, "recent": 0, "recent_len": 0}, k)
        self.slice_names.extend([] for _ in range(k))
        return np.arange(n, n + k)

    def row_state(self, row: int) -> dict[str, Any]:
        return {
            "engine": self._engine.row_state(row),
            "total": self._total.row_state(row),
            "mix_state": int(self.mix_state[row]),
            "slice_names": list(self.slice_names[row]),
            "recent": oldest_first(self.recent[row], (self.ticks - 1) % self.recent.shape[1]),
            "recent_len": int(self.recent_len[row]),
        }

    def load_rows(self, rows: list[int], states: list[dict[str, Any]], minute: int) -> None:
        """Routes ``rows`` as ``row_state`` gave each after ``minute``; the fleet is at ``minute`` (or has not
        begun)."""
        if self.last_minute not in (None, minute):
            raise StateMismatch(
                f"a route's state after minute {minute} cannot join a fleet at minute {self.last_minute}"
            )
        self.last_minute = minute
        self._engine.load_rows(rows, [state["engine"] for state in states], minute)
        self._total.load_rows(rows, [state["total"] for state in states], minute)
        for row, state in zip(rows, states):
            self.mix_state[row] = state["mix_state"]
            self.slice_names[row] = list(state["slice_names"])
            recent = np.asarray(state["recent"], dtype=float)
            if recent.shape != self.recent[row].shape:
                raise StateMismatch(
                    f"recent: stored shape {recent.shape}, the configuration's {self.recent[row].shape}"
                )
            self.recent[row] = into_ring(recent, (self.ticks - 1) % self.recent.shape[1])
            self.recent_len[row] = state["recent_len"]
