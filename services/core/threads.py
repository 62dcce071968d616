"""Running blocking work (chDB calls, decoding, clustering) on a dedicated thread from the event loop."""
from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Any, Awaitable, Callable

Run = Callable[..., Awaitable[Any]]  # ``await run(fn, *args)``: fn(*args) on some thread


def in_thread(executor: Executor) -> Run:
    """A ``Run`` on ``executor`` (the store's thread, the decode thread, the clustering thread)."""
    async def run(fn, *args):
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)
    return run
