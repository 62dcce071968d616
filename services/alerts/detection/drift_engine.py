"""Drift engines: many routes at once on numpy arrays (shape routes × fields), one minute per ``step``.

``DriftEngine`` is what every engine shares: the expectation it tests against (services/alerts/detection/baseline.py),
the sums behind its rate estimate, and a route's state taken out and put back. Each candidate (``cusum``,
``window``, ``naive``; services/alerts/detection/engines.py) adds its own test in ``detect``. A per-route
``services.alerts.detection.detector.DriftDetector`` wraps an engine with one route; bench/drift.py and backtests can
drive an engine with thousands of routes, so the benchmark measures the shipped code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from services.alerts.detection.baseline import RATE_FLOOR, SeasonalBaseline
from services.alerts.detection.columns import CLAIMS, CORE_FIELDS, FAILED, FIRING, MIXED, OK, SEASONAL, TESTED
from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.rows import grow, into_ring, oldest_first, put, take
from services.core.stats import z_value


class DriftEngine:
    """Detection against ``SeasonalBaseline``'s expectation. Each engine tests either the seasonal
    expectation (``mix_adjusted=False``: any rise) or the mix-adjusted one (a rise on the same mix of
    questions: a regression). Sums carry three extra columns after the input fields: the expected
    failures tested, and those under the seasonal and the mix-adjusted expectation.

    Routes join with ``add_rows``; ``row_state`` and ``load_rows`` take one route's state out and put it back
    (``ROW_ARRAYS``, and ``RINGS``: rings indexed by the step count, taken oldest first)."""

    ROW_ARRAYS = {"state": 0, "onset": 0, "evidence": 0, "evidence_slices": 0, "statistic": 0}
    RINGS: dict[str, int] = {}  # ring -> its length; each is routes × length × …, written at ticks % length

    def __init__(
        self,
        config: DetectorConfig,
        n_routes: int,
        n_fields: int = CORE_FIELDS,
        n_slices: int = 1,
        mix_adjusted: bool = True,
    ):
        self.config = config
        self.n_fields = n_fields
        self.mix_adjusted = mix_adjusted
        self.baseline = SeasonalBaseline(config, n_routes, n_fields, n_slices)
        self.state = np.zeros(n_routes, dtype=np.int8)
        self.onset = np.full(n_routes, -1, dtype=np.int64)
        self.evidence = np.zeros((n_routes, n_fields + 3))  # the sums behind the current rate estimate
        self.evidence_slices = np.zeros((n_routes, n_slices, 2))
        self.statistic = np.zeros(n_routes)
        self.expected = self.baseline.expect(0)
        self.z = z_value(config.confidence)
        self.ticks = 0  # steps taken; window rings index by step, so a jump in minutes cannot corrupt them

    @property
    def warm(self) -> np.ndarray:
        return self.baseline.warm

    @property
    def n_routes(self) -> int:
        return self.state.shape[0]

    def add_rows(self, k: int) -> None:
        """``k`` new routes, as a fresh engine's (they start at the next step)."""
        grow(self, {**self.ROW_ARRAYS, **dict.fromkeys(self.RINGS, 0)}, k, {"onset": -1})
        self.baseline.add_rows(k)
        e = self.expected
        self.expected = type(e)(*(np.concatenate([a, np.zeros(k)]) for a in (e.total, e.mixed, e.mix_now, e.margin)))

    def row_state(self, row: int) -> dict[str, Any]:
        rings = {
            name: oldest_first(getattr(self, name)[row], (self.ticks - 1) % length)
            for name, length in self.RINGS.items()
        }
        return {**take(self, self.ROW_ARRAYS, row), **rings, "baseline": self.baseline.row_state(row)}

    def load_rows(self, rows: list[int], states: list[dict[str, Any]], minute: int) -> None:
        for row, state in zip(rows, states):
            put(self, self.ROW_ARRAYS, row, state)
            put(
                self,
                dict.fromkeys(self.RINGS, 0),
                row,
                {
                    name: into_ring(np.asarray(state[name]), (self.ticks - 1) % length)
                    for name, length in self.RINGS.items()
                },
            )
        self.baseline.load_rows(rows, [state["baseline"] for state in states], minute)

    @property
    def total(self) -> np.ndarray:
        """The trailing level's sums (the input fields)."""
        return self.baseline.total

    def rise_is_large_enough(self, sums: np.ndarray) -> np.ndarray:
        """The rise's estimate reaches min_rise_fraction × threshold and its upper confidence bound reaches
        threshold."""
        c = self.config
        claims = np.maximum(sums[:, CLAIMS], 1.0)
        expected = np.clip(sums[:, self.n_fields + TESTED] / claims, RATE_FLOOR, 1 - RATE_FLOOR)
        delta = sums[:, FAILED] / claims - expected
        se = np.sqrt(expected * (1 - expected) * self.baseline.minute_deff(sums) / claims)
        fires: np.ndarray = (delta >= c.min_rise_fraction * c.threshold) & (delta + self.z * se >= c.threshold)
        return fires

    def detectable_rise(self) -> np.ndarray:
        """Per route, the smallest rise it detects within an hour on average: here the threshold (and the learning
        margin); the cusum knows its run lengths."""
        out: np.ndarray = self.config.threshold + self.baseline.margin
        return out

    def step(self, x: np.ndarray, minute: int, slices: np.ndarray | None = None) -> None:
        """One minute for every route: x has shape (routes, fields) in COUNT_FIELDS order; slices, if
        given, (routes, slices, 2) with each slice's claims and failed claims."""
        self.baseline.roll(minute)
        expected = self.expected = self.baseline.expect(minute, slices)
        # while learning, the null a rise is tested against includes the margin the unknown time of day needs
        tested = np.clip(
            (expected.mixed if self.mix_adjusted else expected.total) + expected.margin, RATE_FLOOR, 1 - RATE_FLOOR
        )
        claims = x[:, CLAIMS]
        augmented = np.concatenate(
            [x, np.stack([claims * tested, claims * expected.total, claims * expected.mixed], axis=1)], axis=1
        )
        onset = self.onset
        self.detect(augmented, tested, minute)
        if slices is not None:
            restarted = (self.onset != onset)[:, None, None]
            self.evidence_slices = np.where(restarted, 0.0, self.evidence_slices) + slices
        self.evidence_slices[self.onset < 0] = 0.0
        self.baseline.admit(x, slices, expected.mix_now, self.state)
        self.ticks += 1

    def detect(self, x: np.ndarray, expected: np.ndarray, minute: int) -> None:
        raise NotImplementedError


def mix_split(sums: np.ndarray, n_fields: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(total rise, mix effect, rate effect) of each route's sums; mix + rate = total."""
    claims = np.maximum(sums[:, CLAIMS], 1.0)
    rate = sums[:, FAILED] / claims
    seasonal, mixed = sums[:, n_fields + SEASONAL] / claims, sums[:, n_fields + MIXED] / claims
    return rate - seasonal, mixed - seasonal, rate - mixed


def mix_shift_state(total: DriftEngine, regression: DriftEngine, previous: np.ndarray) -> np.ndarray:
    """The state of a ``mix_shift`` alert per route: the rise of ``total`` (not mix-adjusted) while most of it
    (``mix_share``) is mix and ``regression`` is not firing; once open it stays open while the rise lasts."""
    rise, mix, _ = mix_split(total.evidence, total.n_fields)
    mostly_mix = (rise > 0) & (mix >= total.config.mix_share * rise)
    open_ = (total.state != OK) & (regression.state != FIRING) & (mostly_mix | (previous != OK))
    return np.where(open_, total.state, OK).astype(np.int8)


def top_mix_slice(engine: DriftEngine, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per route (of every route, or of ``rows``): the slice whose change of share adds most to the mix effect,
    its baseline share and its share in the evidence."""
    b, at = engine.baseline, slice(None) if rows is None else rows
    base = b.slice_claims[at] / np.maximum(b.slice_claims[at].sum(axis=1, keepdims=True), 1.0)
    now_claims = engine.evidence_slices[at][..., 0]
    now = now_claims / np.maximum(now_claims.sum(axis=1, keepdims=True), 1.0)
    contribution = (now - base) * (b.slice_rate[at] - b.baseline_standard[at][:, None])
    top = np.argmax(contribution, axis=1)
    rows = np.arange(top.size)
    return top, base[rows, top], now[rows, top]
