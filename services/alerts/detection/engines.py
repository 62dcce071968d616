"""The drift engines to choose from (``drift.detector.kind``), each a ``DriftEngine`` with a test of its own.

The candidates (``cusum``, ``window``, ``naive``) are described in services/alerts/detection/detector.py; each reads the
shared settings from ``config`` and its own from ``config.cusum``, ``config.window`` or ``config.naive``
(services/alerts/detection/config.py). What they share is services/alerts/detection/drift_engine.py's.
"""

from __future__ import annotations

import numpy as np

from services.alerts.detection.baseline import RATE_FLOOR
from services.alerts.detection.columns import CLAIMS, CORE_FIELDS, FAILED, FIRING, OK, PENDING, TESTED
from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.drift_engine import DriftEngine
from services.alerts.detection.run_length import minimum_detectable_rise, threshold


class CusumEngine(DriftEngine):
    ROW_ARRAYS = {**DriftEngine.ROW_ARRAYS, "recovery": 0}

    def __init__(
        self,
        config: DetectorConfig,
        n_routes: int,
        n_fields: int = CORE_FIELDS,
        n_slices: int = 1,
        mix_adjusted: bool = True,
    ):
        super().__init__(config, n_routes, n_fields, n_slices, mix_adjusted)
        self.recovery = np.zeros(n_routes)
        self._h, self._h_revision = np.zeros(0), -1
        self._rise, self._rise_revision = np.zeros(0), -1

    @property
    def h(self) -> np.ndarray:
        """Each route's threshold: the one its stated false-alarm rate asks for at its volume, clustering and
        expectation error (services/alerts/detection/run_length.py), unless ``cusum.h`` fixes one for all."""
        b, e = self.baseline, self.config.cusum
        if self._h_revision != b.revision or self._h.shape[0] != self.n_routes:
            if e.h is not None:
                self._h = np.full(self.n_routes, e.h)
            else:
                sd = np.maximum(b.minute_sd, 1e-9)
                design = e.design(self.config.threshold)
                self._h = threshold(design / sd, self.config.minutes_per_false_alarm, b.expectation_sd / sd)
            self._h_revision = b.revision
        return self._h

    def detectable_rise(self) -> np.ndarray:
        """Per route, the smallest rise detected within an hour on average at its volume and threshold (never below
        the threshold, which a rise must reach), plus the learning margin it must clear first."""
        b = self.baseline  # derived once per baseline refresh, as h is: views ask for it route by route
        if self._rise_revision != b.revision or self._rise.shape[0] != self.n_routes:
            sd = np.maximum(b.minute_sd, 1e-9)
            rise = minimum_detectable_rise(self.config.cusum.design(self.config.threshold) / sd, self.h, 60) * sd
            self._rise, self._rise_revision = np.maximum(rise, self.config.threshold) + b.margin, b.revision
        return self._rise

    def log_likelihood_ratio(self, x: np.ndarray, p0: np.ndarray, shift: float) -> np.ndarray:
        """Evidence in one minute for "rate = expected + shift" over "rate = expected", per design effect."""
        p1 = np.minimum(p0 + shift, 1 - 1e-6)
        up, down = np.log(p1 / p0), np.log((1 - p1) / (1 - p0))
        llr: np.ndarray = (x[:, FAILED] * up + (x[:, CLAIMS] - x[:, FAILED]) * down) / self.baseline.minute_deff(x)
        return llr

    def detect(self, x: np.ndarray, expected: np.ndarray, minute: int) -> None:
        c, e = self.config, self.config.cusum
        design, h = e.design(c.threshold), self.h
        llr = self.log_likelihood_ratio(x, expected, design)
        # resolution weighs "back at expected" against "expected + threshold": its midpoint stays at half
        # the threshold whatever rise detection is tuned for, so a rate hovering near the threshold stays open
        back = llr if design == c.threshold else self.log_likelihood_ratio(x, expected, c.threshold)
        firing = self.state == FIRING
        # rising evidence while not firing; onset = first minute after the CUSUM last sat at 0
        fresh = (self.statistic <= 0) & ~firing
        self.onset = np.where(fresh, minute, self.onset)
        self.evidence = np.where(fresh[:, None], 0.0, self.evidence) + x
        s = np.where(firing, self.statistic, np.where(self.warm, np.maximum(self.statistic + llr, 0.0), 0.0))
        self.recovery = np.where(firing, np.maximum(self.recovery - back, 0.0), 0.0)
        fire = (
            ~firing
            & (s >= h)
            & self.warm
            & (self.evidence[:, CLAIMS] >= c.min_claims)
            & self.rise_is_large_enough(self.evidence)
        )
        resolve = firing & (self.recovery >= e.resolve_h)
        cleared = (s <= 0) | resolve
        self.statistic = np.where(resolve, 0.0, s)
        self.recovery = np.where(resolve, 0.0, self.recovery)
        pending = (self.state == PENDING) | (s >= h * e.pending_fraction)
        state = np.where(fire | (firing & ~resolve), FIRING, np.where(pending & ~cleared, PENDING, OK))
        self.state = state.astype(np.int8)
        self.onset = np.where(cleared, -1, self.onset)
        self.evidence = np.where(cleared[:, None], 0.0, self.evidence)


class WindowEngine(DriftEngine):
    ROW_ARRAYS = {**DriftEngine.ROW_ARRAYS, "sums": 1, "run": 0, "quiet": 0}

    def __init__(
        self,
        config: DetectorConfig,
        n_routes: int,
        n_fields: int = CORE_FIELDS,
        n_slices: int = 1,
        mix_adjusted: bool = True,
    ):
        super().__init__(config, n_routes, n_fields, n_slices, mix_adjusted)
        self.span = max(config.window.windows)
        self.RINGS = {"minutes": self.span}
        self.minutes = np.zeros((n_routes, self.span, n_fields + 3))
        self.sums = np.zeros((len(config.window.windows), n_routes, n_fields + 3))
        self.run = np.zeros(n_routes, dtype=np.int64)  # consecutive minutes with a window over z_fire
        self.quiet = np.zeros(n_routes, dtype=np.int64)  # consecutive minutes with every window under z_resolve

    def detect(self, x: np.ndarray, expected: np.ndarray, minute: int) -> None:
        c, e = self.config, self.config.window
        pos = self.ticks % self.span
        for i, w in enumerate(e.windows):
            self.sums[i] += x - self.minutes[:, (self.ticks - w) % self.span]
        self.minutes[:, pos] = x
        zs, big = [], []
        for s in self.sums:
            claims = np.maximum(s[:, CLAIMS], 1.0)
            p0 = np.clip(s[:, self.n_fields + TESTED] / claims, RATE_FLOOR, 1 - RATE_FLOOR)
            var = p0 * (1 - p0) * self.baseline.minute_deff(s) / claims
            zs.append((s[:, FAILED] / claims - p0) / np.sqrt(var))
            big.append(self.rise_is_large_enough(s) & (s[:, CLAIMS] >= c.min_claims))
        z = np.max(zs, axis=0)
        over = self.warm & np.any((np.array(zs) >= e.z_fire) & np.array(big), axis=0)
        firing = self.state == FIRING
        self.run = np.where(over, self.run + 1, 0)
        self.quiet = np.where(firing & (z < e.z_resolve), self.quiet + 1, 0)
        resolve = firing & (self.quiet >= e.resolve_minutes)
        fire = ~firing & (self.run > e.window_for_minutes)
        state = np.where(fire | (firing & ~resolve), FIRING, np.where(over & ~firing, PENDING, OK))
        self.onset = np.where(state == OK, -1, np.where(self.onset < 0, minute - min(e.windows) + 1, self.onset))
        self.state = state.astype(np.int8)
        self.statistic = z
        self.evidence = self.sums[-1].copy()


class NaiveEngine(DriftEngine):
    ROW_ARRAYS = {**DriftEngine.ROW_ARRAYS, "sums": 0, "run": 0}

    def __init__(
        self,
        config: DetectorConfig,
        n_routes: int,
        n_fields: int = CORE_FIELDS,
        n_slices: int = 1,
        mix_adjusted: bool = True,
    ):
        super().__init__(config, n_routes, n_fields, n_slices, mix_adjusted)
        self.RINGS = {"minutes": config.naive.naive_window}
        self.minutes = np.zeros((n_routes, config.naive.naive_window, n_fields + 3))
        self.sums = np.zeros((n_routes, n_fields + 3))
        self.run = np.zeros(n_routes, dtype=np.int64)

    def detect(self, x: np.ndarray, expected: np.ndarray, minute: int) -> None:
        c, e = self.config, self.config.naive
        pos = self.ticks % e.naive_window
        self.sums += x - self.minutes[:, pos]
        self.minutes[:, pos] = x
        claims = np.maximum(self.sums[:, CLAIMS], 1.0)
        rise = (self.sums[:, FAILED] - self.sums[:, self.n_fields + TESTED]) / claims
        over = self.warm & (self.sums[:, CLAIMS] >= c.min_claims) & (rise >= c.threshold)
        self.run = np.where(over, self.run + 1, 0)
        state = np.where(self.run > e.for_minutes, FIRING, np.where(over, PENDING, OK))
        self.onset = np.where(state == OK, -1, np.where(self.onset < 0, minute, self.onset))
        self.state = state.astype(np.int8)
        self.statistic = rise
        self.evidence = self.sums.copy()


ENGINES = {"cusum": CusumEngine, "window": WindowEngine, "naive": NaiveEngine}  # one per config.KINDS, in its order


def make_engine(
    config: DetectorConfig, n_routes: int, n_fields: int = CORE_FIELDS, n_slices: int = 1, mix_adjusted: bool = True
) -> DriftEngine:
    """Many routes at once, for benchmarks and backtests: engine.step(x[routes, fields], minute, slices)."""
    return ENGINES[config.kind](config, n_routes, n_fields, n_slices, mix_adjusted)
