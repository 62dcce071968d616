"""Send dead letters to the DLQ topic: provenance headers, truncation when too large, retry on broker errors.

The transport is injected: ``send(key, value, headers)`` awaits delivery (streams/ passes
Faust's topic send), so this needs neither Faust nor a broker to test.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from services.core.backoff import Backoff
from services.ingest.records import DeadLetter

log = logging.getLogger(__name__)

DLQ_TRUNCATE_BYTES = 64 * 1024
CONCURRENT_SENDS = 1000  # dead letters in the producer's hands at once: it batches them into few requests
Headers = list[tuple[str, bytes]]
Send = Callable[[bytes, bytes, Headers], Awaitable[None]]


def too_large(exc: BaseException | None) -> bool:
    """The producer refused the record for its size (possibly wrapped, e.g. in Faust's ProducerSendError)."""
    while exc is not None:
        if isinstance(exc, MessageSizeTooLargeError):
            return True
        exc = exc.__cause__
    return False


def headers_for(d: DeadLetter) -> Headers:
    headers = [
        ("claimwatch-reason", d.rejection.reason.encode()),
        ("claimwatch-rule", d.rejection.rule.encode()),
        ("claimwatch-source", f"{d.topic}/{d.partition}/{d.offset}".encode()),
        ("claimwatch-original-size", str(len(d.raw)).encode()),
    ]
    if d.index is not None:  # one event of a batch envelope; the value holds that event alone
        headers.append(("claimwatch-envelope-index", str(d.index).encode()))
    return headers


class DeadLetterSender:
    """Every dead letter is sent before its batch is acked; broker errors (``retry_on``) are retried with backoff.

    ``backoff`` makes a fresh Backoff per ``send_all`` call, so concurrent batches do not share retry state.
    """

    def __init__(
        self,
        send: Send,
        backoff: Callable[[], Backoff],
        retry_on: tuple[type[BaseException], ...] = (KafkaError,),
        truncate_bytes: int = DLQ_TRUNCATE_BYTES,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.send = send
        self.backoff = backoff
        self.retry_on = retry_on
        self.truncate_bytes = truncate_bytes
        self.sleep = sleep

    async def send_all(self, dead: Sequence[DeadLetter]) -> None:
        """Up to CONCURRENT_SENDS under way at once: awaited one by one, a flood of bad input (tens of thousands
        of dead letters a batch) moved at one broker round trip each."""
        backoff = self.backoff()
        for start in range(0, len(dead), CONCURRENT_SENDS):
            await asyncio.gather(*(self._send_until_sent(d, backoff) for d in dead[start : start + CONCURRENT_SENDS]))

    async def _send_until_sent(self, d: DeadLetter, backoff: Backoff) -> None:
        while True:
            try:
                await self.send_one(d)
                return
            except self.retry_on as exc:  # broker trouble: retry, never ack unsent
                delay = backoff.next_delay()
                log.warning("DLQ send failed (%r); retrying in %.1fs", exc, delay)
                await self.sleep(delay)

    async def send_one(self, d: DeadLetter) -> None:
        headers = headers_for(d)
        key = d.counted_route.encode()
        try:
            await self.send(key, d.raw, headers)
        except Exception as exc:
            if not too_large(exc):
                raise
            # Larger than the DLQ topic takes: keep the head; the store row records the full size.
            await self.send(key, d.raw[: self.truncate_bytes], headers + [("claimwatch-truncated", b"1")])
