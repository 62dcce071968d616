"""Back-pressure by bytes (issue 25): Faust's stream buffer counts messages, the worker's budget counts bytes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from mode.utils.queues import FlowControlEvent

from services.ingest.budget import ByteBudget
from streams.app import BudgetedQueue


def message(n: int):
    """What Faust buffers: an event whose message carries ``n`` bytes."""
    return SimpleNamespace(message=SimpleNamespace(value=b"x" * n))


def test_the_budget_lets_one_message_in_when_nothing_is_held_however_large():
    budget = ByteBudget(100)
    assert not budget.spent
    budget.spend(250)
    assert budget.spent and budget.peak == 250
    budget.give_back(250)
    assert not budget.spent and budget.held == 0 and budget.peak == 250


def test_a_spent_budget_holds_delivery_until_acked_bytes_come_back():
    async def scenario():
        budget = ByteBudget(1000)
        queue = BudgetedQueue(maxsize=4096, flow_control=FlowControlEvent(initially_suspended=False), budget=budget)
        for _ in range(3):
            await queue.put(message(400))  # 1,200 bytes: over the budget after the third
        assert queue.full() and budget.held == 1200
        blocked = asyncio.ensure_future(queue.put(message(400)))
        taken = [await queue.get() for _ in range(3)]  # taken, not acked: the bytes stay held
        await asyncio.sleep(0)
        assert not blocked.done() and queue.qsize() == 0
        budget.give_back(sum(len(m.message.value) for m in taken))  # the batch is stored and acked
        await asyncio.wait_for(blocked, 5)
        assert budget.held == 400 and queue.qsize() == 1

    asyncio.run(scenario())


def test_a_rebalance_that_drops_the_buffer_gives_its_bytes_back():
    async def scenario():
        budget = ByteBudget(10_000)
        queue = BudgetedQueue(maxsize=4096, flow_control=FlowControlEvent(initially_suspended=False), budget=budget)
        for _ in range(5):
            await queue.put(message(300))
        await queue.get()
        queue.clear()
        assert budget.held == 300  # the one taken (and not yet acked) is still held

    asyncio.run(scenario())
