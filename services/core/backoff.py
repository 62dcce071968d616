"""Exponential backoff with full jitter, shared by every retry loop (store writes, DLQ sends, notifications)."""

from __future__ import annotations

import random


class Backoff:
    """``next_delay`` grows from ``initial`` to ``maximum``; ``reset`` after a success."""

    def __init__(self, initial: float, maximum: float, rng: random.Random | None = None):
        self.initial, self.maximum = initial, maximum
        self.attempt = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        ceiling = min(self.maximum, self.initial * (2**self.attempt))
        self.attempt += 1
        return self._rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempt = 0
