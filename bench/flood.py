"""An anonymous flood can't starve on-call or ingest (issue 23, H3).

Starts `claimwatch up` (embedded broker and store, a directory of its own, the demo's settings, a token
configured), loads the demo's history, then runs two phases of the same length, one after the other:

1. baseline: live traffic offered at --rate events/s while a token holder's probe (`GET /api/alerts`) runs
   every 100 ms;
2. flood: the same, while --clients anonymous keep-alive clients (another process, niced: the outsider)
   loop over the dashboard and the heaviest reads (`/`, `/routes/R`, `/issues`, `/api/slices?window=all`,
   `/api/rates?window=24h`) as fast as the server answers them.

For each phase: the probe's p50 and p95 (target during the flood: p95 < 200 ms), events stored per second
against events offered (target: the flood's rate at least 0.9 of the baseline's), and the consumer lag at
the end. The flood's answers are counted by status (429: refused by the per-address read limit).

    python bench/flood.py                               # 30 s phases, 200 clients, 400 events/s
    python bench/flood.py --addresses 200               # a crowd: each client its own address

Exit status: 0 when both targets are met, 1 when one is missed, 2 when a peer is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from idle import Stack, p95, peers_or_exit, progress, send_traffic  # noqa: E402

from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.client.produce import raw_producer  # noqa: E402
from services.client.simulate import Scenario, generate  # noqa: E402

PROBE_LIMIT = 0.200  # seconds, p95 during the flood
INGEST_RATIO_LIMIT = 0.9  # events stored per second during the flood, against the baseline
FLOOD_PATHS = ("/", "/routes/billing-faq", "/issues", "/api/slices?window=all", "/api/rates?window=24h")


def flood(url: str, clients: int, addresses: int, seconds: float, results) -> None:
    """Runs in its own process: ``clients`` keep-alive connections, each asking for the next path as soon as
    the last answer came, for ``seconds``, from ``addresses`` callers (named in X-Forwarded-For, which the stack
    trusts from loopback in this bench). Puts the count of answers by status on ``results``."""
    os.nice(10)

    async def client(http: httpx.AsyncClient, n: int, until: float, counts: Counter) -> None:
        caller = {"X-Forwarded-For": f"10.{n % addresses // 65536}.{n % addresses // 256 % 256}.{n % 256}"}
        while time.monotonic() < until:
            try:
                response = await http.get(url + FLOOD_PATHS[n % len(FLOOD_PATHS)], headers=caller)
                counts[str(response.status_code)] += 1
            except httpx.HTTPError as exc:
                counts[type(exc).__name__] += 1
            n += 1

    async def run() -> Counter:
        counts: Counter = Counter()
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(limits=limits, timeout=60) as http:
            until = time.monotonic() + seconds
            await asyncio.gather(*(client(http, n, until, counts) for n in range(clients)))
        return counts

    results.put(dict(asyncio.run(run())))


class Offered(threading.Thread):
    """Live traffic at a steady rate: the demo's events, stamped now, sent one a message."""

    def __init__(self, bootstrap: str, topic: str, rate: float, seconds: float, seed: int):
        super().__init__(daemon=True)
        now = datetime.now(UTC)
        minutes = max(1, int(rate * seconds / 200) + 1)
        self.sims = list(generate(Scenario.demo(), now - timedelta(minutes=minutes), minutes, seed=seed))
        self.bootstrap, self.topic, self.rate, self.seconds = bootstrap, topic, rate, seconds
        self.sent = 0

    def run(self) -> None:
        producer = raw_producer(self.bootstrap)
        started = time.monotonic()
        for sim in self.sims:
            elapsed = time.monotonic() - started
            if elapsed >= self.seconds:
                break
            ahead = self.sent / self.rate - elapsed
            if ahead > 0:
                time.sleep(ahead)
            producer.send(self.topic, key=sim.key, value=sim.raw)
            self.sent += 1
        producer.flush()
        producer.close()


def phase(stack: Stack, args, clients: int) -> dict:
    results = multiprocessing.Queue()
    flooder = (
        multiprocessing.Process(target=flood, args=(stack.url, clients, args.addresses, args.seconds, results))
        if clients
        else None
    )
    offered = Offered(stack.bootstrap, "claimwatch.verdicts", args.rate, args.seconds, args.seed + clients)
    stored_before = stack.metric("claimwatch_events_total")
    if flooder:
        flooder.start()
    offered.start()
    latencies: list[float] = []
    started = time.monotonic()
    with httpx.Client(timeout=60, headers=stack.headers) as http:
        while time.monotonic() - started < args.seconds:
            t = time.monotonic()
            http.get(stack.url + "/api/alerts").raise_for_status()
            latencies.append(time.monotonic() - t)
            progress(
                f"{'flood' if clients else 'baseline'}: {time.monotonic() - started:.0f}s, probe p95 so far "
                f"{p95(latencies) * 1000:.0f} ms"
            )
            time.sleep(max(0.0, 0.1 - (time.monotonic() - t)))
    elapsed = time.monotonic() - started
    stored = stack.metric("claimwatch_events_total") - stored_before
    offered.join()
    counts = results.get(timeout=120) if flooder else {}
    if flooder:
        flooder.join()
    lag = sum(v for k, v in stack.metrics().items() if k.startswith("claimwatch_consumer_lag{"))
    progress("", final=False)
    return {
        "p50": sorted(latencies)[len(latencies) // 2],
        "p95": p95(latencies),
        "probes": len(latencies),
        "stored_per_s": stored / elapsed,
        "offered_per_s": offered.sent / elapsed,
        "lag": lag,
        "flood": counts,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    parser.add_argument("--clients", type=int, default=200, help="anonymous keep-alive clients in the flood")
    parser.add_argument(
        "--addresses",
        type=int,
        default=1,
        help="callers the clients are spread over (1: one "
        "address, as from one machine; up to --clients: a crowd, each with its own rate limit)",
    )
    parser.add_argument("--rate", type=float, default=400.0, help="live events offered per second in both phases")
    parser.add_argument("--history-minutes", type=int, default=120, help="demo history loaded first")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs, store)")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    peers_or_exit("flood.py")
    recording = Recording.start(__file__) if args.record else None

    workdir = Path(tempfile.mkdtemp(prefix="claimwatch-flood-"))
    stack = Stack(workdir)  # its reads, and the probe, are a token holder's
    stack.env["CLAIMWATCH_API__TRUSTED_PROXIES"] = '["127.0.0.1"]'  # so the flood can name its callers
    try:
        stack.start()
        send_traffic(stack, args.history_minutes, args.seed)
        stack.wait("the history to be stored", stack.caught_up, 600)
        base = phase(stack, args, 0)
        stack.wait("ingestion to catch up", stack.caught_up, 300)
        flooded = phase(stack, args, args.clients)
    except RuntimeError as exc:
        print(f"\nbench/flood.py: {exc}", file=sys.stderr)
        return 1
    finally:
        stack.stop()
        if args.keep:
            print(f"working directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    ratio = flooded["stored_per_s"] / base["stored_per_s"] if base["stored_per_s"] else 0.0
    probe_ok, ingest_ok = flooded["p95"] < PROBE_LIMIT, ratio >= INGEST_RATIO_LIMIT
    print()
    for name, r in (("baseline", base), (f"flood, {args.clients} clients", flooded)):
        print(
            f"{name:22s} probe p50 {r['p50'] * 1000:.0f} ms, p95 {r['p95'] * 1000:.0f} ms ({r['probes']} probes); "
            f"stored {r['stored_per_s']:.0f}/s of {r['offered_per_s']:.0f}/s offered; lag at the end {r['lag']:.0f}"
        )
    answered = sum(flooded["flood"].values())
    print(
        f"{'flood answers':22s} {answered:,} in {args.seconds:g}s ({answered / args.seconds:.0f}/s) from "
        f"{args.addresses} address{'es' if args.addresses > 1 else ''}: "
        + ", ".join(f"{k}: {v:,}" for k, v in sorted(flooded["flood"].items()))
    )
    print(
        f"{'probe p95 in the flood':22s} {flooded['p95'] * 1000:.0f} ms (target < {PROBE_LIMIT * 1000:.0f} ms): "
        f"{'ok' if probe_ok else 'MISSED'}"
    )
    print(
        f"{'ingest in the flood':22s} {ratio:.2f} of the baseline's rate (target >= {INGEST_RATIO_LIMIT}): "
        f"{'ok' if ingest_ok else 'MISSED'}"
    )
    if recording:
        p95_target = Target(at_most=PROBE_LIMIT * 1000, text=f"< {PROBE_LIMIT * 1000:.0f} ms")
        recording.finish(
            [
                Figure(
                    "probe p95 in the flood", round(flooded["p95"] * 1000), "ms", p95_target, round(base["p95"] * 1000)
                ),
                Figure("ingest in the flood", round(ratio, 2), "x", Target(at_least=INGEST_RATIO_LIMIT)),
            ],
            note=", ".join(f"{k}: {v:,}" for k, v in sorted(flooded["flood"].items())),
        )
    return 0 if probe_ok and ingest_ok else 1


if __name__ == "__main__":
    sys.exit(main())
