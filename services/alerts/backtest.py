"""`claimwatch backtest`: the live rate and detector code over a JSONL file, in event time.

Events go through the same decoder, writer and ClickHouse aggregates (an embedded
store in a temporary directory); the evaluator then walks every minute with a
simulated clock and the transitions are written one JSON line each.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import orjson

from services.alerts.evaluator import MINUTE, evaluator_for, parse_minute
from services.alerts.store import AlertStore
from services.contract.decode import Decoder, Rejection
from services.rates.query import RateQueries
from services.store.backends import ChdbStore
from services.store.migrate import migrate
from services.store.writer import EventWriter

CHUNK = 5000


@dataclass(frozen=True)
class BacktestSummary:
    events: int
    rejected: int
    transitions: int
    minutes: int


def _chunks(path: Path, size: int):
    chunk = []
    with open(path, "rb") as f:
        for line in f:
            line = line.rstrip(b"\n")
            if line.strip():
                chunk.append(line)
            if len(chunk) >= size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def run_backtest(events_path: Path, alerts_out: Path, settings, progress=None) -> BacktestSummary:
    settings = settings.model_copy(update={"drift": settings.drift.model_copy(update={"watermark_seconds": 0})})
    workdir = Path(tempfile.mkdtemp(prefix="claimwatch-backtest-"))
    store = ChdbStore(workdir / "clickhouse")
    try:
        migrate(store)
        writer, decoder = EventWriter(store), Decoder(settings.ingest.max_event_bytes)
        stored = rejected = 0
        for chunk in _chunks(events_path, CHUNK):
            decoded = [decoder.decode(line) for line in chunk]
            events = [d for d in decoded if not isinstance(d, Rejection)]
            rejected += len(decoded) - len(events)
            stored += writer.write(events).inserted
            if progress:
                progress(len(chunk))
        rates = RateQueries(store)
        latest = rates.latest_minute()
        transitions = []
        minutes = 0
        if latest is not None:
            evaluator = evaluator_for(settings, rates, AlertStore(store), checkpoint=False)
            first = store.query("SELECT min(minute) AS m FROM rate_minute WHERE dim = ''")[0]["m"]
            evaluator.last_minute = parse_minute(first) - MINUTE  # evaluate from the very first minute
            minutes = int((latest - evaluator.last_minute) / timedelta(minutes=1))
            transitions = evaluator.evaluate(latest + MINUTE)
        tmp = alerts_out.with_name(alerts_out.name + ".tmp")
        with open(tmp, "wb") as out:
            for alert in transitions:
                out.write(orjson.dumps({"alert_id": alert.alert_id, **alert.transition_record()}) + b"\n")
        tmp.replace(alerts_out)
        return BacktestSummary(stored, rejected, len(transitions), minutes)
    finally:
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)
