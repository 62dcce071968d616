"""One garbage-collector policy for bulk work (the worker, the backtest, benches).

Decoding allocates tens of objects per event. With CPython's default gen-0 threshold
(700) the collector then runs thousands of times a second over every live object;
`python bench/gc_decode.py` measures what that costs. Freezing what already exists and
collecting far less often removes most of it.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

BULK_THRESHOLD = 50_000


def tune_for_bulk(threshold: int = BULK_THRESHOLD) -> None:
    """For the rest of the process (a worker, after start-up)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(threshold, 20, 100)


@contextmanager
def bulk_allocation(threshold: int = BULK_THRESHOLD) -> Iterator[None]:
    """For one run (a backtest); restores the previous settings afterwards."""
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(threshold, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()
