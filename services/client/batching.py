"""Pack checked events into batch envelopes per route key, as the contract's Transport allows:
``{"schema": "claimwatch.verdicts/v1", "events": [...]}``, 1 to 1000 events, at most 1 MiB.

EnvelopeBatcher is a plain object with the clock passed in (``now``); LingeringBatcher adds the
lock and the thread that hands on batches whose linger time is up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.contract.model import ENVELOPE_SCHEMA, MAX_ENVELOPE_EVENTS

ENVELOPE_HEAD = b'{"schema":"' + ENVELOPE_SCHEMA.encode() + b'","events":['
ENVELOPE_TAIL = b"]}"
# Under the contract's 1 MiB, with room for the key and record overhead within a broker's default
# message.max.bytes (1 MB + 12 bytes).
DEFAULT_ENVELOPE_BYTES = 900 * 1024
DEFAULT_LINGER_SECONDS = 0.02  # as the Kafka client's own linger_ms default here


def envelope(values: list[bytes]) -> bytes:
    return ENVELOPE_HEAD + b",".join(values) + ENVELOPE_TAIL


@dataclass
class Batch:
    """Events waiting for one route key: their serialised values and whatever the sender tracks per event."""

    key: bytes | None  # None: events without a route (a replayed file's), sent unkeyed
    opened_at: float
    values: list[bytes] = field(default_factory=list)
    items: list[Any] = field(default_factory=list)
    nbytes: int = len(ENVELOPE_HEAD) + len(ENVELOPE_TAIL)

    def add(self, value: bytes, item: Any) -> None:
        self.nbytes += len(value) + (1 if self.values else 0)
        self.values.append(value)
        self.items.append(item)

    def size_with(self, value: bytes) -> int:
        return self.nbytes + len(value) + (1 if self.values else 0)

    def message(self) -> bytes:
        """The Kafka value: an envelope, or the plain event when the batch holds one (any consumer reads it)."""
        return self.values[0] if len(self.values) == 1 else envelope(self.values)


class EnvelopeBatcher:
    """Open batches per key. ``add`` returns batches that are full; ``due`` those whose linger is up;
    ``drain`` all (on flush and close). An event too large for any envelope goes alone."""

    def __init__(
        self,
        max_events: int = MAX_ENVELOPE_EVENTS,
        max_bytes: int = DEFAULT_ENVELOPE_BYTES,
        linger_seconds: float = DEFAULT_LINGER_SECONDS,
    ):
        if not 1 <= max_events <= MAX_ENVELOPE_EVENTS:
            raise ValueError(f"max_events must be 1 to {MAX_ENVELOPE_EVENTS}, got {max_events}")
        if max_bytes > 1 << 20:
            raise ValueError(f"max_bytes must be at most 1 MiB (the contract's limit), got {max_bytes}")
        if linger_seconds < 0:
            raise ValueError(f"linger_seconds must be >= 0, got {linger_seconds}")
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.linger_seconds = linger_seconds
        self._open: dict[bytes | None, Batch] = {}

    def __len__(self) -> int:
        """Events waiting."""
        return sum(len(b.values) for b in self._open.values())

    def add(self, key: bytes | None, value: bytes, item: Any, now: float) -> list[Batch]:
        ready = []
        batch = self._open.get(key)
        if batch is not None and batch.size_with(value) > self.max_bytes:
            ready.append(self._open.pop(key))
            batch = None
        if batch is None:
            batch = Batch(key, now)
            if batch.size_with(value) > self.max_bytes:  # sent as a plain single-event message
                batch.add(value, item)
                return ready + [batch]
            self._open[key] = batch
        batch.add(value, item)
        if len(batch.values) >= self.max_events:
            ready.append(self._open.pop(key))
        return ready

    def next_due(self) -> float | None:
        """When the oldest open batch's linger is up, or None when nothing waits."""
        if not self._open:
            return None
        return min(b.opened_at for b in self._open.values()) + self.linger_seconds

    def due(self, now: float) -> list[Batch]:
        keys = [k for k, b in self._open.items() if b.opened_at + self.linger_seconds <= now]
        return [self._open.pop(k) for k in keys]

    def drain(self) -> list[Batch]:
        batches, self._open = list(self._open.values()), {}
        return batches


class LingeringBatcher:
    """An EnvelopeBatcher behind a lock, with a thread that hands on each batch once its linger is up.

    ``send(batches, raise_errors)`` is called with the lock held, so one key's batches leave in order;
    from the linger thread ``raise_errors`` is False (nobody would catch it there).
    """

    def __init__(
        self,
        batcher: EnvelopeBatcher,
        send: Callable[[list[Batch], bool], None],
        clock: Callable[[], float] = time.monotonic,
    ):
        self.batcher = batcher
        self.send = send
        self.clock = clock
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, key: bytes, value: bytes, item: Any) -> None:
        with self._lock:
            self.send(self.batcher.add(key, value, item, self.clock()), True)
            if self._thread is None:
                self._thread = threading.Thread(target=self._linger, name="claimwatch-envelopes", daemon=True)
                self._thread.start()
            self._lock.notify()

    def flush(self) -> None:
        with self._lock:
            self.send(self.batcher.drain(), True)

    def close(self) -> None:
        """Stops the linger thread; ``flush`` first, or what waits is dropped."""
        with self._lock:
            self._closed = True
            self._lock.notify()

    def _linger(self) -> None:
        with self._lock:
            while not self._closed:
                due, now = self.batcher.next_due(), self.clock()
                if due is None or due > now:
                    self._lock.wait(None if due is None else due - now)
                    continue
                self.send(self.batcher.due(now), False)
