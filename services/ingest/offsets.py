"""Consumer lag, for the gauge: the offsets the ingest path has finished (stored, dead letters sent, acked) in
this process, and the log bounds and the group's committed offsets as the broker has them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from services.ingest.ingestor import RawMessage


@dataclass(frozen=True)
class LogPosition:
    """One partition, as the broker reports it."""

    start: int = 0  # the oldest offset still in the log
    end: int = 0  # the offset the next message written gets
    committed: int | None = None  # the group's committed offset (the next it reads); None before its first commit

    @property
    def unread(self) -> int:
        """Messages from the group's next offset (the log start before its first commit) to the log end."""
        return max(0, self.end - max(self.start, -1 if self.committed is None else self.committed))


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

    def lag(self, topic: str, partition: int, log: LogPosition, highwater: int | None = None) -> int:
        """Messages behind the log end.

        The end is the larger of the broker's end offset and the consumer's fetch ``highwater``: both are past
        readings of a number that only grows, so the larger is the newer (and Tansu answers an end-offset request
        with the last batch's first offset + 1). The next offset to read is the furthest of the group's commit
        (the broker's: true right after a restart, before this process has finished anything), the one after what
        this process finished (ahead of the commit, which Faust makes every second) and the log start (where a
        group that never committed begins).
        """
        end = max(log.end, -1 if highwater is None else highwater)
        committed = -1 if log.committed is None else log.committed
        return max(0, end - max(log.start, committed, self.done(topic, partition) + 1))


class BrokerOffsets:
    """Reads ``LogPosition``s of a consumer group from the broker, with clients of its own: an admin client for
    the group's commits and a consumer outside any group for the log bounds, so reading never joins the group.
    The clients connect on the first read (and at the next, when that failed)."""

    def __init__(self, bootstrap: str, group: str):
        self.bootstrap, self.group = bootstrap, group
        self._admin: AIOKafkaAdminClient | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def read(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], LogPosition]:
        tps = [TopicPartition(topic, partition) for topic, partition in partitions]
        if not tps:
            return {}
        admin, consumer = await self._clients()
        commits = await admin.list_consumer_group_offsets(self.group, partitions=tps)
        starts, ends = await consumer.beginning_offsets(tps), await consumer.end_offsets(tps)
        committed = {tp: c.offset for tp, c in commits.items() if c.offset >= 0}  # -1: no commit yet
        return {(tp.topic, tp.partition): LogPosition(starts[tp], ends[tp], committed.get(tp)) for tp in tps}

    async def ping(self) -> None:
        """One round trip to the broker (a metadata request); raises when it does not answer."""
        _, consumer = await self._clients()
        await consumer.topics()

    async def partitions(self, topic: str) -> list[tuple[str, int]]:
        """The topic's partitions; none before it exists (described by name, a missing topic would be created by
        brokers that create topics on demand, Tansu among them)."""
        admin, _ = await self._clients()
        if topic not in await admin.list_topics():
            return []
        (described,) = await admin.describe_topics([topic])
        return sorted((topic, p["partition"]) for p in described["partitions"])

    async def _clients(self) -> tuple[AIOKafkaAdminClient, AIOKafkaConsumer]:
        if self._admin is None or self._consumer is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="claimwatch-lag")
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap, client_id="claimwatch-lag", enable_auto_commit=False
            )
            try:
                await admin.start()
                await consumer.start()
            except BaseException:  # the next read connects afresh
                await consumer.stop()
                await admin.close()
                raise
            self._admin, self._consumer = admin, consumer
        return self._admin, self._consumer

    async def close(self) -> None:
        admin, consumer, self._admin, self._consumer = self._admin, self._consumer, None, None
        if consumer is not None:
            await consumer.stop()
        if admin is not None:
            await admin.close()


async def unread(bootstrap: str, group: str, topic: str) -> int:
    """Messages of ``topic`` that ``group`` has yet to commit, read with clients opened and closed here (so it
    works from any event loop, and from a process that is not the consumer's)."""
    broker = BrokerOffsets(bootstrap, group)
    try:
        positions = await broker.read(await broker.partitions(topic))
    finally:
        await broker.close()
    return sum(p.unread for p in positions.values())
