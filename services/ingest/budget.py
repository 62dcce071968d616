"""How many bytes of messages the worker may hold at once: buffered by the stream or taken and not yet acked.

Faust's stream buffer counts messages, and a message may be an envelope of up to ``max_event_bytes``; counted in
messages, a backlog of large envelopes is held whole. The budget counts bytes: once it is spent, delivery waits
(the consumer stops fetching) until acked batches give bytes back.
"""

from __future__ import annotations

from collections.abc import Callable


class ByteBudget:
    """``spend`` when a message is buffered, ``give_back`` once it is acked (or dropped unacked). A message is
    always let in while nothing is held, so one larger than the budget still passes, on its own."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max(1, max_bytes)
        self.held = 0
        self.peak = 0
        self._listeners: list[Callable[[], None]] = []

    @property
    def spent(self) -> bool:
        return self.held >= self.max_bytes

    def spend(self, n: int) -> None:
        self.held += n
        self.peak = max(self.peak, self.held)

    def give_back(self, n: int) -> None:
        self.held = max(0, self.held - n)
        if not self.spent:
            for listener in self._listeners:
                listener()

    def on_give_back(self, listener: Callable[[], None]) -> None:
        """``listener()`` runs whenever bytes come back and the budget has room again."""
        self._listeners.append(listener)
