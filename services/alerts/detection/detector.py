"""Per-route drift detection on minute buckets of the claim-level hallucination rate.

Shaped like river's detectors: ``__init__`` stores parameters, ``update(counts, now, slices)``
changes state, results are properties: ``state`` and ``drift_detected``, and the figures an alert
carries on the two views, ``regression`` and ``mix_shift`` (``RouteView``). The clock is an argument.
The settings, the shared part and each engine's own, are services/alerts/detection/config.py's.

Each detector is a fleet of one route (services/alerts/detection/fleet.py): two *engines*
(services/alerts/detection/drift_engine.py) that run many routes at once on numpy arrays. The evaluator steps every
route of a fleet at once, and bench/drift.py drives the same engines with thousands of routes, so the benchmark
measures the shipped code. Both engines test each minute against an expectation
(services/alerts/detection/baseline.py): the route's trailing level plus its time-of-day offset. The ``regression``
engine also adjusts it for the minute's mix of slices (query type × stakes), so it pages only when the route got
worse on the same questions; the other tests the unadjusted expectation, and a rise there that is mostly mix is a
``mix_shift`` (a warning).

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

from datetime import datetime
from typing import Any

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.fleet import MAX_SLICES, DriftFleet  # noqa: F401  (what detectors' readers import from here)
from services.alerts.detection.minutes import minute_number, minute_start  # noqa: F401
from services.alerts.detection.route_view import OTHER_SLICE, RouteView, learning_basis  # noqa: F401
from services.rates.intervals import Counts


def history_hours_between(first: datetime, now: datetime, config: DetectorConfig) -> float:
    """Hours of history a detector that started at ``first`` holds at ``now``: its finished blocks, as it counts
    them."""

    def block(t: datetime) -> int:
        return minute_number(t) // config.block_minutes

    return max(block(now) - block(first), 0) * config.block_minutes / 60


def baseline_status(history_hours: float, config: DetectorConfig) -> dict[str, Any]:
    """Whether a route's baseline is still learning (under a day of history), from its hours of history."""
    learning = history_hours < 24
    return {
        "learning": learning,
        "history_hours": round(history_hours, 1),
        "basis": learning_basis(history_hours, config) if learning else "time of day: a full day of history or more",
    }


class DriftDetector(DriftFleet):
    """One route. Call ``update`` once per minute bucket, in event-time order."""

    def __init__(self, config: DetectorConfig | None = None):
        super().__init__(config, 1)

    def update(self, counts: Counts, now: datetime, slices: dict[str, Counts] | None = None) -> DriftDetector:
        """One minute bucket; ``slices`` splits its claims by mix slice (query type × stakes) when known."""
        if not isinstance(counts, Counts):
            raise TypeError(f"counts must be a Counts, got {type(counts).__name__}")
        named = {name: slice_sums(c) for name, c in (slices or {}).items()}
        self.step(counts.as_array()[None, :], minute_number(now), {0: named} if named else None)
        return self

    @property
    def regression(self) -> RouteView:
        return self.regression_view(0)

    @property
    def mix_shift(self) -> RouteView:
        return self.mix_shift_view(0)

    @property
    def state(self) -> str:
        """The regression's state: ok, pending or firing."""
        return self.regression.state

    @property
    def drift_detected(self) -> bool:
        """True while the regression's alarm condition holds (state firing)."""
        return self.state == "firing"


def slice_sums(counts: Counts) -> tuple[float, float]:
    """A mix slice's claims and failed claims as a detector adds them: sampled answers count as the sample they
    are (Counts.effective)."""
    effective = counts.effective()
    return effective.claims, effective.failed


def make_detector(config: DetectorConfig | None = None) -> DriftDetector:
    """A detector for one route, with the engine ``config.kind`` names (cusum by default)."""
    return DriftDetector(config)
