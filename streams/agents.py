"""The ingest agent: Faust hands batches to services/ingest/pipeline.py and acks them once it is done."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaError
from faust.exceptions import ProducerSendError

from services.core.backoff import Backoff
from services.ingest.budget import ByteBudget
from services.ingest.dead_letters import DeadLetterSender
from services.ingest.durable import WriteAbandoned
from services.ingest.ingestor import RawMessage
from services.ingest.pipeline import ByteSplitter, InFlight, IngestPipeline
from streams.app import value_bytes
from streams.take import take_batches

if TYPE_CHECKING:
    from services.app.sections import IngestSettings

log = logging.getLogger(__name__)


def dead_letter_sender(dlq, backoff: Callable[[], Backoff]) -> DeadLetterSender:
    """Dead letters go through Faust's producer (``dlq`` is the DLQ topic); sends return once delivered."""

    async def send(key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        await (await dlq.send(key=key, value=value, headers=headers))

    return DeadLetterSender(send, backoff, retry_on=(ProducerSendError, KafkaError))


def raw_messages(batch) -> list[RawMessage]:
    return [
        RawMessage(
            e.message.topic,
            e.message.partition,
            e.message.offset,
            e.message.value,
            e.message.key,
            timestamp_ms(e.message.timestamp),
        )
        for e in batch
    ]


def timestamp_ms(seconds: float | None) -> int:
    """Faust gives the record's timestamp in seconds; the broker keeps whole milliseconds."""
    return -1 if seconds is None else round(seconds * 1000)


async def ack_all(stream, batch, budget: ByteBudget) -> None:
    """Ack a stored batch and give its bytes back to the buffer's budget (streams/app.py)."""
    for event in batch:
        await stream.ack(event)
    budget.give_back(sum(map(value_bytes, batch)))


def forget_unacked(app) -> None:
    """Faust's stop waits until every delivered message is acked (stream_wait_empty); a batch abandoned at shutdown
    never will be. Forget them: their offsets are not committed (commits follow acks), so they are redelivered at
    the next start."""
    app.consumer._unacked_messages.clear()  # only wait_empty reads it


def register_ingest(app, verdicts, pipeline: IngestPipeline, settings: IngestSettings) -> None:
    @app.agent(verdicts)
    async def ingest(stream):
        inflight, splitter = InFlight(settings.pipeline_depth), ByteSplitter(settings.max_batch_bytes)

        async def finish(messages, ack) -> None:
            try:
                await pipeline.finish(messages, ack)
            except WriteAbandoned as exc:  # shutting down: what is not stored stays unacked, for the next start
                log.warning("ingest stopped: %s", exc)
                forget_unacked(app)

        try:
            async for batch in take_batches(
                stream, settings.batch_size, settings.max_batch_bytes, settings.batch_seconds
            ):
                messages = raw_messages(batch)
                for part in splitter.slices(messages):  # acked part by part, in order
                    await inflight.add(finish(messages[part], partial(ack_all, stream, batch[part], app.byte_budget)))
        finally:
            inflight.cancel()
            pipeline.cancel()
