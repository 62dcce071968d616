"""`claimwatch simulate`: build a scenario from flags, then write JSONL or produce at accelerated time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from services.client.simulate import Scenario, ScenarioError, generate, write_jsonl
from services.contract.model import parse_timestamp
from services.core.clock import utcnow
from services.core.files import write_atomically


@dataclass(frozen=True)
class SimulationRequest:
    scenario: Scenario
    start: datetime
    minutes: int
    seed: int

    @classmethod
    def build(
        cls,
        minutes: int,
        seed: int,
        start: str | None,
        regression_at: int,
        corpus_change_at: str,
        bad_fraction: float,
        scale: float,
        now: datetime | None = None,
    ) -> SimulationRequest:
        if minutes <= 0:
            raise ValueError(f"--minutes must be positive, got {minutes}")
        corpus = None if corpus_change_at.strip().lower() == "none" else corpus_change_at
        try:
            corpus_at = None if corpus is None else int(corpus)
        except ValueError:
            raise ValueError(
                f"--corpus-change-at must be a minute number or 'none', got {corpus_change_at!r}"
            ) from None
        if start is None:
            now = (now or utcnow()).replace(second=0, microsecond=0)
            first = now - timedelta(minutes=minutes)
        else:
            try:
                first = parse_timestamp(start)
            except Exception:
                raise ValueError(f"--start must be an RFC 3339 timestamp with offset, got {start!r}") from None
        try:
            scenario = Scenario.demo(regression_at=regression_at, corpus_change_at=corpus_at, bad_fraction=bad_fraction)
            if scale != 1.0:
                scenario = scenario.scaled(scale)
        except ScenarioError as exc:
            raise ValueError(str(exc)) from None
        return cls(scenario, first, minutes, seed)


UNREAD_SCHEMA = "claimwatch.verdict/v2"  # a contract version nobody reads: what a producer's breaking change sends


@dataclass
class TrafficControl:
    """Live changes to simulated traffic, read from a JSON file each simulated minute:
    ``{"stopped": [route, ...], "broken": [route, ...]}``. A stopped route sends nothing (its verifier is down);
    a broken one sends its events under a contract version nobody reads (a producer shipped a breaking change).
    `claimwatch demo-traffic` writes the file; a missing file changes nothing."""

    path: Path
    stopped: frozenset[str] = frozenset()
    broken: frozenset[str] = frozenset()
    _seen: float | None = field(default=None, repr=False)

    def refresh(self) -> None:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            self.stopped = self.broken = frozenset()
            self._seen = None
            return
        if mtime == self._seen:
            return
        self._seen = mtime
        try:
            data = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return  # mid-write: keep what was in force, read it again next minute
        self.stopped, self.broken = (frozenset(data.get(k) or ()) for k in ("stopped", "broken"))

    def apply(self, key: bytes, raw: bytes) -> bytes | None:
        """The bytes to send for one message of route ``key``, or None to send nothing."""
        route = key.decode(errors="replace")
        if route in self.stopped:
            return None
        if route in self.broken:
            try:
                return orjson.dumps({**orjson.loads(raw), "schema": UNREAD_SCHEMA})
            except orjson.JSONDecodeError:
                return raw  # already bad input: it stays as it was
        return raw

    def change(self, route: str, action: str) -> None:
        """Stop, break or resume ``route`` (the file is replaced whole, so a reader never sees half of it)."""
        self.refresh()
        stopped, broken = set(self.stopped) - {route}, set(self.broken) - {route}
        {"stop": stopped, "break": broken, "resume": set()}[action].add(route)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, orjson.dumps({"stopped": sorted(stopped), "broken": sorted(broken)}))
        self.refresh()


def _progress(console: Console, label: str) -> Progress:
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("minutes"),
        TimeRemainingColumn(),
        console=console,
    )


def send_after(minute: int, seconds_per_minute: float) -> float:
    """Real seconds after the start at which simulated minute ``minute`` is sent: once it is over, as a live
    producer reports what has happened, so no event arrives before its own event time."""
    return (minute + 1) * seconds_per_minute


def run_simulation(
    request: SimulationRequest,
    settings,
    out: Path | None,
    speed: float,
    console: Console,
    control: TrafficControl | None = None,
) -> int:
    events = generate(request.scenario, request.start, request.minutes, request.seed)
    if out is not None:
        with _progress(console, f"writing {out}") as progress:
            task = progress.add_task("write", total=request.minutes)

            def minutes_done(sims):
                for sim in sims:
                    progress.update(task, completed=sim.minute + 1)
                    yield sim

            lines = write_jsonl(minutes_done(events), out)
        console.print(f"wrote {lines} events to {out} (seed {request.seed}, from {request.start.isoformat()})")
        return lines

    from services.client.produce import raw_producer

    producer = raw_producer(settings.bootstrap)
    sent, minute, began = 0, -1, time.monotonic()
    seconds_per_minute = 60.0 / speed if speed > 0 else 0.0
    try:
        with _progress(console, f"producing to {settings.verdicts_topic}") as progress:
            task = progress.add_task("produce", total=request.minutes)
            for sim in events:
                if sim.minute != minute:
                    minute = sim.minute
                    progress.update(task, completed=minute)
                    delay = began + send_after(minute, seconds_per_minute) - time.monotonic()
                    if delay > 0:
                        producer.flush()
                        time.sleep(delay)
                    if control is not None:
                        control.refresh()
                raw = sim.raw if control is None else control.apply(sim.key, sim.raw)
                if raw is None:
                    continue
                producer.send(settings.verdicts_topic, key=sim.key, value=raw)
                sent += 1
            producer.flush()
            progress.update(task, completed=request.minutes)
    finally:
        producer.close()
    console.print(f"sent {sent} messages to {settings.verdicts_topic} on {settings.bootstrap}")
    return sent
