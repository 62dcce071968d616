"""The Faust app and every topic it reads or writes. Logic lives in services/; streams/ only wires it.

    verdicts --(streams/agents.py: ingest)--> store, dead letters --> dlq
    leader timers (streams/timers.py) --> alerts

Delivery: the agent takes batches without acking, writes them, sends dead letters, and only
then acks; Faust commits acked offsets (gap-aware), so a crash redelivers unacked messages and
the idempotent writer counts each event once (services/ingest/pipeline.py).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faust
from mode.utils.queues import ThrowableQueue

from services.ingest.budget import ByteBudget
from streams.transport import InlineDeliveryApp

if TYPE_CHECKING:
    from services.app.settings import Settings


@dataclass(frozen=True)
class Topics:
    verdicts: faust.types.TopicT
    dlq: faust.types.TopicT
    alerts: faust.types.TopicT


def value_bytes(event) -> int:
    return len(getattr(getattr(event, "message", None), "value", None) or b"")


class BudgetedQueue(ThrowableQueue):
    """Faust's stream buffer, full also when the worker's ByteBudget is spent: Faust's delivery then waits (and
    stops fetching) until acked batches give bytes back (streams/agents.py)."""

    # asyncio.Queue's own buffer and wake-up helper, which typeshed leaves out
    _queue: deque[Any]
    _wakeup_next: Callable[[Collection[asyncio.Future]], None]

    def __init__(self, *args, budget: ByteBudget, **kwargs):
        super().__init__(*args, **kwargs)
        self.budget = budget
        budget.on_give_back(self._wake_putters)

    def full(self) -> bool:
        return super().full() or self.budget.spent

    def _put(self, item) -> None:
        self.budget.spend(value_bytes(item))
        super()._put(item)

    def clear(self) -> None:
        """A rebalance drops what is buffered, unacked: its bytes come back."""
        dropped = sum(map(value_bytes, self._queue))
        super().clear()
        self.budget.give_back(dropped)

    def _wake_putters(self) -> None:
        while self._putters:
            self._wakeup_next(self._putters)


class BudgetedApp(InlineDeliveryApp):
    """A Faust app whose stream buffers count bytes against ``byte_budget`` as well as messages, and whose
    consumer delivers each message without mode's per-message tasks (streams/transport.py)."""

    byte_budget: ByteBudget

    def FlowControlQueue(self, maxsize: int | None = None, *, clear_on_resume: bool = False) -> ThrowableQueue:
        return BudgetedQueue(
            maxsize=maxsize, flow_control=self.flow_control, clear_on_resume=clear_on_resume, budget=self.byte_budget
        )


def kafka_urls(bootstrap: str) -> list[str]:
    return [f"kafka://{host.strip()}" for host in bootstrap.split(",") if host.strip()]


def create_app(s: Settings) -> tuple[faust.App, Topics]:
    datadir = Path("var/faust") / s.topic_prefix  # Faust's own scratch files, out of the working tree
    datadir.mkdir(parents=True, exist_ok=True)
    app = BudgetedApp(
        s.consumer_group,
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
        # Dead letters go out up to a thousand at once (services/ingest/dead_letters.py): in 16 KiB batches (the
        # default) their senders queue for room batch after batch, which took most of a flood's time.
        producer_max_batch_size=1 << 20,
        producer_max_request_size=max(4 << 20, 2 * s.ingest.max_event_bytes),
        logging_config=None,
    )
    app.byte_budget = ByteBudget(s.ingest.max_buffer_bytes)

    def raw_topic(name: str):
        return app.topic(
            name,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=s.partitions,
        )

    return app, Topics(raw_topic(s.verdicts_topic), raw_topic(s.dlq_topic), raw_topic(s.alerts_topic))
