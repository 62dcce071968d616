"""Read a topic back whole, as a test checks what a producer sent (no consumer group)."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, TopicPartition


def read_topic(bootstrap: str, topic: str, partitions: int) -> list:
    """Every message in ``topic``, from the start to the end offsets it has now (at most a minute's reading)."""

    async def read():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            end = await consumer.end_offsets(tps)
            messages, deadline = [], time.monotonic() + 60
            while any([await consumer.position(tp) < end[tp] for tp in tps]) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    messages.extend(records)
            return messages
        finally:
            await consumer.stop()

    return asyncio.run(read())
