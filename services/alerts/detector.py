"""Per-route drift detection on minute buckets of the claim-level hallucination rate.

Shaped like river's detectors: ``__init__`` stores parameters, ``update(counts, now, slices)``
changes state, results are properties: ``state`` and ``drift_detected``, and the figures an alert
carries on the two views, ``regression`` and ``mix_shift`` (``RouteView``). The clock is an argument.
The settings, the shared part and each engine's own, are services/alerts/config.py's.

Each detector is a thin single-route wrapper around two *engines* (services/alerts/engines.py) that
run many routes at once on numpy arrays; bench/drift.py and backtests drive the same engines with
thousands of routes, so the benchmark measures the shipped code. Both engines test each minute
against an expectation (services/alerts/baseline.py): the route's trailing level plus its
time-of-day offset. The ``regression`` engine also adjusts it for the minute's mix of slices (query
type × stakes), so it pages only when the route got worse on the same questions; the other tests
the unadjusted expectation, and a rise there that is mostly mix is a ``mix_shift`` (a warning).

Candidates (all share the expectation and the interface; bench/drift.py compares them):
- ``cusum``: quasi-binomial CUSUM of "rate = expected + 1.25 × threshold" (``design_ratio``) against
  "rate = expected", each minute's log-likelihood ratio divided by that minute's design effect
  (intra-answer correlation estimated from the level's Σ sums). It resolves through a mirror
  CUSUM, which gives hysteresis. Shipped default. Tuned for 2.5 points rather than 2 because the +2
  and +3 delay targets both bind: a CUSUM's drift on a rise d when designed for s is ∝ s(d − s/2).
- ``window``: z-tests of 10/30/60-minute windows against the expectation, with a ``for``.
- ``naive``: the 30-minute rate at least threshold over the expectation for 10 minutes (a
  Prometheus rule); it resolves as soon as the condition is false.
"""
from __future__ import annotations

from collections import deque
from datetime import datetime, timezone

import numpy as np

from services.alerts.config import MAX_GAP_MINUTES, DetectorConfig
from services.alerts.engines import (
    CLAIMS, SEASONAL, STATE_NAMES, DriftEngine, make_engine, mix_shift_state, mix_split, top_mix_slice,
)
from services.contract.model import FAILED_VERDICT_ORDER
from services.rates.intervals import Counts, Interval, ratio_interval
from services.store.rates import COUNT_FIELDS


def minute_number(now: datetime) -> int:
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise ValueError(f"now must be a timezone-aware datetime, got {now!r}")
    return int(now.timestamp() // 60)


def minute_start(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, tz=timezone.utc)


def history_hours_between(first: datetime, now: datetime, config: DetectorConfig) -> float:
    """Hours of history a detector that started at ``first`` holds at ``now``: its finished blocks, as it counts them."""
    block = lambda t: minute_number(t) // config.block_minutes  # noqa: E731
    return max(block(now) - block(first), 0) * config.block_minutes / 60


def baseline_status(history_hours: float, config: DetectorConfig) -> dict:
    """Whether a route's baseline is still learning (under a day of history), from its hours of history."""
    learning = history_hours < 24
    return {"learning": learning, "history_hours": round(history_hours, 1),
            "basis": learning_basis(history_hours, config) if learning else "time of day: a full day of history or more"}


def learning_basis(history_hours: float, config: DetectorConfig) -> str:
    """What a learning baseline rests on, in words (alerts and the route page say it alike)."""
    return (f"learning: {history_hours:.0f} h of history, under the full day a time-of-day profile needs; "
            f"expected is the last {config.learning_level_minutes // 60} h level, and a rise must clear it "
            f"by {config.learning_margin * 100:.2g} pt more until then")


MAX_SLICES = 12  # slices a detector tells apart by name; later ones share an "other" slice
OTHER_SLICE = "(other)"


class RouteView:
    """One route of one engine as an alert reads it: state, rate, expectation and the parts of the rise.

    Its figures are read when asked for, from the detector as it is then; take a fresh view after an update."""

    __slots__ = ("_detector", "_engine", "_state")

    def __init__(self, detector: DriftDetector, engine: DriftEngine, state: int):
        self._detector, self._engine, self._state = detector, engine, state

    @property
    def state(self) -> str:
        return STATE_NAMES[self._state]

    @property
    def warm(self) -> bool:
        return bool(self._engine.warm[0])

    @property
    def statistic(self) -> float:
        return float(self._engine.statistic[0])

    @property
    def window_counts(self) -> Counts:
        """The minutes behind `rate`: since onset while pending/firing, else the recent window."""
        return Counts.from_array(self._sums[: self._engine.n_fields])

    @property
    def _sums(self) -> np.ndarray:
        if self.state != "ok" and self._engine.onset[0] >= 0:
            return self._engine.evidence[0]
        return self._detector.recent_sums(self._engine)

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
        return None if sums[CLAIMS] <= 0 or self.baseline is None else float(
            sums[self._engine.n_fields + SEASONAL] / sums[CLAIMS])

    @property
    def learning(self) -> bool:
        """Under a day of history: a local level and a wider test, no time-of-day profile yet."""
        return self._engine.baseline.learning

    @property
    def history_hours(self) -> float:
        return self._engine.baseline.history_hours

    @property
    def expected_basis(self) -> str:
        """Why the expectation is what it is."""
        b = self._engine.baseline
        if b.learning:
            return learning_basis(b.history_hours, b.config)
        days = b.history_blocks / b.per_day
        return f"time of day: the {b.config.baseline_minutes // 60} h level plus this hour's offset from {days:.1f} days of history"

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
        mix, rise = self.mix_effect, self.delta
        if not self._detector.slice_names or self.state == "ok" or mix is None or mix <= 0.25 * max(rise, 0.0):
            return None  # the mix explains little of this rise: naming a slice would point at noise
        top, base, now = (float(a[0]) for a in top_mix_slice(self._engine))
        names = self._detector.slice_names
        return f"{names[int(top)] if int(top) < len(names) else OTHER_SLICE}: {base:.0%} of claims -> {now:.0%}"

    @property
    def claims_counted(self) -> int:
        return self.window_counts.claims

    @property
    def window_minutes(self) -> int:
        onset, last = self._engine.onset[0], self._detector.last_minute
        if onset < 0 or last is None:
            return len(self._detector.recent)
        return int(last - onset + 1)

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
        rises = {v: getattr(now, v) / now.claims - getattr(base, v) / base.claims for v in FAILED_VERDICT_ORDER}
        return max(rises, key=rises.get)


class DriftDetector:
    """One route. Call ``update`` once per minute bucket, in event-time order.

    Two engines of ``config.kind`` watch it: ``regression`` tests the mix-adjusted expectation (worse
    on the same questions: pages), and a second tests the seasonal expectation without the mix
    adjustment; a rise there that is mostly mix is a ``mix_shift`` (a warning). ``state`` is the
    regression's."""

    def __init__(self, config: DetectorConfig | None = None):
        self.config = config or DetectorConfig()
        n = len(COUNT_FIELDS)
        self._engine = make_engine(self.config, 1, n, MAX_SLICES + 1, mix_adjusted=True)
        self._total = make_engine(self.config, 1, n, MAX_SLICES + 1, mix_adjusted=False)
        self._mix_state = np.zeros(1, dtype=np.int8)
        self.slice_names: list[str] = []
        self.last_minute: int | None = None
        self.recent: deque[np.ndarray] = deque(maxlen=self.config.rate_window_minutes)  # per minute: both engines

    def update(self, counts: Counts, now: datetime, slices: dict[str, Counts] | None = None) -> "DriftDetector":
        """One minute bucket; ``slices`` splits its claims by mix slice (query type × stakes) when known."""
        if not isinstance(counts, Counts):
            raise TypeError(f"counts must be a Counts, got {type(counts).__name__}")
        minute = minute_number(now)
        if self.last_minute is not None and minute <= self.last_minute:
            raise ValueError(f"now={now.isoformat()} is not after the last bucket {minute_start(self.last_minute).isoformat()}; "
                             "feed minute buckets in event-time order")
        if self.last_minute is not None:  # empty minutes in between still count as time
            empty = np.zeros((1, len(COUNT_FIELDS)))
            for skipped in range(max(self.last_minute + 1, minute - MAX_GAP_MINUTES), minute):
                self._step(empty, skipped, None)
        self._step(counts.as_array()[None, :], minute, self._slice_array(slices))
        return self

    def _slice_array(self, slices: dict[str, Counts] | None) -> np.ndarray | None:
        if not slices:
            return None
        out = np.zeros((1, MAX_SLICES + 1, 2))
        for name, c in sorted(slices.items()):  # the store returns slices in any order; indices must not depend on it
            if name not in self.slice_names and len(self.slice_names) < MAX_SLICES:
                self.slice_names.append(name)
            i = self.slice_names.index(name) if name in self.slice_names else MAX_SLICES
            effective = c.effective()  # sampled answers count as the sample they are (Counts.effective)
            out[0, i] += (effective.claims, effective.failed)
        return out

    def _step(self, x: np.ndarray, minute: int, slices: np.ndarray | None) -> None:
        self._engine.step(x, minute, slices)
        self._total.step(x, minute, slices)
        self._mix_state = mix_shift_state(self._total, self._engine, self._mix_state)
        claims = x[0, CLAIMS]
        self.recent.append(tuple(np.concatenate([x[0], claims * np.array(
            [e.expected.mixed[0] if e.mix_adjusted else e.expected.total[0], e.expected.total[0], e.expected.mixed[0]])])
            for e in (self._engine, self._total)))
        self.last_minute = minute

    def recent_sums(self, engine) -> np.ndarray:
        """The last ``rate_window_minutes`` minutes' sums as ``engine`` saw them (with its expected columns)."""
        if not self.recent:
            return np.zeros(engine.n_fields + 3)
        which = 0 if engine is self._engine else 1
        return np.sum([minute[which] for minute in self.recent], axis=0)

    @property
    def regression(self) -> RouteView:
        return RouteView(self, self._engine, int(self._engine.state[0]))

    @property
    def mix_shift(self) -> RouteView:
        return RouteView(self, self._total, int(self._mix_state[0]))

    @property
    def state(self) -> str:
        """The regression's state: ok, pending or firing."""
        return STATE_NAMES[int(self._engine.state[0])]

    @property
    def drift_detected(self) -> bool:
        """True while the regression's alarm condition holds (state firing)."""
        return self.state == "firing"


def make_detector(config: DetectorConfig | None = None) -> DriftDetector:
    """A detector for one route, with the engine ``config.kind`` names (cusum by default)."""
    return DriftDetector(config)


# Evaluator checkpoints (alert-evaluator/v4) pickled each detector as a subclass named after its kind, which
# differed in nothing else. The kind is in the pickled config, so every one of those names loads as a DriftDetector.
PICKLED_NAMES = {"CusumDetector": DriftDetector, "WindowDetector": DriftDetector, "NaiveDetector": DriftDetector}


def __getattr__(name: str):
    if name in PICKLED_NAMES:
        return PICKLED_NAMES[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
