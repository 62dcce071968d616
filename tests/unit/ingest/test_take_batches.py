"""The ingest agent's take (streams/take.py): Faust's noack_take, also full by bytes, so envelopes do not wait
out the batch timer while the byte budget has stopped fetching."""

from __future__ import annotations

import asyncio

import faust

from streams.take import take_batches


def run(scenario) -> None:
    async def with_stream():
        app = faust.App("take-batches-test", broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False)
        app.flow_control.resume()  # as when the worker's consumer is running
        stream = app.stream(app.channel(value_type=bytes))
        async with stream:
            await asyncio.wait_for(scenario(stream), 30)

    asyncio.run(with_stream())


async def taken(stream, sizes: list[int], max_messages: int, max_bytes: int, within: float) -> list[list[int]]:
    for n in sizes:
        await stream.channel.send(value=b"x" * n)
    batches: list[list[int]] = []
    async for batch in take_batches(stream, max_messages, max_bytes, within):
        batches.append([len(event.message.value) for event in batch])
        if sum(map(len, batches)) == len(sizes):
            return batches


def test_a_batch_is_handed_over_once_its_bytes_reach_the_bound_without_waiting_for_the_timer():
    async def scenario(stream):
        # within is an hour: only the byte bound can hand these over before the test's 30 s run out
        assert await taken(stream, [300] * 8, 1000, 1000, 3600) == [[300] * 4, [300] * 4]

    run(scenario)


def test_the_message_count_still_bounds_a_batch_and_the_timer_hands_over_the_rest():
    async def scenario(stream):
        assert await taken(stream, [10] * 7, 3, 1 << 20, 0.05) == [[10] * 3, [10] * 3, [10]]

    run(scenario)


def test_acks_are_the_callers_while_taking_and_restored_after():
    async def scenario(stream):
        assert stream.enable_acks
        await stream.channel.send(value=b"x")
        batches = take_batches(stream, 1, 1 << 20, 0.05)
        first = await batches.__anext__()
        assert len(first) == 1 and not stream.enable_acks
        await batches.aclose()
        assert stream.enable_acks

    run(scenario)
