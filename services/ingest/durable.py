"""Write a batch until the store accepts it: the ingest path never skips a batch it could not store.

Decoding runs on one thread and the store write on another (``run_decode`` / ``run_store``,
each ``await run(fn, *args)``), so the event loop keeps collecting the next batch meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from services.core.backoff import Backoff
from services.core.clock import utcnow
from services.core.errors import StoreError
from services.core.metrics import Metrics
from services.core.threads import Run
from services.ingest.ingestor import BatchOutcome, DecodedBatch, Health, Ingestor, RawMessage

log = logging.getLogger(__name__)
PAUSE_SLICE = 0.25  # a backoff pause notices a shutdown within this long


class WriteAbandoned(Exception):
    """The process is stopping while the store refuses the batch: it stays unacked, so it is redelivered."""


class DurableWriter:
    """Decode once, then retry the write with backoff while the store is down; marks Health and observes metrics.

    ``clock`` says when a batch arrived: the ingest window is judged at that time. ``stopping`` says the process
    is shutting down: a refused batch is then abandoned (``WriteAbandoned``) instead of retried, so shutdown
    never waits on a store that refuses every write."""

    def __init__(
        self,
        ingestor: Ingestor,
        health: Health,
        metrics: Metrics,
        backoff: Backoff,
        run_store: Run,
        run_decode: Run,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], datetime] = utcnow,
        stopping: Callable[[], bool] = lambda: False,
    ):
        self.ingestor = ingestor
        self.health = health
        self.metrics = metrics
        self.backoff = backoff
        self.run_store = run_store
        self.run_decode = run_decode
        health.writes = True
        self.sleep = sleep
        self.clock = clock
        self.stopping = stopping

    async def write(self, messages: Sequence[RawMessage]) -> BatchOutcome:
        """Returns only once the batch is stored; StoreError is retried forever (offsets stay uncommitted)."""
        return await self.store(await self.decode(messages))

    async def decode(self, messages: Sequence[RawMessage]) -> DecodedBatch:
        return await self.run_decode(self.ingestor.split, messages, self.clock())

    async def store(self, batch: DecodedBatch) -> BatchOutcome:
        """Write a decoded batch (or several joined: ``DecodedBatch.joined``) until the store accepts it."""
        while True:
            started = time.perf_counter()
            try:
                outcome = await self.run_store(self.ingestor.write, batch)
            except StoreError as exc:
                self.health.mark_failed(str(exc)[:500], self.clock())
                self.metrics.store_failures.inc()
                if self.stopping():
                    raise WriteAbandoned(
                        f"stopping while the store refuses writes ({str(exc)[:200]}); "
                        f"{batch.messages} messages stay uncommitted and are redelivered"
                    ) from None
                delay = self.backoff.next_delay()
                log.warning("store write failed (%s); retrying in %.1fs, offsets not committed", str(exc)[:200], delay)
                await self._pause(delay)
                continue
            self.backoff.reset()
            self.health.mark_ok()
            self.metrics.ingest_seconds.observe(time.perf_counter() - started)
            return outcome

    async def _pause(self, seconds: float) -> None:
        """The backoff pause, cut short by a shutdown."""
        left = seconds
        while left > 0 and not self.stopping():
            await self.sleep(min(left, PAUSE_SLICE))
            left -= PAUSE_SLICE
