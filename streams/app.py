"""Faust wiring: topics, the ingest agent and leader-only timers. Logic lives elsewhere.

Delivery: the agent takes batches without acking (``noack_take``), writes them to the
store (retrying with backoff while the store is down), sends invalid messages to the DLQ
topic, and only then acks. Faust commits acked offsets (gap-aware, so batches may finish
out of order), so a crash redelivers unacked messages and the idempotent writer counts
each event once.

Pipelining: while one batch is written (chDB releases the GIL), the next is decoded on
its own thread and the one after is collected. At most ``ingest.pipeline_depth`` batches
are in flight; a store outage therefore stops consumption instead of growing memory.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import faust
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from faust.exceptions import ProducerSendError

from services.core.metrics import Metrics
from services.app.settings import Settings
from services.store.backends import StoreError
from services.core.backoff import Backoff
from services.ingest.ingestor import BatchOutcome, Health, Ingestor, RawMessage

log = logging.getLogger("claimwatch.worker")

DLQ_TRUNCATE_BYTES = 64 * 1024
Timer = Callable[[], Awaitable[None]]


@dataclass
class WorkerParts:
    """What the composition root hands to the Faust app."""

    settings: Settings
    ingestor: Ingestor
    metrics: Metrics
    health: Health
    executor: ThreadPoolExecutor  # the store's thread: every chDB call goes through it
    leader_timers: list[tuple[float, Timer]] = field(default_factory=list)
    tasks: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    decode_pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="decode"))


def kafka_urls(bootstrap: str) -> list[str]:
    return [f"kafka://{host.strip()}" for host in bootstrap.split(",") if host.strip()]


def create_app(parts: WorkerParts) -> faust.App:
    s = parts.settings
    datadir = Path("var/faust") / s.topic_prefix  # Faust's own scratch files, out of the working tree
    datadir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        f"{s.topic_prefix}-worker",
        broker=kafka_urls(s.kafka or ""),
        autodiscover=False,
        web_enabled=False,
        store="memory://",
        datadir=str(datadir),
        topic_partitions=s.partitions,
        topic_allow_declare=True,
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=1.0,
        # A killed worker's partitions move after 10 s instead of Faust's default 60 s.
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
        broker_rebalance_timeout=10.0,
        stream_buffer_maxsize=max(4096, s.ingest.batch_size * (s.ingest.pipeline_depth + 1)),
        producer_acks=-1,
        producer_max_request_size=max(4 << 20, 2 * s.ingest.max_event_bytes),
        logging_config=None,
    )
    verdicts = app.topic(s.verdicts_topic, key_type=bytes, value_type=bytes,
                         key_serializer="raw", value_serializer="raw", partitions=s.partitions)
    dlq = app.topic(s.dlq_topic, key_type=bytes, value_type=bytes,
                    key_serializer="raw", value_serializer="raw", partitions=s.partitions)
    processed: dict[tuple[str, int], int] = {}
    loop_state = {"backoff": Backoff(s.ingest.retry_initial_seconds, s.ingest.retry_max_seconds)}

    async def write_until_durable(messages: list[RawMessage]) -> BatchOutcome:
        loop = asyncio.get_running_loop()
        backoff = loop_state["backoff"]
        events, dead = await loop.run_in_executor(parts.decode_pool, parts.ingestor.split, messages)
        while True:
            started = time.perf_counter()
            try:
                outcome = await loop.run_in_executor(parts.executor, parts.ingestor.write, messages, events, dead)
            except StoreError as exc:
                parts.health.mark_failed(str(exc)[:500])
                parts.metrics.store_failures.inc()
                delay = backoff.next_delay()
                log.warning("store write failed (%s); retrying in %.1fs, offsets not committed", str(exc)[:200], delay)
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            parts.health.mark_ok()
            parts.metrics.ingest_seconds.observe(time.perf_counter() - started)
            return outcome

    async def send_dead_letter(d) -> None:
        headers = [
            ("claimwatch-reason", d.rejection.reason.encode()),
            ("claimwatch-rule", d.rejection.rule.encode()),
            ("claimwatch-source", f"{d.topic}/{d.partition}/{d.offset}".encode()),
            ("claimwatch-original-size", str(len(d.raw)).encode()),
        ]
        key = (d.rejection.route or "").encode()
        try:
            await (await dlq.send(key=key, value=d.raw, headers=headers))
        except ProducerSendError as exc:
            if not isinstance(exc.__cause__, MessageSizeTooLargeError):
                raise
            # Larger than the DLQ topic takes: keep the head; the store row records the full size.
            await (await dlq.send(key=key, value=d.raw[:DLQ_TRUNCATE_BYTES],
                                  headers=headers + [("claimwatch-truncated", b"1")]))

    async def send_dead_letters(outcome: BatchOutcome) -> None:
        backoff = Backoff(s.ingest.retry_initial_seconds, s.ingest.retry_max_seconds)
        for d in outcome.dead:
            while True:
                try:
                    await send_dead_letter(d)
                    break
                except (ProducerSendError, KafkaError) as exc:  # broker trouble: retry, never ack unsent
                    delay = backoff.next_delay()
                    log.warning("DLQ send failed (%r); retrying in %.1fs", exc, delay)
                    await asyncio.sleep(delay)

    async def finish(stream, batch) -> None:
        messages = [
            RawMessage(e.message.topic, e.message.partition, e.message.offset, e.message.value, e.message.key)
            for e in batch
        ]
        took = time.perf_counter()
        outcome = await write_until_durable(messages)
        log.debug("batch of %d written in %.3fs", len(messages), time.perf_counter() - took)
        await send_dead_letters(outcome)
        parts.metrics.observe_batch(outcome.events, outcome.dead, outcome.result.duplicates)
        for event in batch:
            await stream.ack(event)
        for m in messages:
            processed[(m.topic, m.partition)] = max(m.offset, processed.get((m.topic, m.partition), -1))

    @app.agent(verdicts)
    async def ingest(stream):
        inflight: deque[asyncio.Future] = deque()
        try:
            async for batch in stream.noack_take(s.ingest.batch_size, within=s.ingest.batch_seconds):
                inflight.append(asyncio.ensure_future(finish(stream, batch)))
                while len(inflight) >= s.ingest.pipeline_depth:
                    await inflight.popleft()  # an error here stops the agent, as before: nothing is acked
                while inflight and inflight[0].done():
                    await inflight.popleft()
        finally:
            for task in inflight:  # unacked: redelivered after a restart
                task.cancel()

    for interval, timer in parts.leader_timers:
        app.timer(interval, on_leader=True)(timer)
    for task in parts.tasks:
        app.task(task)

    @app.timer(5.0)
    async def report_lag() -> None:
        for tp in app.consumer.assignment():
            highwater = app.consumer.highwater(tp)
            done = processed.get((tp.topic, tp.partition), -1)
            if highwater is not None:
                parts.metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(max(0, highwater - done - 1))

    return app
