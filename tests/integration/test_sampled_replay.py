"""Issue 24: a stratified-sampled stream gives `claimwatch backtest` and the live worker the same weighted rates.

Long answers (four claims or more) are verified 1 in 10 and carry ``sampling.rate`` 0.1; the rest are all verified.
The same file goes over the Tansu broker to a worker process and through `claimwatch backtest --rates-out`.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import zlib
from datetime import UTC, datetime

import orjson
import pytest

from bench.processes import WorkerProcess, send_all
from services.app.broker import create_topics
from services.client.simulate import Scenario, generate

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
LONG, RATE = 4, 0.1
ESTIMATES = ("rate", "interval", "weighted", "effective_claims", "verdict_shares", "unsafe_serve", "abstention")
STORED = ("events", "claims", "failed", "verdicts", "sampling", "sampled_events")


def flat(value, key=""):
    """{"a": {"b": 1}, "c": [2, 3]} -> {"a.b": 1, "c.0": 2, "c.1": 3}: for pytest.approx, which takes no nesting."""
    if isinstance(value, dict):
        return {k: v for name, item in value.items() for k, v in flat(item, f"{key}.{name}" if key else name).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in flat(item, f"{key}.{i}").items()}
    return {key: value}


def stratified(sims):
    """Each event_id kept or dropped once (duplicates follow their first delivery); bad input passes through."""
    out = []
    for sim in sims:
        event = sim.event
        if event is None or len(event.get("claims") or ()) < LONG:
            out.append(sim)
        elif zlib.crc32(event["event_id"].encode()) % 10 == 0:
            event = {**event, "sampling": {"rate": RATE}}
            out.append(dataclasses.replace(sim, event=event, raw=orjson.dumps(event)))
    return out


def test_a_stratified_sampled_stream_gives_the_backtest_and_the_worker_the_same_weighted_rates(
    broker, topic_prefix, tmp_path
):
    sims = stratified(generate(Scenario.demo(), START, 20, seed=3))
    events_file = tmp_path / "sampled.jsonl"
    events_file.write_bytes(b"".join(s.raw + b"\n" for s in sims))
    sampled = {s.event["event_id"] for s in sims if s.event and "sampling" in s.event}
    valid = {s.event["event_id"] for s in sims if s.bad_rule is None}
    assert len(sampled) > 100 and len(valid) > 2000

    rates_file = tmp_path / "rates.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "services.app.cli",
            "backtest",
            str(events_file),
            "--alerts-out",
            str(tmp_path / "alerts.jsonl"),
            "--rates-out",
            str(rates_file),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    replayed = {r["route"]: r for r in orjson.loads(rates_file.read_bytes())}

    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2)
    send_all(broker.bootstrap, topic, sims)
    with WorkerProcess(broker.bootstrap, f"chdb:{tmp_path / 'ch'}", topic_prefix, tmp_path / "worker.log") as worker:

        def all_stored():
            rows = worker.get("/api/rates", window="all") or []
            return rows if sum(r["events"] for r in rows) == len(valid) else None

        live = {r["route"]: r for r in worker.wait_for(all_stored, 180, f"{len(valid)} events stored")}

    assert set(live) == set(replayed)
    for route, mine in live.items():
        theirs = replayed[route]
        assert {k: mine[k] for k in STORED} == {k: theirs[k] for k in STORED}, route
        estimates = flat({k: theirs[k] for k in ESTIMATES})
        assert flat({k: mine[k] for k in ESTIMATES}) == pytest.approx(estimates, rel=1e-9), route
    # The weights matter: the whole traffic's rate is not the verified claims' rate on a route that samples.
    mixed = [r for r in live.values() if r["sampling"] == "mixed"]
    assert mixed and any(abs(r["rate"] - r["failed"] / r["claims"]) > 0.005 for r in mixed)
    assert all(r["weighted"]["claims"] > r["claims"] for r in mixed)
