"""Alerts on the monitor's own input (issue 21): a monitor that cannot see must say so.

Three kinds per route, tested every minute in event time:
- ``route_silent`` (pages): the route's events (accepted + dead-lettered) fall far below what its time of
  day predicts, including to zero. The prediction is the route's events per minute in this hour slot over
  up to a week (smoothed with the neighbouring slots, read between slot centres); under a day of history,
  the mean of its last two hours. The nightly dip is in the prediction, so it is not an outage.
- ``events_rejected`` (pages): the share of the route's events that were dead-lettered rises above its
  usual share (a producer shipped a breaking change, a contract version nobody reads).
- ``abstention_rise`` (warning by default): the route abstains on more answers while it serves fewer. A
  falling hallucination rate at the same time is said out loud: that is the gaming case.

Each test looks at a recent window lengthened until it expects enough events to judge (``min_expected``),
opens only when the change is both large (a ratio or a rise) and no chance (a Poisson or binomial tail under
``p_value``), is pending for ``for_minutes`` before it fires, and resolves with hysteresis. Minutes of an
open alert stay out of that kind's history, so an outage never teaches a route that silence is normal.

``InputHealthEngine`` (services/alerts/detection/health_engine.py) runs many routes at once on numpy arrays: the
evaluator steps every route with it, and bench/input_health.py drives it with hundreds of routes for 60 days.
``HealthView`` reads one route of it as an alert does; ``InputHealthDetector`` is an engine of one route.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from services.alerts.detection.health_engine import (  # noqa: F401  (the engine and its settings are read from here too)
    ABSTAINED,
    ABSTAINS,
    ANSWERS,
    CLAIMS,
    FAILED,
    FIRING,
    HISTORY_COLUMNS,
    OK,
    PENDING,
    RECEIVED,
    REJECTED,
    REJECTS,
    SERVED,
    SILENT,
    STATE_NAMES,
    TESTS,
    WIDTH,
    InputHealthConfig,
    InputHealthEngine,
    _share,
)
from services.alerts.detection.minutes import minute_number, minute_start
from services.alerts.lifecycle.kinds import ABSTENTION_KIND, REJECTED_KIND, SILENT_KIND
from services.rates.intervals import Counts
from services.store.rates import SUM_FIELDS


@dataclass(frozen=True)
class Finding:
    """What one input-health test says about its route this minute, shaped as an alert reads a detector."""

    state: str
    window_minutes: int
    rate: float | None
    expected: float | None
    delta: float | None
    claims_counted: int
    onset: datetime | None
    expected_basis: str
    unit: str = "share"
    details: dict[str, Any] | None = None
    rate_interval = None
    baseline_interval = None
    driving_verdict = None
    mix_effect = None
    rate_effect = None
    mix_slice = None

    @property
    def baseline(self) -> float | None:
        return self.expected


def _num(x: np.ndarray | float | None) -> float | None:
    return None if x is None or np.isnan(x) else float(x)


class HealthView:
    """One route (``row``) of an ``InputHealthEngine`` as an alert reads it: each test's state and ``Finding``."""

    def __init__(self, engine: InputHealthEngine, row: int):
        self.engine, self.row = engine, row
        self.config = engine.config

    def _state(self, test: int) -> tuple[str, datetime | None]:
        onset = int(self.engine.onset[test, self.row])
        return STATE_NAMES[self.engine.state[test, self.row]], None if onset < 0 else minute_start(onset)

    def _basis(self) -> str:
        e, at = self.engine, np.array([self.row])
        history = int(e.history_minutes(at)[0])
        if e.seasonal(at)[0]:
            return (
                "time of day: this hour's events per minute over "
                f"{min(history / 1440, self.config.profile_days):.1f} days"
            )
        return (
            f"learning: {history / 60:.0f} h of history; the mean of its last "
            f"{min(int(e.learned[self.row]), self.config.learning_minutes)} minutes until a day gives the time of day"
        )

    def _silence_window(self) -> tuple[int, float]:
        at = np.array([self.row])
        per_minute = self.engine.expected_per_minute(at)
        return int(self.engine.silence_window(per_minute, at)[0]), per_minute[0]

    def _sums(self, window: int) -> np.ndarray:
        sums: np.ndarray = self.engine.window_sums(np.array([window]), np.array([self.row]))[0]
        return sums

    @property
    def silent(self) -> Finding:
        window, per_minute = self._silence_window()
        got = float(self._sums(window)[RECEIVED])
        expected = _num(per_minute)
        rate = got / window
        state, onset = self._state(SILENT)
        return Finding(
            state,
            window,
            rate,
            expected,
            None if expected is None else rate - expected,
            int(got),
            onset,
            self._basis(),
            unit="per_minute",
            details={
                "received": int(got),
                "expected_events": None if expected is None else round(expected * window, 1),
            },
        )

    @property
    def rejected(self) -> Finding:
        window, _ = self._silence_window()
        s = self._sums(window)
        usual, seen = self.engine.usual(REJECTS, REJECTED, RECEIVED, np.array([self.row]))
        base = float(np.nan_to_num(usual[0]))
        share = _num(_share(s[REJECTED], s[RECEIVED]))
        state, onset = self._state(REJECTS)
        return Finding(
            state,
            window,
            share,
            base,
            None if share is None else share - base,
            int(s[RECEIVED]),
            onset,
            f"the route's usual dead-lettered share over {seen[0]:,.0f} events",
            details={"rejected": int(s[REJECTED]), "received": int(s[RECEIVED])},
        )

    @property
    def abstention(self) -> Finding:
        window = self.config.abstention_window_minutes
        s = self._sums(window)
        h = self.engine.history_sums(ABSTAINS, np.array([self.row]))[0]
        share, base = _num(_share(s[ABSTAINED], s[ANSWERS])), _num(_share(h[ABSTAINED], h[ANSWERS]))
        rate_now, rate_before = _num(_share(s[FAILED], s[CLAIMS])), _num(_share(h[FAILED], h[CLAIMS]))
        state, onset = self._state(ABSTAINS)
        return Finding(
            state,
            min(window, int(self.engine.age[self.row])),
            share,
            base,
            None if share is None or base is None else share - base,
            int(s[ANSWERS]),
            onset,
            f"the route's usual abstained share over {h[ANSWERS]:,.0f} answers",
            details={
                "served_share": _num(_share(s[SERVED], s[ANSWERS])),
                "served_share_before": _num(_share(h[SERVED], h[ANSWERS])),
                "hallucination_rate": rate_now,
                "hallucination_rate_before": rate_before,
                "hallucination_fell": bool(rate_now is not None and rate_before is not None and rate_now < rate_before),
            },
        )

    def state(self, kind: str) -> str:
        return STATE_NAMES[self.engine.state[TESTS.index(kind), self.row]]

    def view(self, kind: str) -> Finding:
        return {
            SILENT_KIND: lambda: self.silent,
            REJECTED_KIND: lambda: self.rejected,
            ABSTENTION_KIND: lambda: self.abstention,
        }[kind]()


# a minute's input-health columns (WIDTH) from its sums (SUM_FIELDS), before the dead letters are added
_HEALTH_SUMS = [SUM_FIELDS.index(f) for f in ("events", "events", "events", "abstained", "served", "claims", "failed")]


def health_inputs(sums: np.ndarray, rejected: np.ndarray) -> np.ndarray:
    """Routes' minutes as the engine reads them (WIDTH columns) from their accepted answers' sums (SUM_FIELDS rows)
    and how many of their events were dead-lettered."""
    out = sums[:, _HEALTH_SUMS].astype(float)
    out[:, RECEIVED] += rejected
    out[:, REJECTED] = rejected
    return out


def health_input(counts: Counts, rejected: int) -> np.ndarray:
    """One route's minute as the engine reads it (``health_inputs``)."""
    row: np.ndarray = health_inputs(
        np.array([[getattr(counts, f) for f in SUM_FIELDS]], dtype=float), np.array([rejected])
    )[0]
    return row


class InputHealthDetector(HealthView):
    """An ``InputHealthEngine`` of one route. Call ``update`` once per minute bucket, in event-time order, with
    the route's accepted answers (rate_minute's sums) and how many of its events were dead-lettered."""

    def __init__(self, config: InputHealthConfig | None = None):
        super().__init__(InputHealthEngine(config or InputHealthConfig(), 1), 0)

    def update(self, counts: Counts, rejected: int, now: datetime) -> InputHealthDetector:
        minute = minute_number(now)
        last = self.engine.minute
        if last is not None and minute <= last:
            raise ValueError(
                f"now={now.isoformat()} is not after the last bucket; feed minute buckets in event-time order"
            )
        if last is not None:  # empty minutes in between are time too (silence is what this watches)
            for skipped in range(max(last + 1, minute - self.engine.span), minute):
                self.engine.step(np.zeros((1, WIDTH)), skipped)
        self.engine.step(health_input(counts, rejected)[None, :], minute)
        return self
