"""One route of one drift engine as an alert reads it (``RouteView``), and why its expectation is what it is.

A view reads its fleet's arrays when a figure is asked for (services/alerts/detection/fleet.py steps them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import numpy as np

from services.alerts.detection.baseline import SeasonalBaseline
from services.alerts.detection.columns import CLAIMS, SEASONAL, STATE_NAMES
from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.drift_engine import DriftEngine, mix_split, top_mix_slice
from services.alerts.detection.minutes import minute_start
from services.contract.model import FAILED_VERDICT_ORDER
from services.rates.intervals import Counts, Interval, ratio_interval

OTHER_SLICE = "(other)"  # the name of the slices after the ones a fleet tells apart (fleet.MAX_SLICES)


class FleetRows(Protocol):
    """What a view reads of its fleet (services.alerts.detection.fleet.DriftFleet)."""

    slice_names: list[list[str]]
    last_minute: int | None
    recent_len: np.ndarray

    def recent_sums(self, engine: DriftEngine, rows: np.ndarray | None = None) -> np.ndarray: ...


def learning_basis(history_hours: float, config: DetectorConfig, margin: float | None = None) -> str:
    """What a learning baseline rests on, in words (alerts and the route page say it alike): ``margin`` is what the
    route's finished hours have earned (None: the prior, before any)."""
    margin = config.learning_margin if margin is None else margin
    clear = (
        f"a rise must clear it by {margin * 100:.2g} pt more until then (the spread its hours show)"
        if margin * 100 >= 0.005
        else "its hours show no spread beyond noise, so a rise need not clear it by more"
    )
    return (
        f"learning: {history_hours:.0f} h of history, under the full day a time-of-day profile needs; "
        f"expected is the last {config.learning_level_minutes // 60} h level, and {clear}"
    )


def expected_basis(engine: DriftEngine, row: int) -> str:
    """Why a route's expectation is what it is (and, while it warms up, that nothing alerts yet)."""
    b = engine.baseline
    if b.warm[row]:
        return _basis(b, row)
    return (
        f"warming up: no drift alert before {b.config.min_baseline_claims:,} claims of history "
        f"({b.history_claims[row]:,.0f} so far); {_basis(b, row)}"
    )


def _basis(b: SeasonalBaseline, row: int) -> str:
    if b.learning[row]:
        return learning_basis(float(b.history_hours[row]), b.config, float(b.margin[row]))
    days = b.history_blocks[row] / b.per_day
    return (
        f"time of day: the {b.config.baseline_minutes // 60} h level plus this hour's offset from {days:.1f} days "
        "of history"
    )


class RouteView:
    """One route of one engine as an alert reads it: state, rate, expectation and the parts of the rise.

    Its figures are read when asked for, from the fleet as it is then; take a fresh view after a step."""

    __slots__ = ("_fleet", "_engine", "_row", "_state")

    def __init__(self, fleet: FleetRows, engine: DriftEngine, row: int, state: int):
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
    def detectable_rise(self) -> float | None:
        """The smallest rise the route detects within an hour on average, where its volume (or learning margin)
        makes that more than the threshold: a quiet route's silence is not health. None: the threshold itself, or
        no baseline yet, or still warming up (the basis says so)."""
        if self.baseline is None or not self.warm:
            return None
        rise = float(self._engine.detectable_rise()[self._row])
        return rise if rise > self._engine.config.threshold + 1e-9 else None

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
