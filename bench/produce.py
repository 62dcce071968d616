"""Producer throughput against the raw client, in the same run, on an embedded broker it starts.

    python bench/produce.py [--events 50000] [--repeat 3] [--linger-ms 20] [--compression gzip]

Rows:
  raw kafka-python      KafkaProducer.send of pre-serialised bytes (same acks/idempotence/compression/batching)
  VerdictProducer       send_many of event dicts: serialise + contract check + send
  AsyncVerdictProducer  await send() per event from asyncio, then flush

Best of --repeat runs per row; rows alternate so that a noisy neighbour hurts all of them.
The ratio is VerdictProducer / raw: the price of refusing bad events at the source.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from bench.results import RECORD_HELP, Figure, Recording  # noqa: E402
from services.app.broker import EmbeddedBroker, create_topics  # noqa: E402
from services.client.producer import AsyncVerdictProducer, VerdictProducer  # noqa: E402

ROUTES = ["billing-faq", "parcel-status", "returns", "plans/annual", "search:v2", "checkout-help"]
VERDICTS = ["supported", "supported", "unsupported", "contradicted", "supported", "overreach", "unlinked"]
T0 = datetime(2026, 11, 21, 9, tzinfo=UTC)


def make_events(n: int) -> list[dict]:
    """Realistic served answers: question, answer, versions, three claims with text and spans (~1 KB each)."""
    return [
        {
            "schema": "claimwatch.verdict/v1",
            "event_id": f"bench-{i:08d}",
            "trace_id": f"tr-{i:08d}",
            "observed_at": (T0 + timedelta(milliseconds=37 * i)).isoformat(),
            "route": ROUTES[i % len(ROUTES)],
            "query": {
                "text": f"How long do I have to return order {i} for a refund?",
                "query_type": "lookup",
                "stakes": "medium",
            },
            "answer": {
                "text": "Annual plans can be refunded within 30 days of purchase, minus a 5% fee.",
                "action": "served",
            },
            "versions": {
                "model": "gen-2026-10",
                "prompt": "faq-v14",
                "corpus": "policies@2026-11-01",
                "verifier": "nli@2.1",
            },
            "claims": [
                {
                    "claim_id": f"c{k}",
                    "text": f"Claim {k} of answer {i}: refunds within 30 days.",
                    "claim_type": "numeric",
                    "verdict": VERDICTS[(i + k) % len(VERDICTS)],
                    "score": 0.8,
                    "chunk_id": "pol-17#2",
                    "span": "refunded within 14 days of purchase",
                    "labeler": "verifier:nli@2.1",
                }
                for k in range(3)
            ],
        }
        for i in range(n)
    ]


def run_raw(bootstrap: str, topic: str, payloads: list[tuple[bytes, bytes]], options: dict) -> float:
    from kafka import KafkaProducer

    client = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        compression_type=options["compression"],
        linger_ms=options["linger_ms"],
        batch_size=options["batch_size"],
        max_in_flight_requests_per_connection=5,
    )
    client.partitions_for(topic)
    started = time.perf_counter()
    for key, value in payloads:
        client.send(topic, key=key, value=value)
    client.flush()
    elapsed = time.perf_counter() - started
    client.close()
    return len(payloads) / elapsed


def run_producer(bootstrap: str, topic: str, events: list[dict], options: dict) -> float:
    with VerdictProducer(bootstrap, topic, **options) as producer:
        producer.warm_up()
        started = time.perf_counter()
        report = producer.send_many(events)
        elapsed = time.perf_counter() - started
    if report.delivered != len(events):
        raise SystemExit(f"only {report.delivered} of {len(events)} events were delivered")
    return len(events) / elapsed


def run_async(bootstrap: str, topic: str, events: list[dict], options: dict) -> float:
    async def run() -> float:
        async with AsyncVerdictProducer(bootstrap, topic, **options) as producer:
            started = time.perf_counter()
            futures = [await producer.send(event) for event in events]
            await producer.flush()
            await asyncio.gather(*futures)
            return len(events) / (time.perf_counter() - started)

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256 * 1024)
    parser.add_argument("--compression", default="gzip", help="gzip, or none")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None
    options = {
        "linger_ms": args.linger_ms,
        "batch_size": args.batch_size,
        "compression": None if args.compression == "none" else args.compression,
    }

    events = make_events(args.events)
    payloads = [(e["route"].encode(), orjson.dumps(e)) for e in events]
    size = sum(len(v) for _, v in payloads) / len(payloads)
    best = {"raw kafka-python": 0.0, "VerdictProducer": 0.0, "AsyncVerdictProducer": 0.0}
    with EmbeddedBroker() as broker:
        for run in range(args.repeat):
            topics = {name: f"bench.{run}.{i}" for i, name in enumerate(best)}
            create_topics(broker.bootstrap, list(topics.values()), 4)
            order = list(best) if run % 2 == 0 else list(reversed(best))
            for name in order:
                if name == "raw kafka-python":
                    rate = run_raw(broker.bootstrap, topics[name], payloads, options)
                elif name == "VerdictProducer":
                    rate = run_producer(broker.bootstrap, topics[name], events, options)
                else:
                    rate = run_async(broker.bootstrap, topics[name], events, options)
                best[name] = max(best[name], rate)
                print(f"  run {run + 1}: {name:<22} {rate:>10,.0f} events/s", flush=True)

    print(
        f"\n{args.events:,} events of ~{size:,.0f} bytes, compression={args.compression}, linger_ms={args.linger_ms}, "
        f"best of {args.repeat} (2 shared CPU cores: figures are noisy)"
    )
    for name, rate in best.items():
        print(f"{name:<22} {rate:>10,.0f} events/s")
    print(f"ratio VerdictProducer / raw: {best['VerdictProducer'] / best['raw kafka-python']:.2f}")
    print(f"ratio AsyncVerdictProducer / raw: {best['AsyncVerdictProducer'] / best['raw kafka-python']:.2f}")
    if recording:
        raw = best["raw kafka-python"]  # one event a message: the baseline
        recording.finish(
            Figure(name, round(best[name]), "events/s", None, round(raw), round(best[name] / raw, 2))
            for name in ("VerdictProducer", "AsyncVerdictProducer")
        )


if __name__ == "__main__":
    main()
