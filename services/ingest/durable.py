"""Write a batch until the store accepts it: the ingest path never skips a batch it could not store.

Decoding runs on one thread and the store write on another (``run_decode`` / ``run_store``,
each ``await run(fn, *args)``), so the event loop keeps collecting the next batch meanwhile.
"""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import Awaitable, Callable, Sequence

from services.core.threads import Run
from services.core.backoff import Backoff
from services.core.clock import utcnow
from services.core.metrics import Metrics
from services.ingest.ingestor import BatchOutcome, Health, Ingestor, RawMessage
from services.store.backends import StoreError

log = logging.getLogger(__name__)



class DurableWriter:
    """Decode once, then retry the write with backoff while the store is down; marks Health and observes metrics.

    ``clock`` says when a batch arrived: the ingest window is judged at that time."""

    def __init__(self, ingestor: Ingestor, health: Health, metrics: Metrics, backoff: Backoff,
                 run_store: Run, run_decode: Run, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 clock: Callable[[], datetime] = utcnow):
        self.ingestor = ingestor
        self.health = health
        self.metrics = metrics
        self.backoff = backoff
        self.run_store = run_store
        self.run_decode = run_decode
        self.sleep = sleep
        self.clock = clock

    async def write(self, messages: Sequence[RawMessage]) -> BatchOutcome:
        """Returns only once the batch is stored; StoreError is retried forever (offsets stay uncommitted)."""
        batch = await self.run_decode(self.ingestor.split, messages, self.clock())
        while True:
            started = time.perf_counter()
            try:
                outcome = await self.run_store(self.ingestor.write, batch)
            except StoreError as exc:
                self.health.mark_failed(str(exc)[:500])
                self.metrics.store_failures.inc()
                delay = self.backoff.next_delay()
                log.warning("store write failed (%s); retrying in %.1fs, offsets not committed", str(exc)[:200], delay)
                await self.sleep(delay)
                continue
            self.backoff.reset()
            self.health.mark_ok()
            self.metrics.ingest_seconds.observe(time.perf_counter() - started)
            return outcome
