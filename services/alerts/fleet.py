"""Drift detection for many routes in lockstep: one numpy step a minute for every route of a fleet.

The evaluator keeps one ``DriftFleet`` per detector configuration and steps all its routes at once; a
route is a row of the fleet's two engines (services/alerts/engines.py) and ``RouteView`` reads one row as
an alert reads a detector. A route joins with ``add_rows`` and behaves exactly as a detector that started
then (each row is computed on its own), and ``row_state``/``load_rows`` take one route's state out and put it
back (services/alerts/route_state.py stores it). ``DriftDetector`` (services/alerts/detector.py) is a fleet
of one route.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from services.alerts.baseline import CLAIMS
from services.alerts.config import MAX_GAP_MINUTES, DetectorConfig
from services.alerts.engines import (
    SEASONAL,
    STATE_NAMES,
    DriftEngine,
    make_engine,
    mix_shift_state,
    mix_split,
    top_mix_slice,
)
from services.alerts.rows import HISTORY, StateMismatch, grow, into_ring, oldest_first
from services.contract.model import FAILED_VERDICT_ORDER
from services.rates.intervals import Counts, Interval, ratio_interval
from services.store.rates import COUNT_FIELDS

MAX_SLICES = 12  # slices a detector tells apart by name; later ones share an "other" slice
OTHER_SLICE = "(other)"
N_FIELDS = len(COUNT_FIELDS)


def minute_number(now: datetime) -> int:
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise ValueError(f"now must be a timezone-aware datetime, got {now!r}")
    return int(now.timestamp() // 60)


def minute_start(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, tz=UTC)


def learning_basis(history_hours: float, config: DetectorConfig) -> str:
    """What a learning baseline rests on, in words (alerts and the route page say it alike)."""
    return (
        f"learning: {history_hours:.0f} h of history, under the full day a time-of-day profile needs; "
        f"expected is the last {config.learning_level_minutes // 60} h level, and a rise must clear it "
        f"by {config.learning_margin * 100:.2g} pt more until then"
    )


def expected_basis(engine: DriftEngine, row: int) -> str:
    """Why a route's expectation is what it is."""
    b = engine.baseline
    if b.learning[row]:
        return learning_basis(float(b.history_hours[row]), b.config)
    days = b.history_blocks[row] / b.per_day
    return (
        f"time of day: the {b.config.baseline_minutes // 60} h level plus this hour's offset from {days:.1f} days "
        "of history"
    )


class RouteView:
    """One route of one engine as an alert reads it: state, rate, expectation and the parts of the rise.

    Its figures are read when asked for, from the fleet as it is then; take a fresh view after a step."""

    __slots__ = ("_fleet", "_engine", "_row", "_state")

    def __init__(self, fleet: DriftFleet, engine: DriftEngine, row: int, state: int):
        self._fleet, self._engine, self._row, self._state = fleet, engine, row, state

    @property
    def state(self) -> str:
        return STATE_NAMES[self._state]

    @property
    def warm(self) -> bool:
        return bool(self._engine.warm[self._row])

    @property
    def statistic(self) -> float:
        return float(self._engine.statistic[self._row])

    @property
    def window_counts(self) -> Counts:
        """The minutes behind `rate`: since onset while pending/firing, else the recent window."""
        return Counts.from_array(self._sums[: self._engine.n_fields])

    @property
    def _sums(self) -> np.ndarray:
        if self.state != "ok" and self._engine.onset[self._row] >= 0:
            evidence: np.ndarray = self._engine.evidence[self._row]
            return evidence
        recent: np.ndarray = self._fleet.recent_sums(self._engine, np.array([self._row]))[0]
        return recent

    @property
    def baseline_counts(self) -> Counts:
        return Counts.from_array(self._engine.total[self._row])

    @property
    def rate(self) -> float | None:
        return self.window_counts.rate

    @property
    def rate_interval(self) -> Interval | None:
        return ratio_interval(self.window_counts)

    @property
    def baseline(self) -> float | None:
        """The trailing level: the route's pooled rate over the baseline horizon."""
        return self.baseline_counts.rate

    @property
    def baseline_interval(self) -> Interval | None:
        return ratio_interval(self.baseline_counts)

    def _split(self) -> tuple[float, float, float] | None:
        sums = self._sums
        if sums[CLAIMS] <= 0 or self.baseline is None:
            return None
        total, mix, rate = mix_split(sums[None, :], self._engine.n_fields)
        return float(total[0]), float(mix[0]), float(rate[0])

    @property
    def expected(self) -> float | None:
        """The rate expected over the window at this time of day (claim-weighted), before any mix adjustment."""
        sums = self._sums
        return (
            None
            if sums[CLAIMS] <= 0 or self.baseline is None
            else float(sums[self._engine.n_fields + SEASONAL] / sums[CLAIMS])
        )

    @property
    def learning(self) -> bool:
        """Under a day of history: a local level and a wider test, no time-of-day profile yet."""
        return bool(self._engine.baseline.learning[self._row])

    @property
    def history_hours(self) -> float:
        return float(self._engine.baseline.history_hours[self._row])

    @property
    def expected_basis(self) -> str:
        return expected_basis(self._engine, self._row)

    @property
    def delta(self) -> float | None:
        """The whole rise over the expectation: mix_effect + rate_effect."""
        split = self._split()
        return None if split is None else split[0]

    @property
    def mix_effect(self) -> float | None:
        """The part of the rise the slice mix explains (more hard questions)."""
        split = self._split()
        return None if split is None else split[1]

    @property
    def rate_effect(self) -> float | None:
        """The part of the rise on the same mix of questions (the system got worse)."""
        split = self._split()
        return None if split is None else split[2]

    @property
    def mix_slice(self) -> str | None:
        """The slice whose change of share adds most to the mix effect, with its shares."""
        split = self._split()  # (delta, mix_effect, rate_effect)
        names = self._fleet.slice_names[self._row]
        if not names or self.state == "ok" or split is None or split[1] <= 0.25 * max(split[0], 0.0):
            return None  # the mix explains little of this rise: naming a slice would point at noise
        top, base, now = (float(a[0]) for a in top_mix_slice(self._engine, np.array([self._row])))
        return f"{names[int(top)] if int(top) < len(names) else OTHER_SLICE}: {base:.0%} of claims -> {now:.0%}"

    @property
    def claims_counted(self) -> int:
        return self.window_counts.claims

    @property
    def window_minutes(self) -> int:
        onset, last = self._engine.onset[self._row], self._fleet.last_minute
        if onset < 0 or last is None:
            return int(self._fleet.recent_len[self._row])
        return int(last - onset + 1)

    @property
    def onset(self) -> datetime | None:
        onset = int(self._engine.onset[self._row])
        return None if onset < 0 else minute_start(onset)

    @property
    def driving_verdict(self) -> str | None:
        """The failed verdict whose share of claims rose most over the baseline."""
        if self.state == "ok":
            return None
        now, base = self.window_counts, self.baseline_counts
        if not now.claims or not base.claims:
            return None
        rises = {v: getattr(now, v) / now.claims - getattr(base, v) / base.claims for v in FAILED_VERDICT_ORDER}
        return max(rises, key=rises.__getitem__)


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
