"""The ingest spine on real components: Tansu broker -> Faust worker process -> chDB.

One simulated stream (>= 10,000 events, >= 5% bad) goes through a worker that is
SIGKILLed mid-ingest and restarted; then the committed offsets are rewound so the
worker re-reads everything it already stored. Counts must stay exact throughout.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from datetime import datetime, timezone

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.client.simulate import Scenario, expected_counts, generate
from services.app.broker import create_topics
from tests.support.envelopes import Message, envelope, pack
from tests.support.processes import WorkerProcess, send_all

START = datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc)


def stored_totals(worker: WorkerProcess) -> tuple[int, int]:
    rates = worker.get("/api/rates", window="all") or []
    dlq = worker.get("/api/dlq") or []
    return sum(r["events"] for r in rates), sum(d["count"] for d in dlq)


def metric(worker: WorkerProcess, name: str) -> float:
    text = worker.get_text("/metrics")
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples if s.name == name)


async def read_topic(bootstrap: str, topic: str, timeout: float = 60) -> list:
    """Every record up to each partition's end offset (duplicates included)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        records, loop = [], asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            positions = [await consumer.position(tp) for tp in parts]
            if all(pos >= ends[tp] for pos, tp in zip(positions, parts)):
                break
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(batch)
        return records
    finally:
        await consumer.stop()


async def rewind_group(bootstrap: str, group: str, topic: str) -> None:
    """Commit offset 0 for every partition, as an operator resetting a consumer group would."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(parts)
        await consumer.commit({tp: OffsetAndMetadata(0, "") for tp in parts})
    finally:
        await consumer.stop()


@pytest.fixture(scope="module")
def stream():
    scenario = dataclasses.replace(Scenario.demo(), bad_fraction=0.06)
    sims = list(generate(scenario, START, 45, seed=11))
    return sims, expected_counts(sims)


@pytest.mark.parametrize("batched", [False, True], ids=["single", "envelopes"])
def test_exactly_once_through_kill_restart_and_redelivery(broker, topic_prefix, tmp_path, stream, batched):
    sims, expected = stream
    assert expected.valid_events >= 10_000, "the stream must be large enough to mean something"
    assert expected.bad_total >= 0.05 * len(sims) and len(expected.bad) >= 8
    assert expected.duplicates > 0

    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 4)
    send_all(broker.bootstrap, topic, pack(sims) if batched else sims)

    store = f"chdb:{tmp_path / 'ch'}"
    worker = WorkerProcess(broker.bootstrap, store, topic_prefix, tmp_path / "worker.log",
                           env={"CLAIMWATCH_INGEST__BATCH_SIZE": "5" if batched else "500"})  # ~500 events
    # 1. Kill the worker mid-ingest: written-but-uncommitted batches will be redelivered.
    worker.start()
    worker.wait_for(lambda: stored_totals(worker)[0] > 1000, 180, "some events stored")
    worker.kill()
    # 2. Restart: everything arrives, nothing twice.
    worker.start()
    total = expected.valid_events, expected.bad_total
    worker.wait_for(lambda: stored_totals(worker) == total, 300, f"{total} events/dead letters stored")

    rates = worker.get("/api/rates", window="all")
    assert {r["route"]: r["verdicts"] for r in rates} == expected.verdicts
    assert {r["route"]: r["events"] for r in rates} == expected.events
    assert [r["rate"] for r in rates] == sorted((r["rate"] for r in rates), reverse=True)  # worst first
    assert {d["reason"]: d["count"] for d in worker.get("/api/dlq")} == expected.bad

    # The CLI reaches the running service and prints the stable JSON shape.
    cli = subprocess.run([sys.executable, "-m", "services.app.cli", "rates", "--window", "all", "--json",
                          "--api", worker.url], capture_output=True, timeout=60, check=True)
    printed = orjson.loads(cli.stdout)
    assert {r["route"] for r in printed} == set(expected.events)
    assert all({"route", "events", "claims", "failed", "rate", "verdicts"} <= set(r) for r in printed)
    assert {r["route"]: (r["claims"], r["failed"]) for r in printed} == {
        route: (expected.claims(route), expected.failed(route)) for route in expected.events}
    worker.stop()

    # 3. Every bad message (or bad event of an envelope) is on the DLQ topic with its bytes, reason and source.
    dead = asyncio.run(read_topic(broker.bootstrap, f"{topic_prefix}.verdicts.dlq"))
    sources = {(dict(r.headers)["claimwatch-source"], dict(r.headers).get("claimwatch-envelope-index")) for r in dead}
    assert len(sources) == expected.bad_total  # at-least-once on the DLQ topic, each source present
    bad_bytes = {s.raw for s in sims if s.bad_rule}
    assert {r.value for r in dead} == bad_bytes
    assert all(dict(r.headers)["claimwatch-reason"] for r in dead)

    # 4. Redeliver committed batches: rewind the group to 0 and restart. Counts don't move.
    asyncio.run(rewind_group(broker.bootstrap, f"{topic_prefix}-worker", topic))
    worker.start()
    valid_messages = sum(1 for s in sims if s.bad_rule is None)
    worker.wait_for(lambda: metric(worker, "claimwatch_duplicate_events_total") >= valid_messages, 300,
                    "the whole topic re-read")
    assert stored_totals(worker) == total
    assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
    worker.stop()


def test_envelope_with_3_bad_events_among_97_good_stores_97_and_dead_letters_3_by_index(broker, topic_prefix, tmp_path):
    good = [{"schema": "claimwatch.verdict/v1", "event_id": f"env-{i}", "trace_id": f"tr-{i}",
             "observed_at": f"2026-11-21T08:{i % 60:02d}:00Z", "route": "billing-faq", "answer": {"action": "served"},
             "claims": [{"verdict": "supported"}, {"verdict": "contradicted"}]} for i in range(100)]
    bad = {17: ("unknown_verdict", {"claims": [{"verdict": "maybe"}]}),
           50: ("timestamp_without_offset", {"observed_at": "2026-11-21T08:50:00"}),
           98: ("bad_route", {"route": "billing faq"})}
    events = [{**e, **bad[i][1]} if i in bad else e for i, e in enumerate(good)]
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 1)
    send_all(broker.bootstrap, topic, [Message(b"billing-faq", envelope(orjson.dumps(e) for e in events))])

    with WorkerProcess(broker.bootstrap, f"chdb:{tmp_path / 'ch'}", topic_prefix, tmp_path / "worker.log",
                       env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"}) as worker:
        worker.wait_for(lambda: stored_totals(worker) == (97, 3), 120, "97 events and 3 dead letters")
        rates = worker.get("/api/rates", window="all")
        assert [(r["route"], r["events"], r["claims"]) for r in rates] == [("billing-faq", 97, 194)]
        samples = {d["reason"]: d["samples"] for d in worker.get("/api/dlq", samples=3)}
        assert {rule: [(s["envelope_index"], s["source"]) for s in found] for rule, found in samples.items()} == {
            rule: [(i, f"{topic}/0/0 events[{i}]")] for i, (rule, _) in bad.items()}
        cli = subprocess.run([sys.executable, "-m", "services.app.cli", "dlq", "--api", worker.url],
                             capture_output=True, timeout=60, check=True, env={**os.environ, "COLUMNS": "200"})
        assert f"{topic}/0/0 events[17]" in cli.stdout.decode()

    # On the DLQ topic each bad event is its own record: its bytes alone, its source and its index.
    dead = asyncio.run(read_topic(broker.bootstrap, f"{topic_prefix}.verdicts.dlq"))
    by_index = {int(dict(r.headers)["claimwatch-envelope-index"]): r for r in dead}
    assert set(by_index) == set(bad)
    for i, (rule, _) in bad.items():
        headers = dict(by_index[i].headers)
        assert (headers["claimwatch-rule"].decode(), headers["claimwatch-source"]) == (rule, f"{topic}/0/0".encode())
        assert orjson.loads(by_index[i].value) == events[i]
