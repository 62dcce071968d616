"""One memory policy for bulk work (the worker, the backtest, benches).

Decoding allocates tens of objects per event. With CPython's default gen-0 threshold
(700) the collector then runs thousands of times a second over every live object;
`python bench/gc_decode.py` measures what that costs. Freezing what already exists and
collecting far less often removes most of it.

glibc's malloc raises its mmap threshold each time a large block is freed, up to 32 MiB, so
after a few batches a worker's message values and decoded batches come from the heap, and freed
heap seldom goes back to the system: a worker draining a 1 GiB backlog held 1,338 MiB at its
peak, 1,113 MiB with the threshold fixed (bench/ingest.py --backlog). ``fix_malloc_thresholds``
fixes it, as MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ would.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Iterator
from contextlib import contextmanager

BULK_THRESHOLD = 50_000
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
MMAP_THRESHOLD_BYTES = 256 << 10  # blocks this large are mapped on their own, and unmapped when freed
TRIM_THRESHOLD_BYTES = 1 << 20  # free heap above this at its top goes back to the system


def fix_malloc_thresholds() -> bool:
    """Keep glibc's thresholds fixed (see above); False where there is no glibc mallopt."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )


def tune_for_bulk(threshold: int = BULK_THRESHOLD) -> None:
    """For the rest of the process (a worker, after start-up)."""
    fix_malloc_thresholds()
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
