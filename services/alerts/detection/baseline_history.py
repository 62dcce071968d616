"""The history a seasonal baseline keeps of each route, as small as what reads it.

Every field for the blocks a level can pool (``ring``: the last ``baseline_minutes``, or a day while learning),
claims, failures and mix for the days the time of day reads (``season``), and a pending run's minutes only for the
routes that have one (``held``). Each route has its own age (``history_blocks``), so a route can join a fleet of
older ones (services/alerts/detection/rows.py). A route's stored state is its history; what the baseline
estimates from it (services/alerts/detection/baseline.py) is derived again by ``refresh``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from services.alerts.detection.columns import CLAIMS, FAILED, OK, PENDING
from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.rows import HISTORY, put, take


class BaselineHistory:
    """Finished blocks of every route, the block being filled, and a pending run's minutes held apart."""

    # the per-route history a route's state holds (``held`` apart); the estimates are derived from it by ``refresh``
    ROW_ARRAYS = {
        "ring": 0,
        "season": 0,
        "slice_ring": 0,
        "partial": 0,
        "partial_slices": 0,
        "holding": 0,
        "history_blocks": 0,
    }

    def __init__(self, config: DetectorConfig, n_routes: int, n_fields: int, n_slices: int = 1):
        self.config = config
        self.n_fields, self.n_slices = n_fields, n_slices
        self.per_day = 1440 // config.block_minutes
        self.level_blocks = max(1, config.baseline_minutes // config.block_minutes)
        self.learning_blocks = max(1, min(self.level_blocks, config.learning_level_minutes // config.block_minutes))
        days = max(config.season_days, -(-self.level_blocks // self.per_day))
        self.n_blocks = days * self.per_day
        # A level pools at most the last level_blocks, and while learning (under a day of history) nothing older
        # than a day holds claims: every field is kept for those blocks only.
        self.n_recent = max(self.level_blocks, self.per_day)
        # each block: the input sums plus Σ claims × that minute's mix effect (the last column)
        self.ring = np.zeros((n_routes, self.n_recent, n_fields + 1), dtype=HISTORY)
        self.season = np.zeros(
            (n_routes, self.n_blocks, 3), dtype=HISTORY
        )  # claims, failed, mix: what the time of day reads
        self.slice_ring = np.zeros((n_routes, self.n_recent, n_slices, 2), dtype=HISTORY)  # claims, failed per slice
        self.partial = np.zeros((n_routes, n_fields + 1))
        self.partial_slices = np.zeros((n_routes, n_slices, 2))
        # a pending run's minutes, by route and by the block they belong in, until the run clears or fires
        self.held: dict[int, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self.holding = np.zeros(n_routes, dtype=bool)
        self.block: int | None = None
        self.revision = 0  # counts refreshes, so what is derived from the estimates knows when they changed
        self.history_blocks = np.zeros(n_routes, dtype=np.int64)  # blocks of history behind the ring (at most n_blocks)

    def refresh(self, rows: np.ndarray | None = None) -> None:
        """Derive the estimates again from the history, of every route or of ``rows`` (the baseline's own)."""
        raise NotImplementedError

    @property
    def n_routes(self) -> int:
        return self.partial.shape[0]

    def row_state(self, row: int) -> dict[str, Any]:
        held = self.held.get(row, {})
        blocks = sorted(held)
        return {
            **take(self, self.ROW_ARRAYS, row),
            "held_blocks": np.array(blocks, dtype=np.int64),
            "held_sums": np.array([held[b][0] for b in blocks]).reshape(len(blocks), self.n_fields + 1),
            "held_slices": np.array([held[b][1] for b in blocks]).reshape(len(blocks), self.n_slices, 2),
        }

    def load_rows(self, rows: list[int], states: list[dict[str, Any]], minute: int) -> None:
        """Routes ``rows`` as ``row_state`` gave each, at ``minute`` (the fleet's, and the states')."""
        for row, state in zip(rows, states):
            put(self, self.ROW_ARRAYS, row, state)
            self.held.pop(row, None)
            if len(state["held_blocks"]):
                self.held[row] = {
                    int(b): (np.array(s, dtype=float), np.array(sl, dtype=float))
                    for b, s, sl in zip(state["held_blocks"], state["held_sums"], state["held_slices"])
                }
        if self.block is None:
            self.block = minute // self.config.block_minutes
        self.refresh(np.asarray(rows, dtype=np.int64))

    # -- history -------------------------------------------------------------------------------------
    def roll(self, minute: int) -> None:
        """Commit the finished block(s) when ``minute`` starts a new one; blocks skipped by a gap are empty."""
        block = minute // self.config.block_minutes
        if self.block is None:
            self.block = block
            return
        if block == self.block:
            return
        self._store(self.block, self.partial, self.partial_slices)
        for skipped in range(self.block + 1, min(block, self.block + 1 + self.n_blocks)):
            self._store(skipped, 0.0, 0.0)
        self.history_blocks = np.minimum(self.n_blocks, self.history_blocks + block - self.block)
        self.partial[:] = 0.0
        self.partial_slices[:] = 0.0
        self.block = block
        self.refresh()

    def _store(self, block: int, sums: np.ndarray | float, slices: np.ndarray | float) -> None:
        sums = np.broadcast_to(sums, self.partial.shape)
        self.ring[:, block % self.n_recent] = sums
        self.season[:, block % self.n_blocks] = sums[:, [CLAIMS, FAILED, -1]]
        self.slice_ring[:, block % self.n_recent] = slices

    def admit(self, x: np.ndarray, slices: np.ndarray | None, mix_now: np.ndarray, state: np.ndarray) -> None:
        """Add one minute to the current block by each route's state after detection."""
        row = np.concatenate([x, (x[:, CLAIMS] * mix_now)[:, None]], axis=1)
        slices = np.zeros_like(self.partial_slices) if slices is None else slices
        ok = state == OK
        self.partial[ok] += row[ok]
        self.partial_slices[ok] += slices[ok]
        if not self.config.hold_pending:
            return
        assert self.block is not None, "roll() places a minute's block before it is admitted"
        pending = state == PENDING
        for r in np.flatnonzero(pending):
            sums, sl = self.held.setdefault(int(r), {}).setdefault(
                self.block, (np.zeros(self.n_fields + 1), np.zeros((self.n_slices, 2)))
            )
            sums += row[r]
            sl += slices[r]
        earlier = []
        for r in np.flatnonzero(self.holding & ok):  # the run cleared without firing: its minutes join their blocks
            blocks = self.held.pop(int(r), {})
            now = blocks.pop(self.block, None)
            if now is not None:
                self.partial[r] += now[0]
                self.partial_slices[r] += now[1]
            for block, (sums, sl) in blocks.items():
                if sums.any() or sl.any():
                    self._add_held(int(r), block, sums, sl)
                    earlier.append(int(r))
        for r in np.flatnonzero(self.holding & ~pending):  # a firing run's minutes are dropped
            self.held.pop(int(r), None)
        self.holding = pending
        if earlier:
            self.refresh(np.unique(earlier))

    def _add_held(self, r: int, block: int, sums: np.ndarray, slices: np.ndarray) -> None:
        assert self.block is not None  # called by admit, after a roll
        age = self.block - block
        if age <= self.n_recent:  # (at n_recent: the current block's position, which holds that block until the roll)
            self.ring[r, block % self.n_recent] += sums
            self.slice_ring[r, block % self.n_recent] += slices
        if age < self.n_blocks:
            self.season[r, block % self.n_blocks] += sums[[CLAIMS, FAILED, -1]]

    @property
    def learning(self) -> np.ndarray:
        """Per route: True until a full day of history exists (the expectation cannot know the time of day yet)."""
        return self.history_blocks < self.per_day

    @property
    def history_hours(self) -> np.ndarray:
        return self.history_blocks * self.config.block_minutes / 60

    @property
    def seasonal(self) -> np.ndarray:
        """Per route: True once a full day of history exists (and seasonality is on)."""
        return (self.config.season_days > 0) & (self.history_blocks >= self.per_day)
