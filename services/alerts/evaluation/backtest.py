"""`claimwatch backtest`: the live rate and detector code over a JSONL file, in event time.

Every line goes through the live decoder (the contract model); valid events land in an
embedded store in a temporary directory, where the live ``rate_minute`` materialized
view computes the minute buckets; the live evaluator then walks every minute with a
simulated clock, and each alert transition is written as one JSON line. History of any
age replays: live ingest's window (services/ingest/window.py) does not apply, only the
event times the store can hold. Rejected lines become dead letters in the store's ``dlq``
table, as on live ingest, so rejections per route and minute (services/store/dlq.py) exist here too.

What makes a million events take one to two minutes instead of ten (bench/backtest.py):
- CPython's collector is tuned for the run (``bulk_allocation``): decoding allocates
  millions of objects that live until their chunk is written, and the default
  thresholds rescan them over and over (decoding ran 2.3x slower);
- only the columns the rate view reads are inserted (``rate_row``) and the per-claim
  view is dropped from the private store (``services.store.scratch``), because the evaluator never reads raw
  claims; ``tests/unit/alerts/test_backtest.py`` checks the buckets equal the live writer's;
- duplicates are dropped with an in-memory set (the store starts empty, so this is the
  writer's "already stored" check without a query per chunk);
- inserts go in large chunks on a background thread, so ClickHouse (which releases the
  GIL) parses one chunk while Python decodes the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from services.alerts.evaluation.evaluator import MINUTE, AlertEvaluator
from services.alerts.evaluation.slo_watch import SloWatch
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.contract.rejection import Rejection
from services.core.files import write_atomically
from services.core.gcpolicy import bulk_allocation
from services.ingest.records import STORABLE_FROM, DeadLetter, store_range_problem
from services.rates.report import route_rates
from services.store.backends import Store
from services.store.convert import ch_time
from services.store.rates import RateRepository
from services.store.scratch import insert_event_rows
from services.store.writer import EventWriter

CHUNK = 50_000  # lines per insert: few, large inserts keep ClickHouse's per-insert cost negligible


@dataclass(frozen=True)
class BacktestSummary:
    events: int
    rejected: int
    transitions: int
    minutes: int
    duplicates: int = 0


def read_chunks(path: Path, size: int = CHUNK) -> Iterator[list[bytes]]:
    """Non-blank lines, without their line ends, ``size`` at a time."""
    chunk: list[bytes] = []
    with open(path, "rb", buffering=1 << 22) as f:
        for line in f:
            line = line.rstrip(b"\n")
            if line.strip():
                chunk.append(line)
                if len(chunk) >= size:
                    yield chunk
                    chunk = []
    if chunk:
        yield chunk


def rate_row(event: VerdictEvent) -> dict[str, Any]:
    """The ``events`` columns that the ``rate_minute`` view reads (same values as ``event_to_row``);
    every other column keeps its default, since a backtest never reads text."""
    answerable = event.query.answerable
    return {
        "event_id": event.event_id,
        "observed_at": ch_time(event.observed_at),
        "route": event.route,
        "query_type": event.query.query_type or "",
        "stakes": event.query.stakes or "",
        "answerable": -1 if answerable is None else int(answerable),
        "action": event.answer.action or "",
        "versions": event.versions,
        "verdicts": [c.verdict for c in event.claims],
        "sampling_rate": event.sampling.rate,
    }


class BucketLoader:
    """Decodes lines with the live decoder and fills ``rate_minute`` through the live view.
    Counts what it stored, refused and skipped as a duplicate (first delivery wins, as in
    ``EventWriter``).

    A refused line is a dead letter from ``source`` (its topic), partition 0, offset its index among the
    non-blank lines. Its route is the one its JSON names, read leniently; its minute its own event time
    where that is readable and storable, else the latest valid event time before it (the first valid
    event's for lines before any; the store's first minute in a file without one)."""

    def __init__(self, store: Store, decoder: Decoder, source: str = "backtest"):
        self.store = store
        self.decoder = decoder
        self.writer = EventWriter(store)
        self.source = source
        self.seen: set[str] = set()
        self.stored = self.rejected = self.duplicates = 0
        self.lines = 0
        self.latest: datetime | None = None  # the latest valid event time so far: the replay's clock
        self.undated: list[DeadLetter] = []  # refused before any valid event: dated by the first

    def split(self, lines: list[bytes]) -> tuple[list[dict[str, Any]], list[DeadLetter]]:
        """The ``events`` rows and the dead letters of a chunk of lines."""
        rows: list[dict[str, Any]] = []
        dead: list[DeadLetter] = []
        for line in lines:
            offset, self.lines = self.lines, self.lines + 1
            event = self.decoder.decode(line)
            if not isinstance(event, Rejection):
                unstorable = store_range_problem(event.observed_at)
                if unstorable is not None:
                    event = Rejection((unstorable,), event_id=event.event_id, route=event.route)
            if isinstance(event, Rejection):
                self.rejected += 1
                self._dead_letter(DeadLetter(self.source, 0, offset, line, event, route=event.route or ""), dead)
                continue
            if self.latest is None:
                dead += [replace(d, event_time=event.observed_at) for d in self.undated]
                self.undated.clear()
            self.latest = max(self.latest or event.observed_at, event.observed_at)
            if event.event_id in self.seen:
                self.duplicates += 1
            else:
                self.seen.add(event.event_id)
                rows.append(rate_row(event))
        self.stored += len(rows)
        return rows, dead

    def _dead_letter(self, d: DeadLetter, dead: list[DeadLetter]) -> None:
        own = d.rejection.observed_at
        if own is not None and store_range_problem(own) is None:
            dead.append(replace(d, event_time=own))
        elif self.latest is not None:
            dead.append(replace(d, event_time=self.latest))
        else:
            self.undated.append(d)

    def insert(self, rows: list[dict[str, Any]], dead: Sequence[DeadLetter] = ()) -> None:
        insert_event_rows(self.store, rows)
        self.writer.write([], dead)

    def load(self, chunks: Iterator[list[bytes]], progress: Callable[[int], None] | None = None) -> None:
        with ThreadPoolExecutor(1, thread_name_prefix="backtest-insert") as pool:
            pending = None
            for lines in chunks:
                rows, dead = self.split(lines)
                if pending is not None:
                    pending.result()  # at most one chunk in flight: bounded memory, errors surface here
                pending = pool.submit(self.insert, rows, dead)
                if progress:
                    progress(len(lines))
            if pending is not None:
                pending.result()
        if self.undated:  # no valid event at all: no minute of the replay to count them in
            self.insert([], [replace(d, event_time=STORABLE_FROM) for d in self.undated])
            self.undated.clear()


def replay(
    loader: BucketLoader,
    rates: RateRepository,
    evaluator: AlertEvaluator,
    events_path: Path,
    alerts_out: Path,
    progress: Callable[[int], None] | None = None,
    chunk: int = CHUNK,
    rates_out: Path | None = None,
    slos: SloWatch | None = None,
) -> BacktestSummary:
    """Load ``events_path`` with ``loader``, then have ``evaluator`` (on the same store as ``rates``, without a
    checkpoint, on the replay's clock) and ``slos`` (the SLO burn alerts) walk every minute from the first; write one
    JSON line per alert transition
    to ``alerts_out`` and, with ``rates_out``, every route's rates over the whole file as
    `claimwatch rates --window all -o json` prints them. ``progress(n)``: lines read since its last call.
    services/app/compose.py ``run_backtest`` builds the private store and these three on it."""
    with bulk_allocation():
        loader.load(read_chunks(events_path, chunk), progress)
    loader.seen.clear()
    latest = rates.latest_minute()
    transitions = []
    minutes = 0
    if latest is not None and (first := rates.first_minute()) is not None:
        evaluator.last_minute = first - MINUTE  # evaluate from the very first minute
        minutes = int((latest - evaluator.last_minute) / MINUTE)
        transitions = evaluator.evaluate(latest + MINUTE)
        if slos is not None:  # every minute the evaluator walked, as the live cycle steps them pass by pass
            transitions = sorted([*transitions, *slos.step(first, latest)], key=lambda a: a.transition_at)
    write_atomically(
        alerts_out,
        b"".join(
            orjson.dumps({"alert_id": alert.alert_id, **alert.transition_record()}) + b"\n" for alert in transitions
        ),
    )
    if rates_out is not None:
        write_atomically(rates_out, orjson.dumps(route_rates(rates.totals()), option=orjson.OPT_INDENT_2))
    return BacktestSummary(loader.stored, loader.rejected, len(transitions), minutes, loader.duplicates)
