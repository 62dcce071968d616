"""Every codec Kafka has, from a real producer through the real broker into the store, counts exact; and a worker
that cannot read its input stops non-zero, saying why and what to do, and loses nothing."""

from __future__ import annotations

import asyncio
import textwrap
from datetime import UTC, datetime

from bench.processes import WorkerProcess
from services.app.broker import create_topics
from services.client.simulate import Scenario, expected_counts, generate

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
CODECS = ("gzip", "snappy", "lz4", "zstd")


async def produce(bootstrap: str, topic: str, sims, compression: str | None) -> None:
    """aiokafka's producer, as a Python service would send: batches compressed with ``compression``."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", compression_type=compression, linger_ms=20, max_request_size=4 << 20
    )
    await producer.start()
    try:
        for sim in sims:
            await producer.send(topic, key=sim.key, value=sim.raw)
        await producer.flush()
    finally:
        await producer.stop()


def stored_totals(worker: WorkerProcess) -> tuple[int, int] | None:
    rates, dlq = worker.get("/api/rates", window="all"), worker.get("/api/dlq")
    if rates is None or dlq is None:
        return None
    return sum(r["events"] for r in rates), sum(d["count"] for d in dlq)


def topics_for(broker, prefix: str) -> str:
    topic = f"{prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{prefix}.verdicts.dlq", f"{prefix}.alerts"], 2)
    return topic


def test_each_codec_from_a_real_producer_is_stored_exactly(broker, topic_prefix, tmp_path):
    topic = topics_for(broker, topic_prefix)
    sims = list(generate(Scenario.demo(), START, 8, seed=41))
    chunks = [sims[i :: len(CODECS)] for i in range(len(CODECS))]
    with WorkerProcess(
        broker.bootstrap,
        f"chdb:{tmp_path / 'ch'}",
        topic_prefix,
        tmp_path / "worker.log",
        env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
    ) as worker:
        sent = []
        for codec, chunk in zip(CODECS, chunks):
            asyncio.run(produce(broker.bootstrap, topic, chunk, codec))
            sent += chunk
            expected = expected_counts(sent)
            want = (expected.valid_events, expected.bad_total)
            worker.wait_for(
                lambda want=want: stored_totals(worker) == want, 120, f"{want} stored after the {codec} batches"
            )
        rates = worker.get("/api/rates", window="all")
        assert {r["route"]: r["verdicts"] for r in rates} == expected_counts(sims).verdicts


def without_codec_libraries(path) -> dict[str, str]:
    """A Python environment where cramjam (aiokafka's lz4, snappy and zstd) cannot be imported: a deployment that
    installed claimwatch's code without its dependencies."""
    path.mkdir()
    (path / "sitecustomize.py").write_text(
        textwrap.dedent("""\
        import sys
        sys.modules["cramjam"] = None  # import cramjam -> ImportError
    """)
    )
    return {"PYTHONPATH": str(path)}


def test_a_batch_the_worker_cannot_decode_stops_it_non_zero_with_the_remedy_and_loses_nothing(
    broker, topic_prefix, tmp_path
):
    topic = topics_for(broker, topic_prefix)
    sims = list(generate(Scenario.demo(), START, 3, seed=43))
    before, compressed, after = sims[:300], sims[300:500], sims[500:]
    store, log = f"chdb:{tmp_path / 'ch'}", tmp_path / "worker.log"
    env = {"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"}
    broken = WorkerProcess(
        broker.bootstrap, store, topic_prefix, log, env={**env, **without_codec_libraries(tmp_path / "site")}
    ).start()
    asyncio.run(produce(broker.bootstrap, topic, before, None))
    asyncio.run(produce(broker.bootstrap, topic, compressed, "lz4"))
    asyncio.run(produce(broker.bootstrap, topic, after, None))
    try:
        code = broken.proc.wait(120)
    finally:
        broken.kill()
    assert code != 0, "a worker that cannot read its input must not look like a clean stop to its supervisor"
    last = log.read_text().strip().splitlines()[-1]
    assert "lz4" in last and "pip install" in last and "restart" in last, last

    with WorkerProcess(broker.bootstrap, store, topic_prefix, log, env=env) as worker:
        expected = expected_counts(sims)
        want = (expected.valid_events, expected.bad_total)
        worker.wait_for(lambda: stored_totals(worker) == want, 120, f"{want} stored after the restart")
