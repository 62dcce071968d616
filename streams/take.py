"""Batches from a Faust stream, full by message count or by bytes, unacked.

Faust's ``Stream.noack_take(max_, within)`` counts messages only, so a stream of batch envelopes (up to 1000
events, ~1 MB each) never fills a batch of ``batch_size`` messages: every batch waited out ``within`` while the
byte budget (streams/app.py) had already stopped fetching. This is the same take, also full at ``max_bytes``
of message values, so a backlog of envelopes moves as soon as a unit of work is buffered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from mode.utils.futures import notify

from streams.app import value_bytes


async def take_batches(stream, max_messages: int, max_bytes: int, within: float) -> AsyncIterator[list]:
    """Yield lists of Faust events, each at most ``max_messages`` and about ``max_bytes`` (the message that
    passes it is the last), or what arrived within ``within`` seconds. Acking is the caller's."""
    buffer: list = []
    held = 0
    full, consumed = asyncio.Event(), asyncio.Event()
    consuming: asyncio.Future | None = None  # set while the caller holds a batch: no event joins the buffer

    async def add_to_buffer(value):
        nonlocal consuming, held
        try:
            if consuming is not None:
                try:
                    await consuming
                finally:
                    consuming = None
            event = stream.current_event
            if event is None:
                raise RuntimeError("take buffer found current_event is None")
            buffer.append(event)
            held += value_bytes(event)
            if len(buffer) >= max_messages or held >= max_bytes:
                full.set()
                consumed.clear()
                await stream.wait(consumed)  # strict: a full batch takes no more until it is handed over
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            stream.log.exception("Error adding to take buffer: %r", exc)
            await stream.crash(exc)
        return value

    acks_were = stream.enable_acks
    stream.enable_acks = False  # the caller acks once a batch is stored
    stream.add_processor(add_to_buffer)
    stream._enable_passive(aiter(stream.channel))  # as noack_take: the stream is consumed in the background
    try:
        while not stream.should_stop:
            await stream.wait_for_stopped(full, timeout=within)
            if buffer:
                consuming = stream.loop.create_future()
                try:
                    yield list(buffer)
                finally:
                    buffer.clear()
                    held = 0
                    notify(consuming)
                    full.clear()
                    consumed.set()
    finally:
        stream.enable_acks = acks_were
        stream._processors.remove(add_to_buffer)
