"""The worker's Faust consumer delivers a message inline when it can (streams/transport.py) and otherwise behaves
as mode's ``wait_first``: a delivery that waits can still be interrupted by a rebalance's flow suspension."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from streams.app import BudgetedApp
from streams.transport import InlineDeliveryConsumer


def run(scenario) -> None:
    async def with_consumer():
        # The worker's app; its consumer is made but never started, so no broker is reached.
        app = BudgetedApp("inline-delivery-test", broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False)
        assert isinstance(app.consumer, InlineDeliveryConsumer)
        await scenario(app.consumer)

    asyncio.run(with_consumer())


def test_a_delivery_that_does_not_wait_runs_inline_without_tasks_and_the_flow_wait_is_closed():
    async def scenario(c):
        flow = asyncio.Event()
        delivered = []

        async def deliver(n):
            delivered.append(n)
            return n * 2

        tasks_before = len(asyncio.all_tasks())
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an unawaited flow.wait() would warn
            for n in range(50):
                result = await c.wait_first(deliver(n), flow.wait())
                assert result.results == [n * 2] and not result.stopped
        assert delivered == list(range(50))
        assert len(asyncio.all_tasks()) == tasks_before

    run(scenario)


def test_a_delivery_that_waits_finishes_with_its_result():
    async def scenario(c):
        room = asyncio.Event()

        async def deliver():
            await room.wait()  # a full stream buffer
            return "put"

        asyncio.get_running_loop().call_later(0.01, room.set)
        result = await c.wait_first(deliver(), asyncio.Event().wait())
        assert result.results[0] == "put" and not result.stopped

    run(scenario)


def test_a_waiting_delivery_is_cancelled_when_the_flow_is_suspended_as_in_a_rebalance():
    async def scenario(c):
        suspend_flow, cancelled = asyncio.Event(), asyncio.Event()

        async def deliver():
            try:
                await asyncio.Event().wait()  # a buffer that never drains
            except asyncio.CancelledError:
                cancelled.set()
                raise

        asyncio.get_running_loop().call_later(0.01, suspend_flow.set)
        result = await c.wait_first(deliver(), suspend_flow.wait())
        assert len(result.done) == 1 and result.results == [True]  # the suspension won
        await asyncio.wait_for(cancelled.wait(), 5)

    run(scenario)


def test_a_delivery_that_fails_inline_or_after_waiting_raises_its_error():
    async def scenario(c):
        async def fails_at_once():
            raise ValueError("undecodable")

        async def fails_later():
            await asyncio.sleep(0)
            raise ValueError("undecodable later")

        with pytest.raises(ValueError, match="undecodable"):
            await c.wait_first(fails_at_once(), asyncio.Event().wait())
        with pytest.raises(ValueError, match="undecodable later"):
            await c.wait_first(fails_later(), asyncio.Event().wait())

    run(scenario)
