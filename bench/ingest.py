"""Ingest throughput: raw aiokafka consumption vs the full path (Faust -> validate -> ClickHouse).

All three read the same topic in one run: (a) raw aiokafka, (c) a Faust agent that only
takes and acks batches (the framework's ceiling), (b) the full path. The full path is a real `claimwatch worker`
process with its own chDB directory; its throughput is measured from the first
stored event to the last, so worker start-up and group join are not counted.

    python bench/ingest.py --events 200000
"""
from __future__ import annotations

import argparse
import asyncio
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.client.produce import raw_producer, send_raw  # noqa: E402
from services.app.broker import EmbeddedBroker, create_topics  # noqa: E402
from tests.support.processes import WorkerProcess  # noqa: E402

VERDICTS = ["supported"] * 12 + ["unsupported", "contradicted", "overreach", "stale", "no_source", "trivial"]


def make_events(n: int, claims_per_event: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    routes = [f"route-{i}" for i in range(8)]
    out = []
    for i in range(n):
        out.append(orjson.dumps({
            "schema": "claimwatch.verdict/v1", "event_id": f"bench-{seed}-{i}", "trace_id": f"tr-{i}",
            "observed_at": f"2026-11-21T{(i // 60000) % 24:02d}:{(i // 1000) % 60:02d}:{i % 60:02d}.000Z",
            "route": rng.choice(routes),
            "query": {"text": "How long do I have to return an annual plan for a refund?", "query_type": "lookup",
                      "stakes": "medium", "answerable": True},
            "answer": {"text": "Annual plans can be refunded within 30 days of purchase.", "action": "served"},
            "versions": {"model": "gen-2026-10", "prompt": "faq-v14", "corpus": "policies@2026-11-01"},
            "claims": [{"claim_id": f"c{j}", "text": "Annual plans can be refunded within 30 days of purchase.",
                        "verdict": rng.choice(VERDICTS), "score": 0.9, "labeler": "verifier:nli@2"}
                       for j in range(claims_per_event)],
        }))
    return out


async def raw_consume(bootstrap: str, topic: str, expected: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_poll_records=5000,
                                fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    await consumer.start()
    parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
    consumer.assign(parts)
    await consumer.seek_to_beginning(*parts)
    seen, started = 0, time.perf_counter()
    while seen < expected:
        batch = await consumer.getmany(timeout_ms=1000)
        for records in batch.values():
            for record in records:
                orjson.loads(record.value)  # parse, as any consumer would
            seen += sum(len(r) for r in batch.values())
    elapsed = time.perf_counter() - started
    await consumer.stop()
    return elapsed


def faust_ceiling(bootstrap: str, topic: str, expected: int, batch: int) -> float:
    script = Path(__file__).with_name("faust_ceiling.py")
    out = subprocess.run([sys.executable, str(script), bootstrap, topic, str(expected), str(batch)],
                         capture_output=True, text=True, timeout=1800)
    found = re.search(r"events_per_second ([0-9.]+)", out.stdout)  # Faust may prefix terminal escapes
    if found:
        return float(found[1])
    raise SystemExit(f"faust ceiling run failed (exit {out.returncode}):\n{out.stderr[-2000:]}")


def full_path(bootstrap: str, prefix: str, expected: int, workdir: Path, batch: int) -> tuple[float, int]:
    worker = WorkerProcess(bootstrap, f"chdb:{workdir / 'ch'}", prefix, workdir / "worker.log",
                           env={"CLAIMWATCH_INGEST__BATCH_SIZE": str(batch), "CLAIMWATCH_CLUSTERING__IN_WORKER": "false"})
    first_seen = None
    with worker:
        started = time.perf_counter()
        while True:
            rows = worker.get("/api/rates", window="all") or []
            stored = sum(r["events"] for r in rows)
            now = time.perf_counter()
            if stored and first_seen is None:
                first_seen, first_count = now, stored
            if stored >= expected:
                return now - first_seen, stored - first_count
            if now - started > 1800:
                raise SystemExit(f"full path stalled at {stored}/{expected} events; see {workdir / 'worker.log'}")
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--claims", type=int, default=4, help="claims per event")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batch-size", type=int, default=2000, help="worker ingest batch size")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="cw-bench-ingest-"))
    prefix = f"bench{random.Random().randrange(1 << 30)}"
    with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
        topic = f"{prefix}.verdicts"
        create_topics(broker.bootstrap, [topic, f"{prefix}.verdicts.dlq", f"{prefix}.alerts"], args.partitions)
        lines = make_events(args.events, args.claims, args.seed)
        print(f"producing {args.events} events ({args.events * args.claims} claims, "
              f"{sum(map(len, lines)) / len(lines):.0f} B/event) to {broker.bootstrap} ...", flush=True)
        producer = raw_producer(broker.bootstrap)
        t = time.perf_counter()
        send_raw(producer, topic, lines)
        producer.close()
        print(f"  produced in {time.perf_counter() - t:.1f}s")

        raw_s = asyncio.run(raw_consume(broker.bootstrap, topic, args.events))
        print("  raw aiokafka done; Faust ceiling ...", flush=True)
        ceiling_events = faust_ceiling(broker.bootstrap, topic, args.events, args.batch_size)
        print("  Faust ceiling done; full path ...", flush=True)
        full_s, measured = full_path(broker.bootstrap, prefix, args.events, workdir, args.batch_size)

    claims = args.claims
    raw_rate = args.events * claims / raw_s
    full_rate = measured * claims / full_s
    print()
    print(f"(a) raw aiokafka consume + JSON parse : {raw_rate:>10,.0f} claims/s  ({args.events / raw_s:,.0f} events/s)")
    print(f"(c) Faust take+ack, no work (ceiling)  : {ceiling_events * claims:>10,.0f} claims/s  ({ceiling_events:,.0f} events/s)")
    print(f"(b) full path Faust+validate+ClickHouse: {full_rate:>10,.0f} claims/s  ({measured / full_s:,.0f} events/s)")
    print(f"ratio full/raw: {full_rate / raw_rate:.3f}   full/Faust ceiling: {full_rate / (ceiling_events * claims):.2f}"
          f"   target: >= 50,000 claims/s on the full path")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
