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

``InputHealthEngine`` runs many routes at once on numpy arrays (bench/input_health.py drives it with
hundreds of routes for 60 days); ``InputHealthDetector`` is one route of it, as the evaluator uses it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields as dc_fields
from datetime import datetime

import numpy as np
from scipy.special import bdtrc, pdtr  # the Poisson cdf and binomial tail, without scipy.stats' 90 MB

from services.alerts.baseline import smooth_slots
from services.alerts.config import typed_settings
from services.alerts.detector import minute_number, minute_start
from services.alerts.lifecycle import ABSTENTION_KIND, REJECTED_KIND, SILENT_KIND
from services.rates.intervals import Counts

BLOCK_MINUTES = 60
PER_DAY = 1440 // BLOCK_MINUTES
RECEIVED, REJECTED, ANSWERS, ABSTAINED, SERVED, CLAIMS, FAILED = range(7)  # one minute of one route
WIDTH = 7
TESTS = (SILENT_KIND, REJECTED_KIND, ABSTENTION_KIND)
SILENT, REJECTS, ABSTAINS = range(3)
OK, PENDING, FIRING = 0, 1, 2
STATE_NAMES = ("ok", "pending", "firing")
SEVERITIES = ("warning", "critical")


@dataclass(frozen=True)
class InputHealthConfig:
    """Defaults chosen by bench/input_health.py (60 answers a minute, volume halving at night)."""

    window_minutes: int = 5           # silence and rejection: the shortest window …
    min_expected: float = 30.0        # … lengthened until this many events are expected in it …
    max_window_minutes: int = 240     # … up to this (a route too quiet to judge within it is never called silent)
    learning_minutes: int = 120       # under a day of history: the expected volume is these last minutes' mean
    min_history_minutes: int = 30     # no judgement before this many minutes of history
    profile_days: int = 7
    silent_ratio: float = 0.2         # silent: fewer than this share of the expected events arrived
    resume_ratio: float = 0.5         # resolved once the window holds this share again
    rejected_rise: float = 0.2        # rejected: the dead-lettered share is this far above the route's usual share
    min_rejected: int = 10
    abstention_window_minutes: int = 30
    abstention_rise: float = 0.10     # the abstained share of answers is this far above the route's usual share
    min_answers: int = 100
    p_value: float = 1e-6             # each change must be this unlikely by chance
    for_minutes: int = 2              # pending this long before firing
    abstention_severity: str = "warning"

    def __post_init__(self) -> None:
        for f in dc_fields(self):
            value = getattr(self, f.name)
            if f.name == "abstention_severity":
                if value not in SEVERITIES:
                    raise ValueError(f"input health setting abstention_severity={value!r}: use one of {', '.join(SEVERITIES)}")
            elif not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"input health setting {f.name}={value!r}: must be a number, 0 or more")
        if not 0 < self.silent_ratio < self.resume_ratio <= 1:
            raise ValueError("input health settings: need 0 < silent_ratio < resume_ratio <= 1")
        if not 0 < self.p_value < 1:
            raise ValueError(f"input health setting p_value={self.p_value!r}: must be in (0, 1)")
        if self.window_minutes < 1 or self.max_window_minutes < max(self.window_minutes, self.abstention_window_minutes):
            raise ValueError("input health settings: need 1 <= window_minutes, and max_window_minutes at least "
                             "window_minutes and abstention_window_minutes")

    @classmethod
    def from_mapping(cls, values: dict) -> "InputHealthConfig":
        return cls(**typed_settings(cls, values, "input health"))


def _share(numerator, denominator):
    return np.where(denominator > 0, numerator / np.maximum(denominator, 1e-12), np.nan)


class InputHealthEngine:
    """Many routes at once: ``step(x, minute)`` with x of shape (routes, WIDTH), one minute at a time."""

    def __init__(self, config: InputHealthConfig, n_routes: int):
        c = self.config = config
        self.span = c.max_window_minutes
        self.prefix = np.zeros((n_routes, self.span + 1, WIDTH))  # running sums; window sums are differences
        self.ticks = 0
        self.n_blocks = c.profile_days * PER_DAY
        self.history = np.zeros((len(TESTS), n_routes, self.n_blocks, WIDTH + 1))  # + admitted minutes
        self.block_ids = np.full(self.n_blocks, -1, dtype=np.int64)
        self.learning = np.zeros((n_routes, c.learning_minutes))  # received per admitted minute (silence)
        self.learned = np.zeros(n_routes, dtype=np.int64)
        self.state = np.zeros((len(TESTS), n_routes), dtype=np.int8)
        self.onset = np.full((len(TESTS), n_routes), -1, dtype=np.int64)
        self.first_minute: int | None = None
        self.minute: int | None = None
        self.profile = np.zeros((n_routes, PER_DAY))  # events per minute per hour slot (finished blocks)
        self.profile_block: int | None = None

    # -- windows ---------------------------------------------------------------------------------------
    def window_sums(self, minutes: np.ndarray) -> np.ndarray:
        """Each route's sums over its own last ``minutes`` (routes,) minutes."""
        minutes = np.minimum(minutes, min(self.ticks, self.span)).astype(np.int64)
        rows = np.arange(minutes.size)
        now = self.prefix[rows, self.ticks % (self.span + 1)]
        then = self.prefix[rows, (self.ticks - minutes) % (self.span + 1)]
        return now - then

    @property
    def history_minutes(self) -> int:
        return 0 if self.first_minute is None else self.minute - self.first_minute + 1

    @property
    def seasonal(self) -> bool:
        return self.history_minutes >= 1440 + BLOCK_MINUTES  # a full day of finished blocks

    def expected_per_minute(self) -> np.ndarray:
        """Events per minute each route is expected to send now (nan: not enough history to say)."""
        c = self.config
        if self.history_minutes < c.min_history_minutes:
            return np.full(self.state.shape[1], np.nan)
        if not self.seasonal:
            n = np.minimum(self.learned, c.learning_minutes)
            return np.where(n >= c.min_history_minutes, self.learning.sum(axis=1) / np.maximum(n, 1), np.nan)
        block = self.minute // BLOCK_MINUTES
        if self.profile_block != block:  # the profile changes only when a block is finished
            self.profile_block = block
            done = self.block_ids < block
            ring = np.where(done[None, :, None], self.history[SILENT], 0.0)
            slots = ring.reshape(ring.shape[0], -1, PER_DAY, WIDTH + 1).sum(axis=1)  # hour of day per slot
            events, minutes = smooth_slots(slots[..., RECEIVED]), smooth_slots(slots[..., WIDTH])
            self.profile = np.where(minutes > 0, events / np.maximum(minutes, 1e-12), np.nan)
        u = (self.minute % 1440) / BLOCK_MINUTES - 0.5
        j0 = int(np.floor(u))
        f = u - j0
        a, b = self.profile[:, j0 % PER_DAY], self.profile[:, (j0 + 1) % PER_DAY]
        return np.where(np.isnan(a), b, np.where(np.isnan(b), a, (1 - f) * a + f * b))

    def silence_window(self, per_minute: np.ndarray) -> np.ndarray:
        """At least ``window_minutes``, until ``min_expected`` events are expected, at most ``max_window_minutes``."""
        c = self.config
        needed = np.ceil(c.min_expected / np.where(per_minute > 0, per_minute, c.min_expected / c.max_window_minutes))
        longest = max(1, min(c.max_window_minutes, self.ticks))  # no longer than the minutes seen
        return np.clip(needed, min(c.window_minutes, longest), longest).astype(np.int64)

    def usual(self, test: int, numerator: int, denominator: int) -> tuple[np.ndarray, np.ndarray]:
        """Each route's usual share over its history for ``test``, and that history's denominator."""
        h = self.history[test].sum(axis=1)
        return _share(h[:, numerator], h[:, denominator]), h[:, denominator]

    # -- one minute ------------------------------------------------------------------------------------
    def step(self, x: np.ndarray, minute: int) -> None:
        c = self.config
        self.first_minute = minute if self.first_minute is None else self.first_minute
        self.minute = minute
        self.prefix[:, (self.ticks + 1) % (self.span + 1)] = self.prefix[:, self.ticks % (self.span + 1)] + x
        self.ticks += 1
        active, resolved = zip(self._silent(), self._rejected(), self._abstention())
        for test in range(len(TESTS)):
            self._advance(test, np.asarray(active[test]), np.asarray(resolved[test]), minute, c.for_minutes)
        self._admit(x, minute)

    def _advance(self, test: int, active: np.ndarray, resolved: np.ndarray, minute: int, for_minutes: int) -> None:
        state, onset = self.state[test], self.onset[test]
        firing = state == FIRING
        opening = ~firing & active
        onset[:] = np.where(opening & (onset < 0), minute, np.where(firing | opening, onset, -1))
        new = np.where(firing, np.where(resolved, OK, FIRING),
                       np.where(opening, np.where(minute - onset >= for_minutes, FIRING, PENDING), OK))
        onset[new == OK] = -1
        state[:] = new

    def _admit(self, x: np.ndarray, minute: int) -> None:
        block = minute // BLOCK_MINUTES
        slot = block % self.n_blocks
        if self.block_ids[slot] != block:  # the ring wrapped: this slot held the same hour a week ago
            self.history[:, :, slot] = 0.0
            self.block_ids[slot] = block
        row = np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)
        admitted = self.state == OK  # an open alert's minutes stay out of its own history
        self.history[:, :, slot] += np.where(admitted[..., None], row[None], 0.0)
        quiet = admitted[SILENT]
        pos = self.learned % self.config.learning_minutes
        rows = np.flatnonzero(quiet)
        self.learning[rows, pos[rows]] = x[rows, RECEIVED]
        self.learned[rows] += 1

    # -- the three tests: (opens, resolves) per route ---------------------------------------------------
    def _silent(self):
        c = self.config
        per_minute = self.expected_per_minute()
        window = self.silence_window(per_minute)
        expected = np.nan_to_num(per_minute) * window
        got = self.window_sums(window)[:, RECEIVED]
        judged = expected >= c.min_expected
        opens = judged & (got <= c.silent_ratio * expected) & (pdtr(got, np.maximum(expected, 1e-9)) < c.p_value)
        return opens, ~judged | (got >= c.resume_ratio * expected)

    def _rejected(self):
        c = self.config
        s = self.window_sums(self.silence_window(self.expected_per_minute()))
        base = np.nan_to_num(self.usual(REJECTS, REJECTED, RECEIVED)[0])
        share = np.nan_to_num(_share(s[:, REJECTED], s[:, RECEIVED]))
        tail = bdtrc(s[:, REJECTED] - 1, s[:, RECEIVED].astype(np.int64), np.maximum(base, 1e-3))
        opens = (s[:, REJECTED] >= c.min_rejected) & (share >= base + c.rejected_rise) & (tail < c.p_value)
        return opens, share < base + c.rejected_rise / 2

    def _abstention(self):
        c = self.config
        s = self.window_sums(np.full(self.state.shape[1], c.abstention_window_minutes))
        base, answers = self.usual(ABSTAINS, ABSTAINED, ANSWERS)
        served_base = self.usual(ABSTAINS, SERVED, ANSWERS)[0]
        share = np.nan_to_num(_share(s[:, ABSTAINED], s[:, ANSWERS]))
        base0 = np.nan_to_num(base)
        tail = bdtrc(s[:, ABSTAINED] - 1, s[:, ANSWERS].astype(np.int64), np.maximum(base0, 1e-3))
        served = np.nan_to_num(_share(s[:, SERVED], s[:, ANSWERS]), nan=1.0)
        opens = ((answers >= c.min_answers) & (s[:, ANSWERS] >= c.min_answers) & (share >= base0 + c.abstention_rise)
                 & (tail < c.p_value) & (served < np.nan_to_num(served_base, nan=0.0)))
        return opens, share < base0 + c.abstention_rise / 2


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
    details: dict | None = None
    rate_interval = None
    baseline_interval = None
    driving_verdict = None
    mix_effect = None
    rate_effect = None
    mix_slice = None

    @property
    def baseline(self) -> float | None:
        return self.expected


def _num(x) -> float | None:
    return None if x is None or np.isnan(x) else float(x)


class InputHealthDetector:
    """One route of an ``InputHealthEngine``. Call ``update`` once per minute bucket, in event-time order, with
    the route's accepted answers (rate_minute's sums) and how many of its events were dead-lettered."""

    def __init__(self, config: InputHealthConfig | None = None):
        self.config = config or InputHealthConfig()
        self.engine = InputHealthEngine(self.config, 1)

    def update(self, counts: Counts, rejected: int, now: datetime) -> "InputHealthDetector":
        minute = minute_number(now)
        last = self.engine.minute
        if last is not None and minute <= last:
            raise ValueError(f"now={now.isoformat()} is not after the last bucket; feed minute buckets in event-time order")
        if last is not None:  # empty minutes in between are time too (silence is what this watches)
            for skipped in range(max(last + 1, minute - self.engine.span), minute):
                self.engine.step(np.zeros((1, WIDTH)), skipped)
        self.engine.step(np.array([[counts.events + rejected, rejected, counts.events, counts.abstained, counts.served,
                                    counts.claims, counts.failed]], dtype=float), minute)
        return self

    def _state(self, test: int) -> tuple[str, datetime | None]:
        onset = int(self.engine.onset[test, 0])
        return STATE_NAMES[self.engine.state[test, 0]], None if onset < 0 else minute_start(onset)

    def _basis(self) -> str:
        e = self.engine
        if e.seasonal:
            return f"time of day: this hour's events per minute over {min(e.history_minutes / 1440, self.config.profile_days):.1f} days"
        return (f"learning: {e.history_minutes / 60:.0f} h of history; the mean of its last "
                f"{min(int(e.learned[0]), self.config.learning_minutes)} minutes until a day gives the time of day")

    @property
    def silent(self) -> Finding:
        e = self.engine
        per_minute = e.expected_per_minute()
        window = int(e.silence_window(per_minute)[0])
        got = float(e.window_sums(np.array([window]))[0, RECEIVED])
        expected = _num(per_minute[0])
        rate = got / window
        state, onset = self._state(SILENT)
        return Finding(state, window, rate, expected, None if expected is None else rate - expected, int(got), onset,
                       self._basis(), unit="per_minute",
                       details={"received": int(got), "expected_events": None if expected is None else round(expected * window, 1)})

    @property
    def rejected(self) -> Finding:
        e = self.engine
        window = int(e.silence_window(e.expected_per_minute())[0])
        s = e.window_sums(np.array([window]))[0]
        base, seen = e.usual(REJECTS, REJECTED, RECEIVED)
        base = float(np.nan_to_num(base[0]))
        share = _num(_share(s[REJECTED], s[RECEIVED]))
        state, onset = self._state(REJECTS)
        return Finding(state, window, share, base, None if share is None else share - base, int(s[RECEIVED]), onset,
                       f"the route's usual dead-lettered share over {seen[0]:,.0f} events",
                       details={"rejected": int(s[REJECTED]), "received": int(s[RECEIVED])})

    @property
    def abstention(self) -> Finding:
        e = self.engine
        window = self.config.abstention_window_minutes
        s = e.window_sums(np.array([window]))[0]
        h = e.history[ABSTAINS, 0].sum(axis=0)
        share, base = _num(_share(s[ABSTAINED], s[ANSWERS])), _num(_share(h[ABSTAINED], h[ANSWERS]))
        rate_now, rate_before = _num(_share(s[FAILED], s[CLAIMS])), _num(_share(h[FAILED], h[CLAIMS]))
        state, onset = self._state(ABSTAINS)
        return Finding(state, min(window, e.ticks), share, base, None if share is None or base is None else share - base,
                       int(s[ANSWERS]), onset, f"the route's usual abstained share over {h[ANSWERS]:,.0f} answers",
                       details={"served_share": _num(_share(s[SERVED], s[ANSWERS])),
                                "served_share_before": _num(_share(h[SERVED], h[ANSWERS])),
                                "hallucination_rate": rate_now, "hallucination_rate_before": rate_before,
                                "hallucination_fell": bool(rate_now is not None and rate_before is not None
                                                           and rate_now < rate_before)})

    def state(self, kind: str) -> str:
        return STATE_NAMES[self.engine.state[TESTS.index(kind), 0]]

    def view(self, kind: str) -> Finding:
        return {SILENT_KIND: lambda: self.silent, REJECTED_KIND: lambda: self.rejected,
                ABSTENTION_KIND: lambda: self.abstention}[kind]()
