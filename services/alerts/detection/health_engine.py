"""The input-health engine (services/alerts/detection/input_health.py says what it tests): many routes at once on numpy
arrays, its settings and the column layout of one route's minute."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator
from scipy.special import bdtrc, pdtr  # the Poisson cdf and binomial tail, without scipy.stats' 90 MB

from services.alerts.detection.baseline import smooth_slots
from services.alerts.detection.config import Settings, refuse_unknown
from services.alerts.detection.rows import HISTORY, StateMismatch, grow, grown, into_ring, oldest_first, put, take
from services.alerts.lifecycle.kinds import ABSTENTION_KIND, REJECTED_KIND, SILENT_KIND

BLOCK_MINUTES = 60
PER_DAY = 1440 // BLOCK_MINUTES
RECEIVED, REJECTED, ANSWERS, ABSTAINED, SERVED, CLAIMS, FAILED = range(7)  # one minute of one route
WIDTH = 7
TESTS = (SILENT_KIND, REJECTED_KIND, ABSTENTION_KIND)
SILENT, REJECTS, ABSTAINS = range(3)
# the columns each test's history keeps (WIDTH: the minutes admitted): what the profile, usual() and the views read
HISTORY_COLUMNS = ((RECEIVED, WIDTH), (REJECTED, RECEIVED), (ANSWERS, ABSTAINED, SERVED, CLAIMS, FAILED))
OK, PENDING, FIRING = 0, 1, 2
STATE_NAMES = ("ok", "pending", "firing")


NonNegative = Annotated[float, Field(ge=0)]
Count = Annotated[int, Field(ge=0)]


class InputHealthConfig(Settings):
    """Defaults chosen by bench/input_health.py (60 answers a minute, volume halving at night)."""

    what: ClassVar[str] = "input health"

    window_minutes: Count = 5  # silence and rejection: the shortest window …
    min_expected: NonNegative = 30.0  # … lengthened until this many events are expected in it …
    max_window_minutes: Count = 240  # … up to this (a route too quiet to judge within it is never called silent)
    learning_minutes: Count = 120  # under a day of history: the expected volume is these last minutes' mean
    min_history_minutes: Count = 30  # no judgement before this many minutes of history
    profile_days: Count = 7
    silent_ratio: NonNegative = 0.2  # silent: fewer than this share of the expected events arrived
    resume_ratio: NonNegative = 0.5  # resolved once the window holds this share again
    rejected_rise: NonNegative = 0.2  # rejected: the dead-lettered share is this far above the route's usual share
    min_rejected: Count = 10
    abstention_window_minutes: Count = 30
    abstention_rise: NonNegative = 0.10  # the abstained share of answers is this far above the route's usual share
    min_answers: Count = 100
    p_value: float = Field(default=1e-6, gt=0, lt=1)  # each change must be this unlikely by chance
    for_minutes: Count = 2  # pending this long before firing
    abstention_severity: Literal["warning", "critical"] = "warning"

    @model_validator(mode="after")
    def _consistent(self) -> InputHealthConfig:
        if not 0 < self.silent_ratio < self.resume_ratio <= 1:
            raise ValueError("input health settings: need 0 < silent_ratio < resume_ratio <= 1")
        if self.window_minutes < 1 or self.max_window_minutes < max(
            self.window_minutes, self.abstention_window_minutes
        ):
            raise ValueError(
                "input health settings: need 1 <= window_minutes, and max_window_minutes at least "
                "window_minutes and abstention_window_minutes"
            )
        return self

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> InputHealthConfig:
        refuse_unknown(values, cls.names(), cls.what)
        return cls(**values)


def _share(numerator: np.ndarray | float, denominator: np.ndarray | float) -> np.ndarray:
    return np.where(denominator > 0, numerator / np.maximum(denominator, 1e-12), np.nan)


class InputHealthEngine:
    """Many routes at once: ``step(x, minute)`` with x of shape (routes, WIDTH), one minute at a time.

    Each route has its own age, so routes join with ``add_rows`` and ``row_state``/``load_rows`` take one route's
    state out and put it back (services/alerts/detection/rows.py). Each test keeps, per hour block, only the columns it
    reads (``HISTORY_COLUMNS``)."""

    ROW_ARRAYS = {"learning": 0, "learned": 0, "state": 1, "onset": 1, "age": 0, "first_minute": 0}

    def __init__(self, config: InputHealthConfig, n_routes: int):
        c = self.config = config
        self.span = c.max_window_minutes
        self.prefix = np.zeros((n_routes, self.span + 1, WIDTH))  # running sums; window sums are differences
        self.ticks = 0  # steps taken: the prefix ring's position
        self.age = np.zeros(n_routes, dtype=np.int64)  # each route's steps
        self.n_blocks = c.profile_days * PER_DAY
        # per test, each hour block's sums of the columns it reads (+ admitted minutes), admitted by its state
        self.history = [np.zeros((n_routes, self.n_blocks, len(cols)), dtype=HISTORY) for cols in HISTORY_COLUMNS]
        self.block_ids = np.full(self.n_blocks, -1, dtype=np.int64)
        self.learning = np.zeros((n_routes, c.learning_minutes))  # received per admitted minute (silence)
        self.learned = np.zeros(n_routes, dtype=np.int64)
        self.state = np.zeros((len(TESTS), n_routes), dtype=np.int8)
        self.onset = np.full((len(TESTS), n_routes), -1, dtype=np.int64)
        self.first_minute = np.full(n_routes, -1, dtype=np.int64)  # each route's first minute (-1: none yet)
        self.minute: int | None = None
        self.profile = np.zeros((n_routes, PER_DAY))  # events per minute per hour slot (finished blocks)
        self.profile_block: int | None = None

    @property
    def n_routes(self) -> int:
        return self.age.shape[0]

    # -- routes joining, and a route's state ------------------------------------------------------------
    def add_rows(self, k: int) -> np.ndarray:
        n = self.n_routes
        grow(self, {**self.ROW_ARRAYS, "prefix": 0, "profile": 0}, k, {"onset": -1, "first_minute": -1})
        self.history = [grown(h, k) for h in self.history]
        return np.arange(n, n + k)

    def row_state(self, row: int) -> dict[str, Any]:
        prefix = oldest_first(self.prefix[row], self.ticks % (self.span + 1))
        steps = np.diff(prefix, axis=0, prepend=0.0)  # each minute's counts: small whole numbers, stored smaller
        exact = np.array_equal(np.cumsum(steps, axis=0), prefix)
        return {
            **take(self, self.ROW_ARRAYS, row),
            "history": [h[row].copy() for h in self.history],
            "prefix_steps" if exact else "prefix": steps if exact else prefix,
        }

    def load_rows(self, rows: list[int], states: list[dict[str, Any]], minute: int) -> None:
        """Routes ``rows`` as ``row_state`` gave each after ``minute``; the engine is at ``minute`` (or has not
        begun)."""
        if self.minute not in (None, minute):
            raise StateMismatch(f"a route's state after minute {minute} cannot join routes at minute {self.minute}")
        for row, state in zip(rows, states):
            put(self, self.ROW_ARRAYS, row, state)
            prefix = (
                np.cumsum(state["prefix_steps"], axis=0) if "prefix_steps" in state else np.asarray(state["prefix"])
            )
            put(self, {"prefix": 0}, row, {"prefix": into_ring(prefix, self.ticks % (self.span + 1))})
            if len(state["history"]) != len(self.history):
                raise StateMismatch("the stored input-health history has another number of tests")
            for h, stored in zip(self.history, state["history"]):
                if np.shape(stored) != h[row].shape:
                    raise StateMismatch(f"history: stored shape {np.shape(stored)}, the configuration's {h[row].shape}")
                h[row] = stored
        if self.minute is None:  # which block each slot of the week holds: the latest one it can, up to this minute
            block = minute // BLOCK_MINUTES
            self.block_ids = block - (block - np.arange(self.n_blocks)) % self.n_blocks
        self.minute = minute
        self.profile_block = None  # the profile is derived: read it again

    # -- windows ---------------------------------------------------------------------------------------
    def window_sums(self, minutes: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Each route's (or each of ``rows``') sums over its own last ``minutes`` minutes."""
        rows = np.arange(self.n_routes) if rows is None else rows
        minutes = np.minimum(minutes, np.minimum(self.age[rows], self.span)).astype(np.int64)
        now = self.prefix[rows, self.ticks % (self.span + 1)]
        then = self.prefix[rows, (self.ticks - minutes) % (self.span + 1)]
        sums: np.ndarray = now - then
        return sums

    def history_minutes(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        return np.where(self.first_minute[rows] < 0, 0, (self.minute or 0) - self.first_minute[rows] + 1)

    def seasonal(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        return self.history_minutes(rows) >= 1440 + BLOCK_MINUTES  # a full day of finished blocks

    def expected_per_minute(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Events per minute each route is expected to send now (nan: not enough history to say)."""
        c = self.config
        n = np.minimum(self.learned[rows], c.learning_minutes)
        learning = np.where(n >= c.min_history_minutes, self.learning[rows].sum(axis=1) / np.maximum(n, 1), np.nan)
        seasonal = self.seasonal(rows)
        if seasonal.any():
            learning = np.where(seasonal, self._profile_now(rows), learning)
        return np.where(self.history_minutes(rows) < c.min_history_minutes, np.nan, learning)

    def _profile_now(self, rows: np.ndarray | slice) -> np.ndarray:
        minute = self.minute
        assert minute is not None  # only seasonal routes read it, and their history means a minute was stepped
        block = minute // BLOCK_MINUTES
        if self.profile_block != block:  # the profile changes only when a block is finished
            self.profile_block = block
            done = self.block_ids < block
            ring = np.where(done[None, :, None], self.history[SILENT], 0.0)
            days = self.n_blocks // PER_DAY
            slots = ring.reshape(ring.shape[0], days, PER_DAY, ring.shape[2]).sum(axis=1)  # hour of day per slot
            events, minutes = smooth_slots(slots[..., 0]), smooth_slots(slots[..., 1])
            self.profile = np.where(minutes > 0, events / np.maximum(minutes, 1e-12), np.nan)
        u = (minute % 1440) / BLOCK_MINUTES - 0.5
        j0 = int(np.floor(u))
        f = u - j0
        a, b = self.profile[rows, j0 % PER_DAY], self.profile[rows, (j0 + 1) % PER_DAY]
        expected: np.ndarray = np.where(np.isnan(a), b, np.where(np.isnan(b), a, (1 - f) * a + f * b))
        return expected

    def silence_window(self, per_minute: np.ndarray, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """At least ``window_minutes``, until ``min_expected`` events are expected, at most ``max_window_minutes``."""
        c = self.config
        needed = np.ceil(c.min_expected / np.where(per_minute > 0, per_minute, c.min_expected / c.max_window_minutes))
        longest = np.maximum(1, np.minimum(c.max_window_minutes, self.age[rows]))  # no longer than the minutes seen
        return np.clip(needed, np.minimum(c.window_minutes, longest), longest).astype(np.int64)

    def history_sums(self, test: int, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Each route's sums over its history for ``test``, as WIDTH + 1 columns (0 where the test keeps none)."""
        kept = self.history[test][rows].sum(axis=1)
        out = np.zeros((kept.shape[0], WIDTH + 1))
        out[:, list(HISTORY_COLUMNS[test])] = kept
        return out

    def usual(
        self, test: int, numerator: int, denominator: int, rows: np.ndarray | slice = slice(None)
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each route's usual share over its history for ``test``, and that history's denominator."""
        h = self.history_sums(test, rows)
        return _share(h[:, numerator], h[:, denominator]), h[:, denominator]

    # -- one minute ------------------------------------------------------------------------------------
    def step(self, x: np.ndarray, minute: int) -> None:
        c = self.config
        self.first_minute = np.where(self.first_minute < 0, minute, self.first_minute)
        self.minute = minute
        self.prefix[:, (self.ticks + 1) % (self.span + 1)] = self.prefix[:, self.ticks % (self.span + 1)] + x
        self.ticks += 1
        self.age += 1
        active, resolved = zip(self._silent(), self._rejected(), self._abstention())
        for test in range(len(TESTS)):
            self._advance(test, np.asarray(active[test]), np.asarray(resolved[test]), minute, c.for_minutes)
        self._admit(x, minute)

    def _advance(self, test: int, active: np.ndarray, resolved: np.ndarray, minute: int, for_minutes: int) -> None:
        state, onset = self.state[test], self.onset[test]
        firing = state == FIRING
        opening = ~firing & active
        onset[:] = np.where(opening & (onset < 0), minute, np.where(firing | opening, onset, -1))
        new = np.where(
            firing,
            np.where(resolved, OK, FIRING),
            np.where(opening, np.where(minute - onset >= for_minutes, FIRING, PENDING), OK),
        )
        onset[new == OK] = -1
        state[:] = new

    def _admit(self, x: np.ndarray, minute: int) -> None:
        block = minute // BLOCK_MINUTES
        slot = block % self.n_blocks
        if self.block_ids[slot] != block:  # the ring wrapped: this slot held the same hour a week ago
            for h in self.history:
                h[:, slot] = 0.0
            self.block_ids[slot] = block
        row = np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)
        admitted = self.state == OK  # an open alert's minutes stay out of its own history
        for test, (h, cols) in enumerate(zip(self.history, HISTORY_COLUMNS)):
            h[:, slot] += np.where(admitted[test][:, None], row[:, list(cols)], 0.0)
        quiet = admitted[SILENT]
        pos = self.learned % self.config.learning_minutes
        rows = np.flatnonzero(quiet)
        self.learning[rows, pos[rows]] = x[rows, RECEIVED]
        self.learned[rows] += 1

    # -- the three tests: (opens, resolves) per route ---------------------------------------------------
    def _silent(self) -> tuple[np.ndarray, np.ndarray]:
        c = self.config
        per_minute = self.expected_per_minute()
        window = self.silence_window(per_minute)
        expected = np.nan_to_num(per_minute) * window
        got = self.window_sums(window)[:, RECEIVED]
        judged = expected >= c.min_expected
        opens = judged & (got <= c.silent_ratio * expected) & (pdtr(got, np.maximum(expected, 1e-9)) < c.p_value)
        return opens, ~judged | (got >= c.resume_ratio * expected)

    def _rejected(self) -> tuple[np.ndarray, np.ndarray]:
        c = self.config
        s = self.window_sums(self.silence_window(self.expected_per_minute()))
        base = np.nan_to_num(self.usual(REJECTS, REJECTED, RECEIVED)[0])
        share = np.nan_to_num(_share(s[:, REJECTED], s[:, RECEIVED]))
        tail = bdtrc(s[:, REJECTED] - 1, s[:, RECEIVED].astype(np.int64), np.maximum(base, 1e-3))
        opens = (s[:, REJECTED] >= c.min_rejected) & (share >= base + c.rejected_rise) & (tail < c.p_value)
        return opens, share < base + c.rejected_rise / 2

    def _abstention(self) -> tuple[np.ndarray, np.ndarray]:
        c = self.config
        s = self.window_sums(np.full(self.state.shape[1], c.abstention_window_minutes))
        base, answers = self.usual(ABSTAINS, ABSTAINED, ANSWERS)
        served_base = self.usual(ABSTAINS, SERVED, ANSWERS)[0]
        share = np.nan_to_num(_share(s[:, ABSTAINED], s[:, ANSWERS]))
        base0 = np.nan_to_num(base)
        tail = bdtrc(s[:, ABSTAINED] - 1, s[:, ANSWERS].astype(np.int64), np.maximum(base0, 1e-3))
        served = np.nan_to_num(_share(s[:, SERVED], s[:, ANSWERS]), nan=1.0)
        opens = (
            (answers >= c.min_answers)
            & (s[:, ANSWERS] >= c.min_answers)
            & (share >= base0 + c.abstention_rise)
            & (tail < c.p_value)
            & (served < np.nan_to_num(served_base, nan=0.0))
        )
        return opens, share < base0 + c.abstention_rise / 2
