"""Sustained load: drive the worker at a fixed offered rate, then watch it drain.

A producer process offers ``--rate`` events/s (default 25,000, twice issue 1's target of
12,500) for ``--minutes``, with event times = wall-clock time, so the alert evaluator
works on live buckets. Every ``--every`` seconds it samples the worker: events stored,
consumer lag, RSS and evaluator latency (from /metrics). After the drive it keeps
sampling until every produced event is stored (lag recovered) or ``--drain-minutes``.

    python bench/load.py                      # 10 minutes at 25,000 events/s offered
    python bench/load.py --minutes 2 --rate 8000 --out load.json
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import re
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.processes import WorkerProcess  # noqa: E402
from bench.results import RECORD_HELP, Figure, Recording  # noqa: E402
from services.app.broker import EmbeddedBroker, create_topics  # noqa: E402

VERDICTS = ["supported"] * 11 + ["unsupported", "contradicted", "overreach", "stale", "no_source", "trivial"]
CLAIMS_PER_EVENT = 4


def templates(n: int, seed: int) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs with @ID@ and @TS@ placeholders, patched per send (cheap bytes.replace)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        route = f"route-{rng.randrange(8)}"
        value = orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": "@ID@",
                "trace_id": "@ID@",
                "observed_at": "@TS@",
                "route": route,
                "query": {
                    "text": f"How long do I have to return plan {i % 50} for a refund?",
                    "query_type": "lookup",
                    "stakes": "medium",
                    "answerable": True,
                },
                "answer": {"text": "Annual plans can be refunded within 30 days of purchase.", "action": "served"},
                "versions": {"model": "gen-2026-10", "prompt": "faq-v14", "corpus": "policies@2026-11-01"},
                "claims": [
                    {
                        "claim_id": f"c{j}",
                        "text": f"Plans can be refunded within {j + 29} days of purchase.",
                        "verdict": rng.choice(VERDICTS),
                        "score": 0.9,
                    }
                    for j in range(CLAIMS_PER_EVENT)
                ],
            }
        )
        out.append((route.encode(), value))
    return out


def produce(bootstrap: str, topic: str, rate: float, seconds: float, sent, seed: int) -> None:
    """Offer ``rate`` events/s in 50 ms slices; falls behind (and says so) if the CPU cannot keep up."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=1 << 20, max_request_size=4 << 20
    )
    pool = templates(1000, seed)
    started, n, total = time.monotonic(), 0, int(rate * seconds)
    while (elapsed := time.monotonic() - started) < seconds:
        due = min(int(rate * elapsed), total)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3].encode() + b"Z"
        slice_end = time.monotonic() + 0.05  # behind schedule: never send past the drive's end
        while n < due and time.monotonic() < slice_end:
            key, value = pool[n % len(pool)]
            producer.send(
                topic, key=key, value=value.replace(b"@ID@", b"load-%d-%d" % (seed, n)).replace(b"@TS@", stamp)
            )
            n += 1
        sent.value = n
        if n >= due:
            time.sleep(0.05)
    producer.flush()
    sent.value = n
    producer.close()


def samples_of(text: str) -> dict[str, list]:
    """Prometheus exposition text -> sample name -> samples (prometheus_client's own parser)."""
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def metric_sum(metrics: dict[str, list], name: str) -> float:
    return sum(s.value for s in metrics.get(name, []))


def histogram_quantile(metrics: dict[str, list], name: str, q: float) -> float | None:
    """The upper bound of the bucket holding the q-quantile (as coarse as the buckets)."""
    buckets = sorted((float(s.labels["le"]), s.value) for s in metrics.get(f"{name}_bucket", []))
    if not buckets or buckets[-1][1] == 0:
        return None
    return next(le for le, count in buckets if count >= q * buckets[-1][1])


def rss_mib(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    field = lambda key: int(re.search(rf"^{key}:\s+(\d+) kB", status, re.M)[1]) / 1024  # noqa: E731
    return field("VmRSS"), field("VmHWM")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=25_000, help="offered events/s (default: 2x the issue-1 target)")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--drain-minutes", type=float, default=30, help="give up waiting for lag to recover after this")
    parser.add_argument("--every", type=float, default=10, help="seconds between samples")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--out", type=Path, help="write samples and summary as JSON")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None

    console = Console()
    workdir = Path(tempfile.mkdtemp(prefix="cw-bench-load-"))
    prefix = f"load{random.randrange(1 << 30)}"
    topic = f"{prefix}.verdicts"
    samples: list[dict] = []
    with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
        create_topics(broker.bootstrap, [topic, f"{prefix}.verdicts.dlq", f"{prefix}.alerts"], args.partitions)
        worker = WorkerProcess(
            broker.bootstrap,
            f"chdb:{workdir / 'ch'}",
            prefix,
            workdir / "worker.log",
            env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false", "CLAIMWATCH_DRIFT__EVAL_INTERVAL_SECONDS": "10"},
        )
        with worker:
            time.sleep(8)  # group join
            sent = mp.Value("q", 0)
            drive_seconds = args.minutes * 60
            producer = mp.Process(target=produce, args=(broker.bootstrap, topic, args.rate, drive_seconds, sent, 1))
            console.print(
                f"offering {args.rate:,.0f} events/s ({args.rate * CLAIMS_PER_EVENT:,.0f} claims/s) for "
                f"{args.minutes:g} min; worker log {worker.log_path}"
            )
            started = time.monotonic()
            producer.start()
            last = (0.0, 0.0)
            while True:
                time.sleep(args.every)
                now = time.monotonic() - started
                metrics = samples_of(worker.get_text("/metrics"))
                stored = metric_sum(metrics, "claimwatch_events_total") - metric_sum(
                    metrics, "claimwatch_duplicate_events_total"
                )
                rss, _ = rss_mib(worker.proc.pid)
                sample = {
                    "t": round(now, 1),
                    "produced": sent.value,
                    "stored": int(stored),
                    "stored_per_s": round((stored - last[1]) / (now - last[0])),
                    "lag": int(sent.value - stored),
                    "kafka_lag": int(metric_sum(metrics, "claimwatch_consumer_lag")),
                    "rss_mib": round(rss),
                    "eval_p95_s": histogram_quantile(metrics, "claimwatch_evaluation_seconds", 0.95),
                }
                samples.append(sample)
                last = (now, stored)
                console.print(
                    f"t={sample['t']:>6.0f}s produced {sample['produced']:>10,} stored {sample['stored']:>10,} "
                    f"({sample['stored_per_s']:>6,}/s) lag {sample['lag']:>9,} rss {sample['rss_mib']:>5,} MiB "
                    f"eval p95 {sample['eval_p95_s']}"
                )
                if producer.exitcode:
                    raise SystemExit(f"the producer process failed (exit {producer.exitcode}); see its traceback above")
                if not producer.is_alive() and sample["lag"] <= 0:
                    break
                if now > drive_seconds + args.drain_minutes * 60:
                    console.print("[red]lag did not recover within --drain-minutes[/red]")
                    break
            producer.join()
            metrics = samples_of(worker.get_text("/metrics"))
            _, peak = rss_mib(worker.proc.pid)
            eval_count = metric_sum(metrics, "claimwatch_evaluation_seconds_count")
            eval_mean = metric_sum(metrics, "claimwatch_evaluation_seconds_sum") / max(eval_count, 1)
            in_clickhouse = sum(r["events"] for r in worker.get("/api/rates", window="all") or [])

    drive = [s for s in samples if s["t"] <= drive_seconds]
    produced = samples[-1]["produced"]
    summary = {
        "offered_events_per_s": args.rate,
        "achieved_produce_events_per_s": round(produced / drive_seconds),
        "sustained_events_per_s": round(samples[-1]["stored"] / samples[-1]["t"]),
        "drive_phase_events_per_s": round(drive[-1]["stored"] / drive[-1]["t"]) if drive else None,
        "max_lag": max(s["lag"] for s in samples),
        "recovered_after_s": round(max(0.0, samples[-1]["t"] - drive_seconds), 1),
        "lag_recovered": samples[-1]["lag"] <= 0,
        "events_in_clickhouse": in_clickhouse,
        "exactly_once": in_clickhouse == produced,
        "peak_rss_mib": round(peak),
        "evaluations": int(eval_count),
        "eval_mean_s": round(eval_mean, 3),
        "eval_p95_s": histogram_quantile(metrics, "claimwatch_evaluation_seconds", 0.95),
    }
    table = Table(title="load summary")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(
            key, f"{value:,}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
        )
    table.add_row("sustained claims/s", f"{summary['sustained_events_per_s'] * CLAIMS_PER_EVENT:,}")
    console.print(table)
    if args.out:
        args.out.write_bytes(orjson.dumps({"summary": summary, "samples": samples}, option=orjson.OPT_INDENT_2))
    if recording:
        recording.finish(
            [
                Figure("sustained", summary["sustained_events_per_s"] * CLAIMS_PER_EVENT, "claims/s"),
                Figure("lag recovered after", summary["recovered_after_s"], "s"),
                Figure("peak RSS", summary["peak_rss_mib"], "MiB"),
            ],
            note="" if summary["exactly_once"] else "the events in ClickHouse differ from those produced",
        )
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
