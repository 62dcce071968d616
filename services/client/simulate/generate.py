"""Minute-by-minute traffic: merge the routes in event-time order, then add late events,
duplicate deliveries and bad input. Lazy and bounded in memory, so long runs stream."""

from __future__ import annotations

import gc
import hashlib
import math
import random
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import orjson

from services.client.simulate.corrupt import corrupt
from services.client.simulate.events import RouteTraffic
from services.client.simulate.scenario import BAD_KINDS, Scenario, ScenarioError

OFFSETS = ("Z", "+01:00", "+00:00")
SHIFTS = (timedelta(0), timedelta(hours=1), timedelta(0))


@dataclass(slots=True)
class SimEvent:
    """One message as a producer sends it, with the ground truth the product never sees.

    ``event`` is the dict that was serialised into ``raw`` (None for bad input; treat it as
    read-only, duplicates share it). ``family_by_claim`` lines up with ``event["claims"]``:
    the failure family of each failing claim, None for the others."""

    raw: bytes
    key: bytes
    event: dict | None
    family_by_claim: tuple[str | None, ...]
    bad_rule: str | None = None
    duplicate: bool = False  # a second delivery of an event_id sent before
    minute: int = 0  # emission minute since ``start``; pace sending on it
    late: bool = False  # emitted after the minute of its event time


class TrafficGenerator:
    """Plain state behind ``generate``: the random streams, pending late/duplicate messages and
    the bad-kind rotation. ``minute(m)`` must be called for m = 0, 1, 2, ... in order."""

    def __init__(self, scenario: Scenario, start: datetime, minutes: int, seed: int):
        if not isinstance(scenario, Scenario):
            raise ScenarioError(f"scenario: expected a Scenario, got {type(scenario).__name__}; try Scenario.demo()")
        if not isinstance(start, datetime) or start.tzinfo is None:
            raise ScenarioError(
                "start: must be a timezone-aware datetime, e.g. datetime(2026, 11, 21, tzinfo=timezone.utc)"
            )
        if not isinstance(minutes, int) or minutes < 0:
            raise ScenarioError(f"minutes: must be an int >= 0, got {minutes!r}")
        if not isinstance(seed, int):
            raise ScenarioError(f"seed: must be an int, got {seed!r}")
        self.scenario, self.minutes = scenario, minutes
        self.start = start.astimezone(UTC).replace(second=0, microsecond=0)
        # Independent streams: delivery (late, duplicate, bad) here, and one set per route.
        delivery, *per_route = np.random.SeedSequence(seed).spawn(1 + len(scenario.routes))
        self.rng = np.random.default_rng(delivery)
        self.rnd = random.Random(seed)  # variants of bad input
        self.routes = [RouteTraffic(scenario, i, seed, per_route[i]) for i in range(len(scenario.routes))]
        self.keys = {r.name: r.name.encode() for r in scenario.routes}
        self.tag = hashlib.blake2b(f"{seed}|{self.start.isoformat()}".encode(), digest_size=4).hexdigest()
        self.pending: dict[int, list[tuple[int, SimEvent]]] = defaultdict(list)  # minute -> (ms, message)
        weights = {k: float(scenario.bad_weights.get(k, 0.0)) for k in BAD_KINDS}
        self.bad_weights = {k: w for k, w in weights.items() if w > 0}
        self.bad_credit = dict.fromkeys(self.bad_weights, 0.0)

    def hour(self, minute: int) -> float:
        """The UTC hour of day in the middle of ``minute``, as a fraction."""
        t = self.start + timedelta(minutes=minute)
        return t.hour + (t.minute + 0.5) / 60

    def volume_factor(self, minute: int) -> float:
        return 1 + self.scenario.diurnal_amplitude * math.cos(
            2 * math.pi * (self.hour(minute) - self.scenario.peak_hour) / 24
        )

    def _next_bad_kind(self) -> str:
        # Smooth weighted round-robin: exact proportions, and every kind shows up early.
        total = sum(self.bad_weights.values())
        for kind, weight in self.bad_weights.items():
            self.bad_credit[kind] += weight
        kind = max(self.bad_credit, key=self.bad_credit.__getitem__)
        self.bad_credit[kind] -= total
        return kind

    def _delay(self, minute: int, wanted: int) -> int:
        return min(wanted, self.minutes - 1 - minute)  # nothing is held back past the last minute

    def minute(self, m: int) -> list[SimEvent]:
        # One minute allocates tens of thousands of small acyclic dicts; pausing the cyclic garbage
        # collector meanwhile saves ~15% (it would rescan every live object for nothing).
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._build_minute(m)
        finally:
            if collecting:
                gc.enable()

    def _build_minute(self, m: int) -> list[SimEvent]:
        sc, rng = self.scenario, self.rng
        factor, hour = self.volume_factor(m), self.hour(m)
        drawn = []
        for traffic in self.routes:
            drawn.extend(traffic.draw(m, factor, hour))
        drawn.sort(key=lambda d: d.ms)
        t0 = self.start + timedelta(minutes=m)
        prefixes = [(t0 + shift).strftime("%Y-%m-%dT%H:%M:") for shift in SHIFTS]
        flags = rng.random((4, len(drawn))).tolist()
        batch: list[tuple[int, SimEvent]] = []
        valid: list[SimEvent] = []
        id_suffix = f"{self.tag}-{m:06d}-"
        keys, dumps = self.keys, orjson.dumps
        for j, d in enumerate(drawn):
            event = d.event
            event["event_id"] = f"ev-{id_suffix}{j:05d}"
            event["trace_id"] = f"tr-{id_suffix}{j:05d}"
            event["observed_at"] = f"{prefixes[d.form]}{d.ms // 1000:02d}.{d.ms % 1000:03d}{OFFSETS[d.form]}"
            sim = SimEvent(dumps(event), keys[event["route"]], event, d.families, minute=m)
            valid.append(sim)
            late = self._delay(m, 1 + int(flags[1][j] * sc.max_late_minutes)) if flags[0][j] < sc.late_fraction else 0
            if late:  # lands anywhere in a later minute
                sim.minute, sim.late, at = m + late, True, self.rnd.randrange(60000)
                self.pending[m + late].append((at, sim))
            else:
                at = d.ms
                batch.append((at, sim))
            if flags[2][j] < sc.duplicate_fraction:  # redelivered 0-2 minutes after the first delivery
                again = sim.minute + self._delay(sim.minute, int(flags[3][j] * 3))
                at = self.rnd.randrange(at if again == sim.minute else 0, 60000)
                self.pending[again].append((at, replace(sim, duplicate=True, minute=again, late=again > m)))
        if valid and sc.bad_fraction > 0:
            for _ in range(int(rng.binomial(len(valid), sc.bad_fraction / (1 - sc.bad_fraction)))):
                kind = self._next_bad_kind()
                event = orjson.loads(self.rnd.choice(valid).raw)
                event["event_id"] += "-bad"
                raw, key = corrupt(kind, event, self.rnd, sc.too_large_bytes)
                batch.append((self.rnd.randrange(60000), SimEvent(raw, key, None, (), kind, minute=m)))
        batch.extend(self.pending.pop(m, ()))
        batch.sort(key=lambda pair: pair[0])  # stable: a same-minute redelivery stays after its original
        return [sim for _, sim in batch]


def generate(scenario: Scenario, start: datetime, minutes: int, seed: int = 0) -> Iterator[SimEvent]:
    """Simulated messages for ``minutes`` minutes from ``start``, minute by minute, deterministic
    in (scenario, start, minutes, seed). Arguments are checked now; events are made lazily."""
    generator = TrafficGenerator(scenario, start, minutes, seed)

    def stream() -> Iterator[SimEvent]:
        for m in range(minutes):
            yield from generator.minute(m)

    return stream()
