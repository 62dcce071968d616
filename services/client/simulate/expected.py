"""What a correct ingest must end up with, computed from the simulator's own ground truth
(its own alias table, no product code), and a JSONL writer."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from services.client.simulate.generate import SimEvent
from services.contract.model import FAILED_VERDICTS

CANONICAL = ("supported", "unsupported", "contradicted", "overreach", "stale", "no_source", "trivial")
# The contract's alias list (verdict-event-v1.md), kept separately from the product's on purpose.
ALIASES = {
    **{v: v for v in CANONICAL},
    "unlinked": "unsupported",
    "not_supported": "unsupported",
    "nei": "unsupported",
    "not_enough_info": "unsupported",
    "notenoughinfo": "unsupported",
    "neutral": "unsupported",
    "refuted": "contradicted",
    "contradiction": "contradicted",
    "entailed": "supported",
    "entailment": "supported",
}


@dataclass
class ExpectedCounts:
    """Counts over valid, de-duplicated events (by event_id) and over bad messages. Build it
    with ``expected_counts(events)`` or incrementally with ``add`` while streaming."""

    events: dict[str, int] = field(default_factory=dict)  # per route
    verdicts: dict[str, dict[str, int]] = field(default_factory=dict)  # per route, per canonical verdict
    bad: dict[str, int] = field(default_factory=dict)  # per rule
    families: dict[str, int] = field(default_factory=dict)  # failing claims per family
    duplicates: int = 0  # redeliveries ignored
    messages: int = 0
    _seen: set[str] = field(default_factory=set, repr=False)

    def add(self, sim: SimEvent) -> None:
        self.messages += 1
        if sim.bad_rule is not None:
            self.bad[sim.bad_rule] = self.bad.get(sim.bad_rule, 0) + 1
            return
        event = sim.event
        assert event is not None, "only a bad message has no event, and it has a bad_rule"
        if event["event_id"] in self._seen:
            self.duplicates += 1
            return
        self._seen.add(event["event_id"])
        route = event["route"]
        self.events[route] = self.events.get(route, 0) + 1
        counts = self.verdicts.setdefault(route, dict.fromkeys(CANONICAL, 0))
        for claim in event["claims"]:
            counts[ALIASES[claim["verdict"].lower()]] += 1
        for family in sim.family_by_claim:
            if family:
                self.families[family] = self.families.get(family, 0) + 1

    @property
    def valid_events(self) -> int:
        return sum(self.events.values())

    @property
    def bad_total(self) -> int:
        return sum(self.bad.values())

    def claims(self, route: str) -> int:
        """Non-trivial claims: the rate's denominator."""
        counts = self.verdicts.get(route, {})
        return sum(n for v, n in counts.items() if v != "trivial")

    def failed(self, route: str) -> int:
        return sum(n for v, n in self.verdicts.get(route, {}).items() if v in FAILED_VERDICTS)

    def rate(self, route: str) -> float | None:
        claims = self.claims(route)
        return self.failed(route) / claims if claims else None

    def as_rates(self) -> list[dict]:
        """The shape of ``claimwatch rates --window all --json``, worst route first."""
        rows = [
            {
                "route": route,
                "events": self.events[route],
                "claims": self.claims(route),
                "failed": self.failed(route),
                "rate": self.rate(route),
                "verdicts": dict(self.verdicts[route]),
            }
            for route in self.events
        ]
        return sorted(rows, key=lambda row: (-(row["rate"] or 0.0), row["route"]))


def expected_counts(sim_events: Iterable[SimEvent]) -> ExpectedCounts:
    counts = ExpectedCounts()
    for sim in sim_events:
        counts.add(sim)
    return counts


def write_jsonl(events: Iterable[SimEvent], path: str | Path, progress: Callable[[int], None] | None = None) -> int:
    """Write each message's bytes as one line (bad ones too: the file is what a producer would
    have sent). ``progress(n)`` gets the number of lines written since its last call. Returns
    the number of lines."""
    written = reported = 0
    with open(path, "wb", buffering=1 << 20) as out:
        for sim in events:
            out.write(sim.raw)
            out.write(b"\n")
            written += 1
            if progress is not None and written - reported >= 1000:
                progress(written - reported)
                reported = written
    if progress is not None and written > reported:
        progress(written - reported)
    return written
