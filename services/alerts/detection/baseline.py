"""What a drift engine expects each route's claim-level rate to be this minute (numpy, routes × fields).

- **Level**: the route's pooled rate over the trailing ``baseline_minutes``, in whole wall-clock
  blocks (hours); the current block is not in it.
- **Time of day**: once a full day of history exists, the level plus the route's offset at this time
  of day. Each hour slot's pooled rate over up to ``season_days`` days, smoothed with its neighbours
  (weights 1, 2, 1), minus the pooled rate of all slots; read between slot centres. With less than a
  day of history the offset is 0, so the expectation is the trailing level (the fallback).
- **Learning** (less than a full day of history): the level is *local*, the last ``learning_level_minutes``
  (whole blocks), so it tracks the slow daily movement it cannot model yet, and each test adds
  ``learning_margin`` to the expectation: the rise the unmodelled time of day can still fake
  (a ±1-point daily swing moves a 3-hour level's lag by up to about half a point). The margin goes
  once a day is seen and the time-of-day profile takes over. Warm-up counts every claim of history.
- **Mix** (direct standardisation): with slices (query type × stakes), the rate this minute's slice
  mix has at each slice's baseline rate, minus the rate the baseline's own mix has at those rates.
  The mix-adjusted offsets come from history with each minute's mix effect taken out, so a daily
  swing that is itself a mix swing is counted once.
- **Unbiased**: a minute of an open (pending) run is held back; the run's minutes are admitted when
  it clears and dropped only if it fires. Dropping every pending minute (``hold_pending=False``, the
  previous behaviour) kept the noisiest high minutes out and biased the level low.

The history these are estimated from, and a route's stored state, are services/alerts/detection/baseline_history.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.alerts.detection.baseline_history import BaselineHistory
from services.alerts.detection.columns import (
    CLAIMS,
    CLAIMS_SQ,
    FAILED,
    FAILED_CLAIMS,
    FAILED_SQ,
    SEASON_CLAIMS,
    SEASON_FAILED,
    SEASON_MIX,
)
from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.rows import grow

SLOT_MIN_CLAIMS = 1_000  # a smoothed hour slot with fewer claims gets no offset
SMOOTHING = (0.25, 0.5, 0.25)  # the previous, this and the next hour slot
RATE_FLOOR = 1e-4


@dataclass(frozen=True)
class Expected:
    """Rates per route for one minute."""

    total: np.ndarray  # level + time-of-day offset
    mixed: np.ndarray  # level + time-of-day offset net of mix + this minute's mix effect
    mix_now: np.ndarray  # this minute's mix effect: its standardised rate minus the baseline mix's
    margin: np.ndarray  # what a test adds to either while the baseline is learning (0 once it is seasonal)


def smooth_slots(values: np.ndarray) -> np.ndarray:
    """Weighted sum of each slot with its neighbours, around the clock (axis 1)."""
    before, here, after = SMOOTHING
    return before * np.roll(values, 1, axis=1) + here * values + after * np.roll(values, -1, axis=1)


class SeasonalBaseline(BaselineHistory):
    """Each route's expected rate this minute (``expect``), estimated from its history (``refresh``)."""

    # the estimates per route (routes first), allocated by _allocate_derived and kept by refresh
    total: np.ndarray
    history_claims: np.ndarray
    warm: np.ndarray
    rho: np.ndarray
    level: np.ndarray
    slice_rate: np.ndarray
    slice_claims: np.ndarray
    baseline_standard: np.ndarray
    offset_total: np.ndarray
    offset_mixed: np.ndarray
    minute_sd: np.ndarray
    expectation_sd: np.ndarray
    margin: np.ndarray
    DERIVED = {
        "total": 0,
        "history_claims": 0,
        "warm": 0,
        "rho": 0,
        "level": 0,
        "slice_rate": 0,
        "slice_claims": 0,
        "baseline_standard": 0,
        "offset_total": 0,
        "offset_mixed": 0,
        "minute_sd": 0,
        "expectation_sd": 0,
        "margin": 0,
    }

    def __init__(self, config: DetectorConfig, n_routes: int, n_fields: int, n_slices: int = 1):
        super().__init__(config, n_routes, n_fields, n_slices)
        self._allocate_derived(n_routes)
        self.refresh()

    def _allocate_derived(self, n: int) -> None:
        shapes = {
            "total": (self.n_fields,),
            "slice_rate": (self.n_slices,),
            "slice_claims": (self.n_slices,),
            "offset_total": (self.per_day,),
            "offset_mixed": (self.per_day,),
        }
        for name in self.DERIVED:
            setattr(self, name, np.zeros((n, *shapes.get(name, ())), dtype=bool if name == "warm" else float))

    # -- routes joining, and a route's state ------------------------------------------------------------
    def add_rows(self, k: int) -> None:
        n = self.n_routes
        grow(self, {**self.ROW_ARRAYS, **self.DERIVED}, k)
        self.refresh(np.arange(n, n + k))

    # -- estimates -----------------------------------------------------------------------------------
    def refresh(self, rows: np.ndarray | None = None) -> None:
        """Re-derive the estimates from the history, of every route or of ``rows``."""
        at = slice(None) if rows is None else rows
        learning = self.learning[at]
        weights = self._level_weights(self.ring[at], learning)[..., None]
        t = (weights * self.ring[at]).sum(axis=1)[:, : self.n_fields]
        claims = t[:, CLAIMS]
        history_claims = self.season[at][:, :, SEASON_CLAIMS].sum(axis=1)
        # warm-up: the whole history must hold enough claims (a quiet route's day may hold fewer than that: its
        # threshold carries its level's error), and the level some (after a long outage its day may be empty)
        self.warm[at] = (history_claims >= self.config.min_baseline_claims) & (claims > 0)
        p, self.rho[at] = self._rate_and_rho(t)
        self.total[at], self.history_claims[at], self.level[at] = t, history_claims, p
        slices = (weights[..., None] * self.slice_ring[at]).sum(axis=1)
        prior = self.config.slice_prior_claims  # shrinks a thin slice's rate towards the route's
        slice_rate = (slices[..., 1] + prior * p[:, None]) / (slices[..., 0] + prior)
        share = slices[..., 0] / np.maximum(slices[..., 0].sum(axis=1, keepdims=True), 1.0)
        self.slice_rate[at], self.slice_claims[at] = slice_rate, slices[..., 0]
        self.baseline_standard[at] = (share * slice_rate).sum(axis=1)
        self._refresh_offsets(at)
        variance = claim_variance(t, p, self.rho[at])
        self.margin[at] = np.where(learning, self._earned_margin(self.ring[at], variance), 0.0)
        minutes = weights[:, :, 0].sum(axis=1) * self.config.block_minutes
        self.minute_sd[at] = np.sqrt(variance / np.maximum(claims / np.maximum(minutes, 1.0), 1e-9))
        # the expectation's own error: the level's, and once seasonal the time-of-day slot's (its 1-2-1 smoothing
        # keeps 0.375 of one slot's variance). While learning the margin covers what the young level may be off by:
        # counted in the threshold too, it would be paid twice (bench/drift.py --day-one)
        slot = np.where(self.seasonal[at], 0.375 * variance / np.maximum(history_claims / self.per_day, 1.0), 0.0)
        self.expectation_sd[at] = np.where(learning, 0.0, np.sqrt(variance / np.maximum(claims, 1.0) + slot))
        self.revision += 1

    def _rate_and_rho(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pooled rate of sums (routes × fields) and the intra-answer correlation they show."""
        claims = t[:, CLAIMS]
        p = np.clip(t[:, FAILED] / np.maximum(claims, 1.0), RATE_FLOOR, 1 - RATE_FLOOR)
        residual = np.maximum(t[:, FAILED_SQ] - 2 * p * t[:, FAILED_CLAIMS] + p * p * t[:, CLAIMS_SQ], 0.0)
        spread = t[:, CLAIMS_SQ] - claims
        rho = np.where(spread > 0, (residual / (p * (1 - p)) - claims) / np.where(spread > 0, spread, 1.0), 0.0)
        return p, np.clip(rho, 0.0, 1.0) if self.config.overdispersion else np.zeros_like(rho)

    def _earned_margin(self, ring: np.ndarray, variance: np.ndarray) -> np.ndarray:
        """The margin a learning route has earned: the over-dispersion of its finished hours around the level the
        test would have used for each (the two hours before it), beyond sampling noise (``variance`` being a
        claim's): the error the unmodelled time of day gives a young level. ``learning_margin`` is its prior, worth
        ``margin_prior_hours`` hours; the margin is ``margin_spread`` times the spread. A flat route's margin fades
        within hours; a swinging one keeps what it shows."""
        c = self.config
        if self.block is None:
            return np.full(ring.shape[0], c.learning_margin)
        order = [(self.block - k) % self.n_recent for k in range(self.n_recent, 0, -1)]  # oldest first
        claims, failed = ring[:, order, CLAIMS].astype(float), ring[:, order, FAILED].astype(float)
        before_claims, before_failed = claims[:, 1:-1] + claims[:, :-2], failed[:, 1:-1] + failed[:, :-2]
        # an hour cut short (an alarm's dropped minutes, an outage) says nothing of the route's swing: it is left out
        seen = (claims[:, 2:] >= 0.25 * before_claims) & (claims[:, 1:-1] > 0) & (claims[:, :-2] > 0)
        now_claims, before_claims = np.maximum(claims[:, 2:], 1.0), np.maximum(before_claims, 1.0)
        gap = failed[:, 2:] / now_claims - before_failed / before_claims
        noise = variance[:, None] * (1 / now_claims + 1 / before_claims)
        excess = in_order(np.where(seen, gap * gap - noise, 0.0))
        prior, hours = c.margin_prior_hours, in_order(seen.astype(float))
        spread = (prior * (c.learning_margin / max(c.margin_spread, 1e-9)) ** 2 + excess) / (prior + hours)
        return np.asarray(c.margin_spread * np.sqrt(np.maximum(spread, 0.0)))

    def _level_weights(self, ring: np.ndarray, learning: np.ndarray) -> np.ndarray:
        """Which blocks (1 or 0, routes × ring) the level pools: the last ``level_blocks`` finished ones, or
        while learning the last ``learning_blocks`` that hold claims (blocks left empty by a firing run or an
        outage are passed over, so the level stays what it was before them)."""
        weights = np.zeros(ring.shape[:2])
        if self.block is None:
            return weights
        newest_first = [(self.block - k) % self.n_recent for k in range(1, self.n_recent + 1)]
        weights[:, newest_first[: self.level_blocks]] = 1.0
        if learning.any():
            held = ring[learning][:, newest_first, CLAIMS] > 0
            chosen = np.zeros((held.shape[0], self.n_recent))
            chosen[:, newest_first] = held & (np.cumsum(held, axis=1) <= self.learning_blocks)
            weights[learning] = chosen
        return weights

    def _refresh_offsets(self, at: slice | np.ndarray) -> None:
        season = self.season[at]
        days = season.reshape(season.shape[0], self.n_blocks // self.per_day, self.per_day, 3).sum(axis=1)
        claims, failed, mix = days[..., SEASON_CLAIMS], days[..., SEASON_FAILED], days[..., SEASON_MIX]
        smoothed = smooth_slots(claims)
        enough = smoothed >= SLOT_MIN_CLAIMS
        all_claims = np.maximum(claims.sum(axis=1), 1.0)[:, None]
        seasonal = self.seasonal[at][:, None]
        for out, fails in ((self.offset_total, failed), (self.offset_mixed, failed - mix)):
            slot_rate = smooth_slots(fails) / np.maximum(smoothed, 1.0)
            out[at] = np.where(enough & seasonal, slot_rate - fails.sum(axis=1)[:, None] / all_claims, 0.0)

    def slot_position(self, minute: int) -> tuple[int, int, float]:
        """The two hour slots whose centres surround ``minute`` and the weight of the second."""
        u = (minute % 1440) / self.config.block_minutes - 0.5
        first = int(np.floor(u))
        return first % self.per_day, (first + 1) % self.per_day, u - first

    def expect(self, minute: int, slices: np.ndarray | None = None) -> Expected:
        j0, j1, f = self.slot_position(minute)
        offset_total = (1 - f) * self.offset_total[:, j0] + f * self.offset_total[:, j1]
        offset_mixed = (1 - f) * self.offset_mixed[:, j0] + f * self.offset_mixed[:, j1]
        if slices is None or self.n_slices == 1:
            mix_now = np.zeros_like(self.level)
        else:
            claims = slices[..., 0]
            n = claims.sum(axis=1)
            standard = (claims * self.slice_rate).sum(axis=1) / np.maximum(n, 1.0)
            mix_now = np.where(n > 0, standard - self.baseline_standard, 0.0)

        def clip(r: np.ndarray) -> np.ndarray:
            clipped: np.ndarray = np.clip(r, RATE_FLOOR, 1 - RATE_FLOOR)
            return clipped

        margin = np.where(self.learning, self.margin, 0.0)
        return Expected(clip(self.level + offset_total), clip(self.level + offset_mixed + mix_now), mix_now, margin)

    def minute_deff(self, x: np.ndarray) -> np.ndarray:
        """Design effect of each route's sum of answers (routes × fields)."""
        return design_effect(x, self.rho)


def in_order(x: np.ndarray) -> np.ndarray:
    """Each row's sum (routes × n), added in one order whatever the number of rows: numpy's own reduction may
    pair the terms differently by shape, and a route must be the detector it would be alone, to the last bit."""
    total = np.zeros(x.shape[0])
    for column in x.T:
        total += column
    return total


def claim_variance(t: np.ndarray, p: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """The variance one claim adds to a rate of sums ``t`` (routes × fields), as its answers cluster."""
    out: np.ndarray = p * (1 - p) * design_effect(t, rho)
    return out


def design_effect(x: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """Design effect of sums of answers (routes × fields) with intra-answer correlation ``rho``: 1 + ρ(Σn²/Σn − 1)."""
    claims = x[:, CLAIMS]
    mean_size = np.where(claims > 0, x[:, CLAIMS_SQ] / np.maximum(claims, 1.0), 1.0)
    out: np.ndarray = 1.0 + rho * (mean_size - 1.0)
    return out
