"""Per-route drift detection on minute buckets of the claim-level hallucination rate.

Shaped like river's detectors: ``__init__`` stores parameters, ``update(counts,
now)`` changes state, results are properties. The clock is an argument.

Each detector is a thin single-route wrapper around an *engine* (services/alerts/engines.py)
that runs many routes at once on numpy arrays (shape routes × fields). The live evaluator uses
one detector per route; bench/drift.py and backtests can drive an engine with
thousands of routes, so the benchmark measures exactly the shipped code.

Candidates (all share the baseline and the interface; bench/drift.py compares them):
- ``cusum``: quasi-binomial CUSUM of "rate = baseline + 1.25 × threshold" (``design_ratio``) against
  "rate = baseline", each minute's log-likelihood ratio divided by that minute's
  design effect (intra-answer correlation estimated from the baseline's Σ sums).
  It resolves through a mirror CUSUM, which gives hysteresis. Shipped default.
  Tuned for 2.5 points rather than 2 because the +2 and +3 delay targets both bind:
  a CUSUM's drift on a rise d when designed for s is ∝ s(d − s/2), so 2.5 gives up 6%
  at +2 to gain 9% at +3, which buys a higher h (fewer false alarms) within both.
- ``window``: z-tests of 10/30/60-minute windows against the baseline, with a ``for``.
- ``naive``: the 30-minute rate above baseline + threshold for 10 minutes (a
  Prometheus rule); it resolves as soon as the condition is false.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields as dc_fields, replace
from datetime import datetime, timezone

import numpy as np

# The engine classes and FIRING are named here too: evaluator checkpoints pickled before engines.py existed
# refer to services.alerts.detector.CusumEngine and its siblings, and bench/drift.py imports from here.
from services.alerts.engines import (  # noqa: F401
    FIRING, KINDS, STATE_NAMES, CusumEngine, NaiveEngine, WindowEngine, make_engine,
)
from services.rates.intervals import FAILED_VERDICT_FIELDS, Counts, Interval, ratio_interval
from services.store.rates import COUNT_FIELDS

MAX_GAP_MINUTES = 90  # longer gaps replay this many empty minutes; enough to flush every window


CONFIG_RULES = {  # name: (check(value, config), what a valid value is)
    "threshold": (lambda v, c: 0 < v < 1, "a fraction between 0 and 1, e.g. 0.02 for 2 points"),
    "min_claims": (lambda v, c: v >= 1, "at least 1"),
    "block_minutes": (lambda v, c: v >= 1, "at least 1"),
    "baseline_minutes": (lambda v, c: v >= c.block_minutes, "at least block_minutes"),
    "min_baseline_claims": (lambda v, c: v >= 1, "at least 1"),
    "confidence": (lambda v, c: 0.5 <= v < 1, "in [0.5, 1)"),
    "min_rise_fraction": (lambda v, c: 0 <= v <= 1, "in [0, 1]"),
    "rate_window_minutes": (lambda v, c: v >= 1, "at least 1"),
    "h": (lambda v, c: v > 0, "positive"),
    "pending_fraction": (lambda v, c: 0 < v <= 1, "in (0, 1]"),
    "resolve_h": (lambda v, c: v > 0, "positive"),
    "design_shift": (lambda v, c: v is None or 0 < v < 1, "None or a fraction between 0 and 1"),
    "design_ratio": (lambda v, c: 0 < v and c.threshold * v < 1, "positive, with threshold × design_ratio below 1"),
    "windows": (lambda v, c: len(v) > 0 and all(1 <= w <= MAX_GAP_MINUTES for w in v), f"minutes in [1, {MAX_GAP_MINUTES}]"),
    "z_fire": (lambda v, c: v > 0, "positive"),
    "window_for_minutes": (lambda v, c: v >= 0, "0 or more"),
    "z_resolve": (lambda v, c: v < c.z_fire, "below z_fire"),
    "resolve_minutes": (lambda v, c: v >= 1, "at least 1"),
    "naive_window": (lambda v, c: 1 <= v <= MAX_GAP_MINUTES, f"in [1, {MAX_GAP_MINUTES}]"),
    "for_minutes": (lambda v, c: v >= 0, "0 or more"),
}


@dataclass(frozen=True)
class DetectorConfig:
    """Defaults chosen by bench/drift.py (60 answers/min, ~8% base rate, correlation 0.1)."""

    kind: str = "cusum"
    threshold: float = 0.02            # minimum rise over the baseline, absolute
    min_claims: int = 200              # claims behind a rise before it may fire
    baseline_minutes: int = 24 * 60    # trailing baseline, frozen while pending or firing
    block_minutes: int = 60            # the baseline moves in whole blocks; the current block is excluded
    min_baseline_claims: int = 50_000  # warm-up: no alarms before the baseline holds this many claims
    confidence: float = 0.95           # a fired rise must not be credibly smaller than threshold …
    min_rise_fraction: float = 0.75    # … and its estimate must reach this fraction of it
    overdispersion: bool = True        # False = treat claims as independent (ablation only)
    rate_window_minutes: int = 30      # window of `rate` while nothing is pending
    h: float = 11.25                   # cusum: fire when the log-likelihood ratio reaches h
    pending_fraction: float = 0.5      # cusum: pending from h * pending_fraction until the CUSUM is back at 0
    resolve_h: float = 5.0             # cusum: resolve when the mirror CUSUM (back at baseline) reaches this
    design_shift: float | None = None  # cusum: the rise it is tuned for; None = design_ratio × threshold
    design_ratio: float = 1.25         # cusum: 1.25 balances the +2 and +3 delay targets (bench/drift.py)
    windows: tuple[int, ...] = (10, 30, 60)  # window: test windows in minutes
    z_fire: float = 4.0                # window: z of any window against the baseline …
    window_for_minutes: int = 3        # … held for this many minutes
    z_resolve: float = 1.0             # window: resolve when every window is below this z …
    resolve_minutes: int = 10          # … for this many minutes
    naive_window: int = 30             # naive: Prometheus-style rule window
    for_minutes: int = 10              # naive: `for` duration

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"detector kind {self.kind!r} is unknown; use one of {', '.join(KINDS)}")
        for name, (ok, expected) in CONFIG_RULES.items():
            value = getattr(self, name)
            try:
                valid = ok(value, self)
            except TypeError:
                valid = False
            if not valid:
                raise ValueError(f"detector setting {name}={value!r}: must be {expected}")

    def __setstate__(self, state: dict) -> None:
        # Evaluator checkpoints pickle detectors with their config. One pickled before design_ratio
        # existed was tuned for the threshold itself and keeps that, so it resumes exactly.
        self.__dict__.update({"design_ratio": 1.0, **state})

    @classmethod
    def from_mapping(cls, values: dict) -> "DetectorConfig":
        known = {f.name for f in dc_fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown detector setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        values = {k: tuple(v) if k == "windows" else v for k, v in values.items()}
        return cls(**values)


def minute_number(now: datetime) -> int:
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise ValueError(f"now must be a timezone-aware datetime, got {now!r}")
    return int(now.timestamp() // 60)


def minute_start(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, tz=timezone.utc)


class DriftDetector:
    """One route. Call ``update`` once per minute bucket, in event-time order."""

    kind = "cusum"

    def __init__(self, config: DetectorConfig | None = None):
        self.config = replace(config or DetectorConfig(), kind=self.kind)
        self._engine = make_engine(self.config, 1, len(COUNT_FIELDS))
        self._last_minute: int | None = None
        self._recent: deque[np.ndarray] = deque(maxlen=self.config.rate_window_minutes)

    def update(self, counts: Counts, now: datetime) -> "DriftDetector":
        if not isinstance(counts, Counts):
            raise TypeError(f"counts must be a Counts, got {type(counts).__name__}")
        minute = minute_number(now)
        if self._last_minute is not None and minute <= self._last_minute:
            raise ValueError(f"now={now.isoformat()} is not after the last bucket {minute_start(self._last_minute).isoformat()}; "
                             "feed minute buckets in event-time order")
        if self._last_minute is not None:  # empty minutes in between still count as time
            empty = np.zeros((1, len(COUNT_FIELDS)))
            for skipped in range(max(self._last_minute + 1, minute - MAX_GAP_MINUTES), minute):
                self._step(empty, skipped)
        self._step(counts.as_array()[None, :], minute)
        return self

    def _step(self, x: np.ndarray, minute: int) -> None:
        self._engine.step(x, minute)
        self._recent.append(x[0])
        self._last_minute = minute

    @property
    def state(self) -> str:
        return STATE_NAMES[int(self._engine.state[0])]

    @property
    def drift_detected(self) -> bool:
        """True while the alarm condition holds (state firing)."""
        return self.state == "firing"

    @property
    def warm(self) -> bool:
        return bool(self._engine.warm[0])

    @property
    def statistic(self) -> float:
        return float(self._engine.statistic[0])

    @property
    def window_counts(self) -> Counts:
        """The minutes behind `rate`: since onset while pending/firing, else the recent window."""
        if self.state != "ok":
            return Counts.from_array(self._engine.evidence[0])
        return Counts.from_array(np.sum(self._recent, axis=0)) if self._recent else Counts.zero()

    @property
    def baseline_counts(self) -> Counts:
        return Counts.from_array(self._engine.total[0])

    @property
    def rate(self) -> float | None:
        return self.window_counts.rate

    @property
    def rate_interval(self) -> Interval | None:
        return ratio_interval(self.window_counts)

    @property
    def baseline(self) -> float | None:
        return self.baseline_counts.rate

    @property
    def baseline_interval(self) -> Interval | None:
        return ratio_interval(self.baseline_counts)

    @property
    def delta(self) -> float | None:
        rate, baseline = self.rate, self.baseline
        return None if rate is None or baseline is None else rate - baseline

    @property
    def claims_counted(self) -> int:
        return self.window_counts.claims

    @property
    def window_minutes(self) -> int:
        onset = self._engine.onset[0]
        if onset < 0 or self._last_minute is None:
            return len(self._recent)
        return int(self._last_minute - onset + 1)

    @property
    def onset(self) -> datetime | None:
        onset = int(self._engine.onset[0])
        return None if onset < 0 else minute_start(onset)

    @property
    def driving_verdict(self) -> str | None:
        """The failed verdict whose share of claims rose most over the baseline."""
        if self.state == "ok":
            return None
        now, base = self.window_counts, self.baseline_counts
        if not now.claims or not base.claims:
            return None
        rises = {v: getattr(now, v) / now.claims - getattr(base, v) / base.claims for v in FAILED_VERDICT_FIELDS}
        return max(rises, key=rises.get)


class CusumDetector(DriftDetector):
    kind = "cusum"


class WindowDetector(DriftDetector):
    kind = "window"


class NaiveDetector(DriftDetector):
    kind = "naive"


DETECTORS = {"cusum": CusumDetector, "window": WindowDetector, "naive": NaiveDetector}
DEFAULT_CONFIG = DetectorConfig()
DEFAULT_DETECTOR = DETECTORS[DEFAULT_CONFIG.kind]


def make_detector(config: DetectorConfig | None = None) -> DriftDetector:
    config = config or DEFAULT_CONFIG
    return DETECTORS[config.kind](config)
