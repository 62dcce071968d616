"""What one evaluation pass reads, once: every route's minute sums, its mix slices and its dead letters, as its
detectors are fed them (``RouteMinute``, services/alerts/detection/route_detectors.py)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

import numpy as np

from services.alerts.detection.columns import CLAIMS, FAILED
from services.alerts.detection.input_health import health_inputs
from services.alerts.detection.route_detectors import RouteMinute
from services.rates.intervals import checked_sums, effective_sums
from services.store.convert import parse_ch_time
from services.store.dlq import DeadLetterRepository
from services.store.rates import SUM_FIELDS, RateRepository

Inputs = dict[datetime, dict[str, RouteMinute]]  # minute -> route -> what its detectors read that minute


class PassInputs:
    """Reads a pass's minutes from the rate buckets and the dead letters (arrays: at 10,000 routes a minute is
    10,000 rows)."""

    def __init__(self, rates: RateRepository, dead_letters: DeadLetterRepository):
        self.rates = rates
        self.dead_letters = dead_letters

    def rejected(self, start: datetime, end: datetime) -> dict[datetime, dict[str, int]]:
        """minute -> route -> dead letters (in event time)."""
        out: dict[datetime, dict[str, int]] = defaultdict(dict)
        for row in self.dead_letters.rejected_minutes(start, end):
            if row["route"]:
                out[row["minute"]][row["route"]] = row["rejected"]
        return out

    def read(self, start: datetime, end: datetime) -> Inputs:
        """minute -> route -> what its detectors read: its sums, mix slices and dead letters."""
        whole, mixes = (self.rates.minutes_all_routes(start, end, dim) for dim in ("", "mix"))
        sums, mix = _sums(whole), effective_sums(_sums(mixes))
        slices: dict[tuple[datetime, str], dict[str, tuple[float, float]]] = defaultdict(dict)
        for row, (claims, failed) in zip(mixes, mix[:, [CLAIMS, FAILED]].tolist()):
            slices[parse_ch_time(row["minute"]), row["route"]][row["value"]] = (claims, failed)
        rejected = self.rejected(start, end)
        keys = [(parse_ch_time(r["minute"]), r["route"]) for r in whole]
        refused = np.array([rejected.get(minute, {}).get(route, 0) for minute, route in keys], dtype=float)
        x, health = effective_sums(sums), health_inputs(sums, refused)
        out: Inputs = defaultdict(dict)
        for i, (minute, route) in enumerate(keys):
            out[minute][route] = RouteMinute(x[i], health[i], slices.get((minute, route), {}))
        for minute, by_route in rejected.items():  # dead letters of a route without an accepted answer that minute
            for route in by_route.keys() - out[minute].keys():
                out[minute][route] = RouteMinute(
                    health=health_inputs(np.zeros((1, len(SUM_FIELDS))), np.array([by_route[route]], dtype=float))[0]
                )
        return {minute: dict(sorted(by_route.items())) for minute, by_route in out.items()}


def _sums(rows: list[dict[str, Any]]) -> np.ndarray:
    """The ``sums`` of rows of ``minutes_all_routes`` as one array (routes' minutes × SUM_FIELDS), checked."""
    return checked_sums(np.array([r["sums"] for r in rows], dtype=float).reshape(len(rows), len(SUM_FIELDS)))
