"""One batch's way through the ingest path once Faust hands it over, how large it may be, and how
many may be under way.

    decode -> durable write -> dead letters to the DLQ topic -> metrics -> ack -> offset bookkeeping

Nothing is acked before the store and the DLQ topic hold the batch, so a crash redelivers it
and the idempotent writer counts each event once.

Group commit: batches decoded while the store is busy with an earlier write wait, and go in together as
the next write. A store write costs tens of milliseconds whatever its size (a part per table, the
views' plans), so under a backlog fewer, larger writes cost less per event; at a trickle each batch
is written as soon as it is decoded. Batches under way are bounded by ``InFlight``, so a group is too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass

from services.core.metrics import Metrics
from services.ingest.dead_letters import DeadLetterSender
from services.ingest.durable import DurableWriter
from services.ingest.ingestor import DecodedBatch, RawMessage
from services.ingest.offsets import OffsetTracker

log = logging.getLogger(__name__)


@dataclass
class _Waiting:
    messages: Sequence[RawMessage]
    batch: DecodedBatch
    ack: Callable[[], Awaitable[None]]
    done: asyncio.Future


class IngestPipeline:
    def __init__(self, writer: DurableWriter, dead_letters: DeadLetterSender, metrics: Metrics, offsets: OffsetTracker):
        self.writer = writer
        self.dead_letters = dead_letters
        self.metrics = metrics
        self.offsets = offsets
        self._waiting: list[_Waiting] = []
        self._committing: asyncio.Task | None = None

    async def finish(self, messages: Sequence[RawMessage], ack: Callable[[], Awaitable[None]]) -> None:
        """Decode the batch, store it (with any batches waiting beside it), send its dead letters, then ``ack`` it.
        Errors propagate unacked."""
        batch = await self.writer.decode(messages)
        waiting = _Waiting(messages, batch, ack, asyncio.get_running_loop().create_future())
        self._waiting.append(waiting)
        if self._committing is None or self._committing.done():
            self._committing = asyncio.ensure_future(self._commit_waiting())
        await waiting.done

    async def _commit_waiting(self) -> None:
        while self._waiting:
            group, self._waiting = self._waiting, []
            try:
                await self._commit(group)
            except BaseException as exc:  # each batch's caller sees it; none of the group is acked after it
                for waiting in group:
                    if not waiting.done.done():
                        waiting.done.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
            else:
                for waiting in group:
                    if not waiting.done.done():
                        waiting.done.set_result(None)

    async def _commit(self, group: list[_Waiting]) -> None:
        took = time.perf_counter()
        outcome = await self.writer.store(DecodedBatch.joined([w.batch for w in group]))
        log.debug(
            "%d batches (%d messages) written in %.3fs",
            len(group),
            sum(len(w.messages) for w in group),
            time.perf_counter() - took,
        )
        await self.dead_letters.send_all(outcome.dead)
        self.metrics.observe_batch(outcome.counts, outcome.dead, outcome.result.duplicates)
        for waiting in group:
            await waiting.ack()
            self.offsets.mark(waiting.messages)

    def cancel(self) -> None:
        """Stop committing (shutdown): what is not acked yet stays so, and is redelivered."""
        if self._committing is not None:
            self._committing.cancel()
        for waiting in self._waiting:
            waiting.done.cancel()
        self._waiting = []


class ByteSplitter:
    """Cuts a taken batch into consecutive slices of about ``max_bytes`` of message values.

    Faust's take counts messages, and a message may be an envelope of up to 1000 events, so a
    batch of 2000 messages could hold two million events. Decoding and writing slice by slice
    (each one its own unit in ``InFlight``) bounds the decoded events under way by bytes.
    A slice is full once it reaches ``max_bytes``, the message that passes it being its last: the
    take's own rule (streams/take.py), so a batch it hands over full by bytes is one slice, not a
    slice and a one-envelope remainder written on its own.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max(1, max_bytes)

    def slices(self, messages: Sequence[RawMessage]) -> list[slice]:
        out, start, size = [], 0, 0
        for i, m in enumerate(messages):
            size += len(m.value or b"")
            if size >= self.max_bytes:
                out.append(slice(start, i + 1))
                start, size = i + 1, 0
        if start < len(messages):
            out.append(slice(start, len(messages)))
        return out


class InFlight:
    """At most ``depth`` batches under way; finished ones are awaited in order, so an error surfaces.

    While one batch is written the next is decoded and the one after is collected; a store
    outage therefore stops consumption instead of growing memory.
    """

    def __init__(self, depth: int):
        self.depth = max(1, depth)
        self.tasks: deque[asyncio.Future] = deque()

    async def add(self, work: Coroutine) -> None:
        self.tasks.append(asyncio.ensure_future(work))
        while len(self.tasks) >= self.depth:
            await self.tasks.popleft()  # an error here stops the caller: nothing after it is acked
        while self.tasks and self.tasks[0].done():
            await self.tasks.popleft()

    def cancel(self) -> None:
        """Drop what is under way (unacked: redelivered after a restart)."""
        while self.tasks:
            self.tasks.popleft().cancel()
