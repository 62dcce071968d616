"""Which offsets the ingest path has finished (stored, dead letters sent, acked), for the consumer-lag gauge."""
from __future__ import annotations

from typing import Iterable

from services.ingest.ingestor import RawMessage


class OffsetTracker:
    """The highest finished offset per (topic, partition)."""

    def __init__(self) -> None:
        self._done: dict[tuple[str, int], int] = {}

    def mark(self, messages: Iterable[RawMessage]) -> None:
        for m in messages:
            key = (m.topic, m.partition)
            self._done[key] = max(m.offset, self._done.get(key, -1))

    def done(self, topic: str, partition: int) -> int:
        """The highest finished offset, or -1 before the first."""
        return self._done.get((topic, partition), -1)

    def lag(self, topic: str, partition: int, highwater: int) -> int:
        """Messages behind the log end: the highwater mark is the offset of the next message to be written."""
        return max(0, highwater - self.done(topic, partition) - 1)
