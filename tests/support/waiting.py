"""Waiting for a condition, never for a fixed time: poll until it holds, fail with what was awaited at a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """The first truthy value ``predicate()`` returns; an AssertionError naming ``what`` after ``timeout`` seconds.
    The predicate may raise (an AssertionError when what it waits on has died, say): that ends the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)
