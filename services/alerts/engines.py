"""Drift engines: many routes at once on numpy arrays (shape routes × fields), one minute per ``step``.

A per-route ``services.alerts.detector.DriftDetector`` wraps an engine with one route; bench/drift.py
and backtests can drive an engine with thousands of routes, so the benchmark measures the shipped
code. The candidates (``cusum``, ``window``, ``naive``) are described in services/alerts/detector.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from services.rates.intervals import z_value

if TYPE_CHECKING:
    from services.alerts.detector import DetectorConfig

EVENTS, CLAIMS, FAILED, CLAIMS_SQ, FAILED_SQ, FAILED_CLAIMS = range(6)
CORE_FIELDS = 6  # the first six COUNT_FIELDS are all an engine needs to detect
OK, PENDING, FIRING = 0, 1, 2
STATE_NAMES = ("ok", "pending", "firing")


class BaselineEngine:
    """Trailing baseline in whole blocks; minutes that are not 'ok' never enter it."""

    def __init__(self, config: DetectorConfig, n_routes: int, n_fields: int = CORE_FIELDS):
        self.config = config
        self.n_blocks = max(1, config.baseline_minutes // config.block_minutes)
        self.ring = np.zeros((n_routes, self.n_blocks, n_fields))
        self.ring_pos = np.zeros(n_routes, dtype=np.int64)
        self.partial = np.zeros((n_routes, n_fields))
        self.partial_minutes = np.zeros(n_routes, dtype=np.int64)
        self.total = np.zeros((n_routes, n_fields))
        self.state = np.zeros(n_routes, dtype=np.int8)
        self.onset = np.full(n_routes, -1, dtype=np.int64)
        self.evidence = np.zeros((n_routes, n_fields))  # the sums behind the current rate estimate
        self.statistic = np.zeros(n_routes)
        self.z = z_value(config.confidence)
        self.ticks = 0  # steps taken; window rings index by step, so a jump in minutes cannot corrupt them
        self._refresh_baseline()

    def _refresh_baseline(self) -> None:
        t = self.total
        claims = t[:, CLAIMS]
        self.warm = claims >= self.config.min_baseline_claims
        p = np.clip(t[:, FAILED] / np.maximum(claims, 1.0), 1e-4, 1 - 1e-4)
        residual = np.maximum(t[:, FAILED_SQ] - 2 * p * t[:, FAILED_CLAIMS] + p * p * t[:, CLAIMS_SQ], 0.0)
        spread = t[:, CLAIMS_SQ] - claims
        rho = np.where(spread > 0, (residual / (p * (1 - p)) - claims) / np.where(spread > 0, spread, 1.0), 0.0)
        self.rho = np.clip(rho, 0.0, 1.0) if self.config.overdispersion else np.zeros_like(rho)
        self.p0 = p

    def minute_deff(self, x: np.ndarray) -> np.ndarray:
        """Design effect of a sum of answers: 1 + ρ(Σn²/Σn − 1)."""
        claims = x[:, CLAIMS]
        mean_size = np.where(claims > 0, x[:, CLAIMS_SQ] / np.maximum(claims, 1.0), 1.0)
        return 1.0 + self.rho * (mean_size - 1.0)

    def rise_is_large_enough(self, sums: np.ndarray) -> np.ndarray:
        """The rise's estimate reaches min_rise_fraction × threshold and its upper confidence bound reaches threshold."""
        c = self.config
        claims = np.maximum(sums[:, CLAIMS], 1.0)
        delta = sums[:, FAILED] / claims - self.p0
        se = np.sqrt(self.p0 * (1 - self.p0) * self.minute_deff(sums) / claims)
        return (delta >= c.min_rise_fraction * c.threshold) & (delta + self.z * se >= c.threshold)

    def feed_baseline(self, x: np.ndarray) -> None:
        accept = self.state == OK
        self.partial[accept] += x[accept]
        self.partial_minutes += accept
        full = np.flatnonzero(self.partial_minutes >= self.config.block_minutes)
        if full.size:
            pos = self.ring_pos[full]
            self.total[full] += self.partial[full] - self.ring[full, pos]
            self.ring[full, pos] = self.partial[full]
            self.ring_pos[full] = (pos + 1) % self.n_blocks
            self.partial[full] = 0.0
            self.partial_minutes[full] = 0
            self._refresh_baseline()

    def step(self, x: np.ndarray, minute: int) -> None:
        """One minute for every route: x has shape (routes, fields) in COUNT_FIELDS order."""
        self.detect(x, minute)
        self.feed_baseline(x)
        self.ticks += 1

    def detect(self, x: np.ndarray, minute: int) -> None:
        raise NotImplementedError


class CusumEngine(BaselineEngine):
    def __init__(self, config: DetectorConfig, n_routes: int, n_fields: int = CORE_FIELDS):
        super().__init__(config, n_routes, n_fields)
        self.recovery = np.zeros(n_routes)

    def log_likelihood_ratio(self, x: np.ndarray, shift: float) -> np.ndarray:
        """Evidence in one minute for "rate = baseline + shift" over "rate = baseline", per design effect."""
        p0 = self.p0
        p1 = np.minimum(p0 + shift, 1 - 1e-6)
        up, down = np.log(p1 / p0), np.log((1 - p1) / (1 - p0))
        return (x[:, FAILED] * up + (x[:, CLAIMS] - x[:, FAILED]) * down) / self.minute_deff(x)

    def detect(self, x: np.ndarray, minute: int) -> None:
        c = self.config
        llr = self.log_likelihood_ratio(x, c.design_shift or c.design_ratio * c.threshold)
        # resolution weighs "back at baseline" against "baseline + threshold": its midpoint stays at half
        # the threshold whatever rise detection is tuned for, so a rate hovering near the threshold stays open
        back = llr if (c.design_shift or c.design_ratio * c.threshold) == c.threshold else (
            self.log_likelihood_ratio(x, c.threshold))
        firing = self.state == FIRING
        # rising evidence while not firing; onset = first minute after the CUSUM last sat at 0
        fresh = (self.statistic <= 0) & ~firing
        self.onset = np.where(fresh, minute, self.onset)
        self.evidence = np.where(fresh[:, None], 0.0, self.evidence) + x
        s = np.where(firing, self.statistic, np.where(self.warm, np.maximum(self.statistic + llr, 0.0), 0.0))
        self.recovery = np.where(firing, np.maximum(self.recovery - back, 0.0), 0.0)
        fire = (~firing & (s >= c.h) & self.warm & (self.evidence[:, CLAIMS] >= c.min_claims)
                & self.rise_is_large_enough(self.evidence))
        resolve = firing & (self.recovery >= c.resolve_h)
        cleared = (s <= 0) | resolve
        self.statistic = np.where(resolve, 0.0, s)
        self.recovery = np.where(resolve, 0.0, self.recovery)
        pending = (self.state == PENDING) | (s >= c.h * c.pending_fraction)
        state = np.where(fire | (firing & ~resolve), FIRING, np.where(pending & ~cleared, PENDING, OK))
        self.state = state.astype(np.int8)
        self.onset = np.where(cleared, -1, self.onset)
        self.evidence = np.where(cleared[:, None], 0.0, self.evidence)


class WindowEngine(BaselineEngine):
    def __init__(self, config: DetectorConfig, n_routes: int, n_fields: int = CORE_FIELDS):
        super().__init__(config, n_routes, n_fields)
        self.span = max(config.windows)
        self.minutes = np.zeros((n_routes, self.span, n_fields))
        self.sums = np.zeros((len(config.windows), n_routes, n_fields))
        self.run = np.zeros(n_routes, dtype=np.int64)    # consecutive minutes with a window over z_fire
        self.quiet = np.zeros(n_routes, dtype=np.int64)  # consecutive minutes with every window under z_resolve

    def detect(self, x: np.ndarray, minute: int) -> None:
        c = self.config
        pos = self.ticks % self.span
        for i, w in enumerate(c.windows):
            self.sums[i] += x - self.minutes[:, (self.ticks - w) % self.span]
        self.minutes[:, pos] = x
        zs, big = [], []
        for s in self.sums:
            claims = np.maximum(s[:, CLAIMS], 1.0)
            var = self.p0 * (1 - self.p0) * self.minute_deff(s) / claims
            zs.append((s[:, FAILED] / claims - self.p0) / np.sqrt(var))
            big.append(self.rise_is_large_enough(s) & (s[:, CLAIMS] >= c.min_claims))
        z = np.max(zs, axis=0)
        over = self.warm & np.any((np.array(zs) >= c.z_fire) & np.array(big), axis=0)
        firing = self.state == FIRING
        self.run = np.where(over, self.run + 1, 0)
        self.quiet = np.where(firing & (z < c.z_resolve), self.quiet + 1, 0)
        resolve = firing & (self.quiet >= c.resolve_minutes)
        fire = ~firing & (self.run > c.window_for_minutes)
        state = np.where(fire | (firing & ~resolve), FIRING, np.where(over & ~firing, PENDING, OK))
        self.onset = np.where(state == OK, -1, np.where(self.onset < 0, minute - min(c.windows) + 1, self.onset))
        self.state = state.astype(np.int8)
        self.statistic = z
        self.evidence = self.sums[-1].copy()


class NaiveEngine(BaselineEngine):
    def __init__(self, config: DetectorConfig, n_routes: int, n_fields: int = CORE_FIELDS):
        super().__init__(config, n_routes, n_fields)
        self.minutes = np.zeros((n_routes, config.naive_window, n_fields))
        self.sums = np.zeros((n_routes, n_fields))
        self.run = np.zeros(n_routes, dtype=np.int64)

    def detect(self, x: np.ndarray, minute: int) -> None:
        c = self.config
        pos = self.ticks % c.naive_window
        self.sums += x - self.minutes[:, pos]
        self.minutes[:, pos] = x
        claims = self.sums[:, CLAIMS]
        rate = self.sums[:, FAILED] / np.maximum(claims, 1.0)
        over = self.warm & (claims >= c.min_claims) & (rate >= self.p0 + c.threshold)
        self.run = np.where(over, self.run + 1, 0)
        state = np.where(self.run > c.for_minutes, FIRING, np.where(over, PENDING, OK))
        self.onset = np.where(state == OK, -1, np.where(self.onset < 0, minute, self.onset))
        self.state = state.astype(np.int8)
        self.statistic = rate - self.p0
        self.evidence = self.sums.copy()


ENGINES = {"cusum": CusumEngine, "window": WindowEngine, "naive": NaiveEngine}
KINDS = tuple(ENGINES)


def make_engine(config: DetectorConfig, n_routes: int, n_fields: int = CORE_FIELDS) -> BaselineEngine:
    """Many routes at once, for benchmarks and backtests: engine.step(x[routes, fields], minute)."""
    return ENGINES[config.kind](config, n_routes, n_fields)
