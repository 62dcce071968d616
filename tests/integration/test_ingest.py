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
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import WorkerProcess, send_all
from services.app.broker import EmbeddedBroker, create_topics
from services.client.simulate import Scenario, expected_counts, generate
from tests.support.envelopes import Message, envelope, pack

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


def stored_totals(worker: WorkerProcess) -> tuple[int, int]:
    rates = worker.get("/api/rates", window="all") or []
    dlq = worker.get("/api/dlq") or []
    return sum(r["events"] for r in rates), sum(d["count"] for d in dlq)


def wait_for_totals(worker: WorkerProcess, total: tuple[int, int], timeout: float) -> None:
    """Wait until exactly `total` (events, dead letters) are stored; a timeout says what was stored instead."""
    seen: list[tuple[int, int]] = []

    def reached() -> bool:
        seen[:] = [stored_totals(worker)]
        return seen[0] == total

    try:
        worker.wait_for(reached, timeout, f"{total} events/dead letters stored")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; stored instead: {seen}") from None


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
    worker = WorkerProcess(
        broker.bootstrap,
        store,
        topic_prefix,
        tmp_path / "worker.log",
        env={"CLAIMWATCH_INGEST__BATCH_SIZE": "5" if batched else "500"},
    )  # ~500 events
    # 1. Kill the worker mid-ingest: written-but-uncommitted batches will be redelivered.
    worker.start()
    worker.wait_for(lambda: stored_totals(worker)[0] > 1000, 180, "some events stored")
    worker.kill()
    # 2. Restart: everything arrives, nothing twice.
    worker.start()
    total = expected.valid_events, expected.bad_total
    wait_for_totals(worker, total, 300)

    rates = worker.get("/api/rates", window="all")
    assert {r["route"]: r["verdicts"] for r in rates} == expected.verdicts
    assert {r["route"]: r["events"] for r in rates} == expected.events
    assert [r["rate"] for r in rates] == sorted((r["rate"] for r in rates), reverse=True)  # worst first
    assert {d["reason"]: d["count"] for d in worker.get("/api/dlq")} == expected.bad

    # The CLI reaches the running service and prints the stable JSON shape.
    cli = subprocess.run(
        [sys.executable, "-m", "services.app.cli", "rates", "--window", "all", "--json", "--api", worker.url],
        capture_output=True,
        timeout=60,
        check=True,
    )
    printed = orjson.loads(cli.stdout)
    assert {r["route"] for r in printed} == set(expected.events)
    assert all({"route", "events", "claims", "failed", "rate", "verdicts"} <= set(r) for r in printed)
    assert {r["route"]: (r["claims"], r["failed"]) for r in printed} == {
        route: (expected.claims(route), expected.failed(route)) for route in expected.events
    }
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
    worker.wait_for(
        lambda: metric(worker, "claimwatch_duplicate_events_total") >= valid_messages, 300, "the whole topic re-read"
    )
    assert stored_totals(worker) == total
    assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
    worker.stop()


def test_envelope_with_3_bad_events_among_97_good_stores_97_and_dead_letters_3_by_index(broker, topic_prefix, tmp_path):
    good = [
        {
            "schema": "claimwatch.verdict/v1",
            "event_id": f"env-{i}",
            "trace_id": f"tr-{i}",
            "observed_at": f"2026-11-21T08:{i % 60:02d}:00Z",
            "route": "billing-faq",
            "answer": {"action": "served"},
            "claims": [{"verdict": "supported"}, {"verdict": "contradicted"}],
        }
        for i in range(100)
    ]
    bad = {
        17: ("unknown_verdict", {"claims": [{"verdict": "maybe"}]}),
        50: ("timestamp_without_offset", {"observed_at": "2026-11-21T08:50:00"}),
        98: ("bad_route", {"route": "billing faq"}),
    }
    events = [{**e, **bad[i][1]} if i in bad else e for i, e in enumerate(good)]
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 1)
    send_all(broker.bootstrap, topic, [Message(b"billing-faq", envelope(orjson.dumps(e) for e in events))])

    with WorkerProcess(
        broker.bootstrap,
        f"chdb:{tmp_path / 'ch'}",
        topic_prefix,
        tmp_path / "worker.log",
        env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
    ) as worker:
        worker.wait_for(lambda: stored_totals(worker) == (97, 3), 120, "97 events and 3 dead letters")
        rates = worker.get("/api/rates", window="all")
        assert [(r["route"], r["events"], r["claims"]) for r in rates] == [("billing-faq", 97, 194)]
        samples = {d["reason"]: d["samples"] for d in worker.get("/api/dlq", samples=3)}
        assert {rule: [(s["envelope_index"], s["source"]) for s in found] for rule, found in samples.items()} == {
            rule: [(i, f"{topic}/0/0 events[{i}]")] for i, (rule, _) in bad.items()
        }
        cli = subprocess.run(
            [sys.executable, "-m", "services.app.cli", "dlq", "--api", worker.url],
            capture_output=True,
            timeout=60,
            check=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert f"{topic}/0/0 events[17]" in cli.stdout.decode()

    # On the DLQ topic each bad event is its own record: its bytes alone, its source and its index.
    dead = asyncio.run(read_topic(broker.bootstrap, f"{topic_prefix}.verdicts.dlq"))
    by_index = {int(dict(r.headers)["claimwatch-envelope-index"]): r for r in dead}
    assert set(by_index) == set(bad)
    for i, (rule, _) in bad.items():
        headers = dict(by_index[i].headers)
        assert (headers["claimwatch-rule"].decode(), headers["claimwatch-source"]) == (rule, f"{topic}/0/0".encode())
        assert orjson.loads(by_index[i].value) == events[i]


def partition_lags(worker: WorkerProcess, topic: str) -> dict[str, float]:
    text = worker.get_text("/metrics")
    return {
        s.labels["partition"]: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "claimwatch_consumer_lag" and s.labels["topic"] == topic
    }


def test_consumer_lag_reads_zero_right_after_a_restart_with_nothing_new(broker, topic_prefix, tmp_path):
    sims = list(generate(Scenario.demo(regression_at=5, corpus_change_at=None).scaled(0.1), START, 10, seed=5))
    expected = expected_counts(sims)
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2)
    send_all(broker.bootstrap, topic, sims)
    worker = WorkerProcess(
        broker.bootstrap,
        f"chdb:{tmp_path / 'ch'}",
        topic_prefix,
        tmp_path / "worker.log",
        env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
    )
    worker.start()
    total = expected.valid_events, expected.bad_total
    wait_for_totals(worker, total, 120)
    worker.wait_for(lambda: set(partition_lags(worker, topic).values()) == {0}, 60, "the lag to reach 0")
    worker.stop()

    # Restarted with nothing new: the group's commit says it is caught up, before any new message arrives.
    def both_partitions() -> dict[str, float] | None:
        found = partition_lags(worker, topic)
        return found if len(found) == 2 else None

    worker.start()
    assert worker.wait_for(both_partitions, 60, "the lag of both partitions") == {"0": 0, "1": 0}
    assert stored_totals(worker) == total
    worker.stop()


# The production defaults of the window, which WorkerProcess widens for tests that send fixed event times.
LIVE_WINDOW = {
    "CLAIMWATCH_RETENTION__RAW_DAYS": "30",
    "CLAIMWATCH_RETENTION__AGGREGATE_DAYS": "400",
    "CLAIMWATCH_INGEST__BACKFILL": "false",
    "CLAIMWATCH_CLUSTERING__IN_WORKER": "false",
}


def test_every_acked_boundary_date_is_stored_and_counted_or_dead_lettered_with_its_rule(broker, topic_prefix, tmp_path):
    now = datetime.now(UTC).replace(microsecond=0)
    skew = timedelta(seconds=300)
    outside, old, ahead = "observed_at.outside_store_range", "observed_at.too_old", "observed_at.too_far_ahead"
    cases = {  # route: (observed_at, the rule it is dead-lettered under, or None: stored)
        "year-1": ("0001-01-01T00:00:00Z", outside),
        "year-1900": ("1900-01-01T00:00:00Z", outside),
        "last-second-of-1969": ("1969-12-31T23:59:59Z", outside),
        "first-second-of-1970": ("1970-01-01T00:00:00Z", old),
        "datetime-last-second": ("2106-02-07T06:28:15Z", ahead),
        "past-datetime": ("2106-02-07T06:28:16Z", outside),
        "older-than-raw-rows": (now - timedelta(days=31), old),
        "recent": (now - timedelta(hours=1), None),
        "skew-less-a-second": (now + skew - timedelta(seconds=1), None),
        "past-the-skew": (now + skew + timedelta(hours=1), ahead),  # the worker judges later than `now`: a margin
        "thirty-days-ahead": (now + timedelta(days=30), ahead),
    }
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2)
    send_all(
        broker.bootstrap,
        topic,
        [
            Message(
                route.encode(),
                orjson.dumps(
                    {
                        "schema": "claimwatch.verdict/v1",
                        "event_id": f"b-{route}",
                        "trace_id": f"tr-{route}",
                        "route": route,
                        "observed_at": when if isinstance(when, str) else when.isoformat(),
                        "claims": [{"verdict": "supported"}],
                    }
                ),
            )
            for route, (when, _) in cases.items()
        ],
    )

    stored = {route for route, (_, rule) in cases.items() if rule is None}
    with WorkerProcess(
        broker.bootstrap, f"chdb:{tmp_path / 'ch'}", topic_prefix, tmp_path / "worker.log", env=LIVE_WINDOW
    ) as worker:
        total = len(stored), len(cases) - len(stored)
        wait_for_totals(worker, total, 120)
        assert {r["route"]: r["events"] for r in worker.get("/api/rates", window="all")} == dict.fromkeys(stored, 1)
        for route, (_, rule) in cases.items():
            if rule is not None:
                assert [(d["reason"], d["count"]) for d in worker.get("/api/dlq", route=route)] == [(rule, 1)], route
        cli = subprocess.run(
            [sys.executable, "-m", "services.app.cli", "dlq", "--route", "first-second-of-1970", "--api", worker.url],
            capture_output=True,
            timeout=60,
            check=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert "observed_at.too_old" in cli.stdout.decode() and "ingest.backfill" in cli.stdout.decode()


def test_a_restarted_in_memory_broker_does_not_overwrite_earlier_dead_letters(topic_prefix, tmp_path):
    """Tansu keeps its log in memory: restarted, it counts offsets from 0 again. Both offset-0 dead letters stay."""
    topic = f"{topic_prefix}.verdicts"
    store = f"chdb:{tmp_path / 'ch'}"
    for run, raw in enumerate([b"not json", b'{"schema": "claimwatch.verdicts/v1", "events": []}']):
        with EmbeddedBroker(log_path=tmp_path / f"tansu-{run}.log") as broker:
            create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 1)
            send_all(broker.bootstrap, topic, [Message(b"billing-faq", raw)])  # offset 0, in either run
            with WorkerProcess(
                broker.bootstrap,
                store,
                topic_prefix,
                tmp_path / f"worker-{run}.log",
                env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
            ) as worker:
                worker.wait_for(lambda run=run: stored_totals(worker)[1] == run + 1, 120, f"{run + 1} dead letters")
                summary = worker.get("/api/dlq", route="billing-faq")
    assert {d["reason"]: [s["source"] for s in d["samples"]] for d in summary} == {
        "not_json": [f"{topic}/0/0"],
        "envelope.events.empty": [f"{topic}/0/0"],
    }


def test_a_broker_restarted_under_a_running_worker_overwrites_no_dead_letter(topic_prefix, tmp_path):
    """The worker keeps running while Tansu restarts on its port: the new log counts offsets from 0 again under
    the epoch the worker read at its start. Every dead letter of both logs is stored, as many as were counted."""
    topic, store = f"{topic_prefix}.verdicts", f"chdb:{tmp_path / 'ch'}"
    topics = [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"]
    first = EmbeddedBroker(log_path=tmp_path / "tansu-0.log").start()
    try:
        create_topics(first.bootstrap, topics, 1)
        with WorkerProcess(
            first.bootstrap,
            store,
            topic_prefix,
            tmp_path / "worker.log",
            env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
        ) as worker:
            for run in range(2):
                if run:  # the same port, a new in-memory log
                    first.stop()
                    first = EmbeddedBroker(port=first.port, log_path=tmp_path / "tansu-1.log").start()
                    create_topics(first.bootstrap, topics, 1)
                send_all(
                    first.bootstrap, topic, [Message(b"billing-faq", f"not json {run}/{i}".encode()) for i in range(40)]
                )
                worker.wait_for(
                    lambda run=run: metric(worker, "claimwatch_dlq_total") == 40 * (run + 1),
                    180,
                    f"{40 * (run + 1)} dead letters counted",
                )
            wait_for_totals(worker, (0, 80), 60)
            summary = worker.get("/api/dlq", samples=20)
    finally:
        first.stop()
    assert [(d["reason"], d["count"]) for d in summary] == [("not_json", 80)]
    assert {s["source"] for s in summary[0]["samples"]} <= {f"{topic}/0/{offset}" for offset in range(40)}


def test_a_byte_budget_smaller_than_a_batch_drains_large_envelopes_exactly_once(broker, topic_prefix, tmp_path):
    """Issue 25: envelopes of 400 events (about 1 MB each) against a 2 MiB budget. Delivery waits whenever the
    budget is spent and resumes as batches are acked: everything arrives, once, and the worker never held much
    more than the budget (at most one message beyond it)."""
    sims = [s for s in generate(Scenario.demo(), START, 12, seed=5) if s.bad_rule is None and not s.duplicate]
    messages = pack(sims, max_events=400)
    largest = max(len(m.raw) for m in messages)
    assert len(messages) >= 10 and largest > 500_000
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2)
    send_all(broker.bootstrap, topic, messages)
    budget = 2 << 20
    with WorkerProcess(
        broker.bootstrap,
        f"chdb:{tmp_path / 'ch'}",
        topic_prefix,
        tmp_path / "worker.log",
        env={"CLAIMWATCH_INGEST__MAX_BUFFER_BYTES": str(budget)},
    ) as worker:
        worker.wait_for(lambda: stored_totals(worker) == (len(sims), 0), 300, f"{len(sims)} events stored")
        peak = metric(worker, "claimwatch_ingest_buffered_bytes_peak")
        assert largest <= peak <= budget + largest
        worker.wait_for(lambda: metric(worker, "claimwatch_ingest_buffered_bytes") == 0, 30, "every byte given back")
