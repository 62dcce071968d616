"""Arrays with one row per route: grown when routes join, one route's rows taken out and put back.

The evaluator steps every route of a fleet in lockstep on numpy arrays (services/alerts/detection/fleet.py). A route's
state is its rows of those arrays and is stored per route (services/alerts/evaluation/route_state.py). Each class names
its per-route arrays and the axis that indexes routes; rings indexed by a fleet-wide step count are taken
oldest first, so a route's rows go into another fleet at the same minute (a restart replays each route from
its own snapshot's minute) whatever that fleet's step count is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

RowArrays = Mapping[str, int]  # attribute name -> the axis that indexes routes
# The dtype of finished history (a route's per-minute and per-hour sums): counts of a minute or an hour are whole
# numbers, exact in float32 below 2**24, and weighted ones keep 7 digits. Half of float64 is what holds 10,000
# routes' evaluator under its memory bound (bench/routes.py). Running sums that grow without end stay float64.
HISTORY = np.float32


class StateMismatch(ValueError):
    """A stored route state that does not fit the arrays of the running configuration."""


def grown(a: np.ndarray, k: int, axis: int = 0, fill: Any = 0) -> np.ndarray:
    shape = list(a.shape)
    shape[axis] = k
    return np.concatenate([a, np.full(shape, fill, dtype=a.dtype)], axis=axis)


def grow(obj: object, arrays: RowArrays, k: int, fills: Mapping[str, Any] | None = None) -> None:
    """Append ``k`` rows to each of ``obj``'s ``arrays`` (zeros, or the value ``fills`` gives)."""
    for name, axis in arrays.items():
        setattr(obj, name, grown(getattr(obj, name), k, axis, (fills or {}).get(name, 0)))


def _index(a: np.ndarray, axis: int, row: int) -> tuple[int | slice, ...]:
    index: list[Any] = [slice(None)] * a.ndim
    index[axis] = row
    return tuple(index)


def take(obj: object, arrays: RowArrays, row: int) -> dict[str, np.ndarray]:
    """Route ``row``'s part of each array (copies)."""
    return {name: getattr(obj, name)[_index(getattr(obj, name), axis, row)].copy() for name, axis in arrays.items()}


def put(obj: object, arrays: RowArrays, row: int, state: Mapping[str, Any]) -> None:
    """Set route ``row``'s part of each array from ``state`` (as ``take`` gave it)."""
    for name, axis in arrays.items():
        if name not in state:
            raise StateMismatch(f"the stored state has no {name!r}")
        target = getattr(obj, name)
        index = _index(target, axis, row)
        value = np.asarray(state[name])
        if value.shape != target[index].shape:
            raise StateMismatch(f"{name}: stored shape {value.shape}, the configuration's {target[index].shape}")
        target[index] = value


def oldest_first(ring: np.ndarray, newest: int, axis: int = 0) -> np.ndarray:
    """A ring whose newest entry is at position ``newest``, rotated so the newest is last."""
    return np.roll(ring, ring.shape[axis] - 1 - newest, axis=axis)


def into_ring(ordered: np.ndarray, newest: int, axis: int = 0) -> np.ndarray:
    """``oldest_first``'s inverse: the newest entry goes to position ``newest``."""
    return np.roll(ordered, newest + 1 - ordered.shape[axis], axis=axis)
