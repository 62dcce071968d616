"""Ingest throughput, in one run on the same simulated events: raw aiokafka consumption vs the full path.

The events are the demo's simulated traffic (1-8 claims with text and spans, about 2 KB each; no bad
input or duplicates). They are sent twice: one event per Kafka message (topic ``singles``) and packed
into batch envelopes per route key as ``VerdictProducer`` does (topic ``envelopes``). Then, one after
another on the same broker:

  raw     aiokafka consuming and parsing each message (orjson), no other work: the baseline, read before
          and after the workers (its rate: both runs' claims over both runs' time);
  ceiling a Faust agent that only takes and acks batches (bench/faust_ceiling.py): the framework's limit,
          with Faust's own transport (the target's baseline) and with the worker's (streams/transport.py);
  single  the full path (a real `claimwatch worker`: Faust -> validation -> ClickHouse -> materialized
          views) on the single-event topic;
  envelope the same on the envelope topic.

Each is given as claims/s, as a ratio to ``raw`` (single-event topic), and as CPU µs per claim (all
threads of the consuming process, chDB's included). A worker's rate is measured from its first stored
event to the last, so start-up and group join are not counted; its peak RSS is the kernel's VmHWM.

    python bench/ingest.py                    # 200,000 events
    python bench/ingest.py --events 5000      # a smoke check
    python bench/ingest.py --envelope-events 100 --partitions 2   # smaller envelopes, fewer partitions
    python bench/ingest.py --backlog --events 460000   # only a worker draining ~1 GB of envelopes: its peak RSS
    python bench/ingest.py --profile --events 20000    # in-process CPU µs per claim of each stage of the path
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.processes import WorkerProcess  # noqa: E402
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.app.broker import EmbeddedBroker, create_topics  # noqa: E402
from services.client.batching import EnvelopeBatcher  # noqa: E402
from services.client.produce import raw_producer, send_raw  # noqa: E402
from services.client.simulate.generate import generate  # noqa: E402
from services.client.simulate.scenario import Scenario  # noqa: E402
from services.core.clock import utcnow  # noqa: E402

SINGLES_TARGET = Target(at_least=0.8)  # of Faust's ceiling (issue 25)
ENVELOPES_TARGET = Target(at_least=0.25)  # of raw consumption
RSS_TARGET = Target(at_most=1024, text="< 1 GiB")
MIN_EVENTS_PER_MINUTE = 150  # the demo's volume at the bottom of its daily swing; bounds the minutes to simulate
# How often a worker's stored count is read. Each read is a query on the worker's store and API: at 0.1 s the
# poll itself took about a tenth of a singles worker's CPU. The rate's error is at most two polls in a 20 s run.
POLL_SECONDS = 0.25
THREAD_ROLES = {  # the worker names its own threads (services/core/threads.py: named_executor)
    "python": "event loop (Faust, API) and other Python threads",
    "cw-decode": "decode thread",
    "cw-store": "store thread (Python, and chDB's work on it)",
    "ThreadPool": "chDB query and insert pool",
    "MergeMutate": "chDB background merges",
    "cw-alerts": "alert evaluation (catching up after a backlog)",
}


@dataclass(frozen=True)
class Run:
    """One measured path: claims consumed, wall seconds, CPU seconds of the consuming process."""

    name: str
    what: str
    claims: float
    seconds: float
    cpu_seconds: float | None
    messages: int | None = None
    peak_rss: int | None = None  # bytes
    threads: Counter = field(default_factory=Counter)  # CPU seconds by thread name (full-path runs)

    @property
    def rate(self) -> float:
        """NaN when everything arrived between two polls (a run too small to time)."""
        return self.claims / self.seconds if self.claims and self.seconds > 0 else math.nan


def simulated_events(n: int, seed: int) -> tuple[list[bytes], int]:
    """``n`` valid simulated events (raw bytes) and their claims."""
    scenario = Scenario.demo(bad_fraction=0.0, duplicate_fraction=0.0)
    minutes = math.ceil(n / MIN_EVENTS_PER_MINUTE) + 10
    start = (utcnow() - timedelta(minutes=minutes)).replace(hour=0, minute=0, second=0, microsecond=0)
    lines, claims = [], 0
    for sim in generate(scenario, start, minutes, seed):
        lines.append(sim.raw)
        claims += len(sim.event["claims"])
        if len(lines) == n:
            return lines, claims
    raise SystemExit(f"the simulation gave only {len(lines):,} events")


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid: int) -> Counter:
    """utime + stime of ``pid``'s threads by thread name (THREAD_ROLES)."""
    spent: Counter = Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended between listing and reading
            continue
        spent[name] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return spent


def proc_peak_rss(pid: int) -> int:
    found = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(found[1]) * 1024 if found else 0


async def raw_consume(bootstrap: str, topic: str, expected: int) -> tuple[float, float]:
    """Wall and CPU seconds to consume and parse ``expected`` messages from the start of ``topic``."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        max_poll_records=5000,
        fetch_max_bytes=64 << 20,
        max_partition_fetch_bytes=16 << 20,
    )
    await consumer.start()
    parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
    consumer.assign(parts)
    await consumer.seek_to_beginning(*parts)
    seen, started, cpu = 0, time.perf_counter(), time.process_time()
    while seen < expected:
        batch = await consumer.getmany(timeout_ms=1000)
        for records in batch.values():
            for record in records:
                orjson.loads(record.value)  # parse, as any consumer would
            seen += len(records)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await consumer.stop()
    return elapsed, cpu


def faust_ceiling(bootstrap: str, topic: str, expected: int, batch: int, inline: bool) -> tuple[float, float]:
    """Messages/s and CPU seconds per message of the take-and-ack agent."""
    script = Path(__file__).with_name("faust_ceiling.py")
    out = subprocess.run(
        [sys.executable, str(script), bootstrap, topic, str(expected), str(batch)] + (["inline"] if inline else []),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    found = re.search(r"events_per_second ([0-9.]+) cpu_per_event ([0-9.e-]+)", out.stdout)  # Faust may add escapes
    if found:
        return float(found[1]), float(found[2])
    raise SystemExit(f"faust ceiling run failed (exit {out.returncode}):\n{out.stderr[-2000:]}")


def full_path(
    bootstrap: str, prefix: str, expected: int, workdir: Path, env: dict[str, str]
) -> tuple[float, int, float, int, Counter]:
    """(seconds, events measured, CPU seconds, peak RSS, CPU seconds by thread name) of a worker storing
    ``expected`` events."""
    worker = WorkerProcess(
        bootstrap,
        f"chdb:{workdir / 'ch'}",
        prefix,
        workdir / "worker.log",
        env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false", **env},
    )
    workdir.mkdir(parents=True, exist_ok=True)
    first_seen = None
    with worker:
        pid = worker.proc.pid
        started = time.perf_counter()
        while True:
            rows = worker.get("/api/rates", window="all") or []
            stored = sum(r["events"] for r in rows)
            now = time.perf_counter()
            if stored and first_seen is None:
                first_seen, first_count, first_cpu, first_threads = (
                    now,
                    stored,
                    proc_cpu_seconds(pid),
                    thread_cpu_seconds(pid),
                )
            if stored >= expected:
                return (
                    now - first_seen,
                    stored - first_count,
                    proc_cpu_seconds(pid) - first_cpu,
                    proc_peak_rss(pid),
                    thread_cpu_seconds(pid) - first_threads,
                )
            if now - started > 1800:
                raise SystemExit(f"full path stalled at {stored}/{expected} events; see {workdir / 'worker.log'}")
            time.sleep(POLL_SECONDS)


def produce(bootstrap: str, topic: str, lines: list[bytes], batcher: EnvelopeBatcher | None) -> int:
    producer = raw_producer(bootstrap)
    try:
        return send_raw(producer, topic, lines, batcher=batcher)
    finally:
        producer.close()


def envelope_batcher(args) -> EnvelopeBatcher:
    return EnvelopeBatcher() if args.envelope_events is None else EnvelopeBatcher(max_events=args.envelope_events)


def fmt(value: float, spec: str) -> str:
    return "—" if math.isnan(value) else format(value, spec)


def report(runs: list[Run], events: int, claims: int, nbytes: int, console: Console) -> None:
    base = runs[0]
    table = Table(
        title=f"Ingest of {events:,} simulated events ({claims:,} claims, {nbytes / events:,.0f} B/event), one run"
    )
    for col, justify in (
        ("path", "left"),
        ("what", "left"),
        ("claims/s", "right"),
        ("ratio to raw", "right"),
        ("CPU µs/claim", "right"),
        ("messages/s", "right"),
        ("peak RSS", "right"),
    ):
        table.add_column(col, justify=justify)
    for r in runs:
        table.add_row(
            r.name,
            r.what,
            fmt(r.rate, ",.0f"),
            fmt(r.rate / base.rate, ".3f"),
            "—" if r.cpu_seconds is None or not r.claims else f"{r.cpu_seconds / r.claims * 1e6:,.1f}",
            "—" if r.messages is None else fmt(r.messages / r.seconds if not math.isnan(r.rate) else math.nan, ",.0f"),
            "—" if r.peak_rss is None else f"{r.peak_rss / 2**20:,.0f} MiB",
        )
    console.print(table)
    full = [r for r in runs if r.threads]
    if full:
        by_thread = Table(title="The workers' CPU by thread, µs per claim (cores busy)")
        by_thread.add_column("thread")
        for r in full:
            by_thread.add_column(r.name, justify="right")
        for name in sorted({n for r in full for n in r.threads}, key=lambda n: -max(r.threads[n] for r in full)):
            if max(r.threads[name] / r.seconds for r in full) >= 0.01:
                by_thread.add_row(
                    THREAD_ROLES.get(name, name),
                    *(f"{r.threads[name] / r.claims * 1e6:,.1f} ({r.threads[name] / r.seconds:.2f})" for r in full),
                )
        console.print(by_thread)


def profile(args, console: Console, recording: Recording | None) -> int:
    """Where the worker's CPU goes per claim, stage by stage, on the same events in one process: decoding
    (parse and validate), encoding each event as its intake line, and the insert through the intake view into
    ``events`` with its views, and into a copy of ``events`` with no view attached. Batches of --batch-size
    events, as the worker writes them."""
    from services.contract.decode import Decoder
    from services.ingest.records import INTAKE_FORMAT, intake_line
    from services.store.backends import ChdbStore
    from services.store.convert import INTAKE_SETTINGS, INTAKE_TABLE
    from services.store.migrate import migrate
    from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
    from services.store.writer import INSERT_SETTINGS

    lines, claims = simulated_events(args.events, args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="cw-bench-profile-"))
    store = ChdbStore(workdir / "clickhouse")  # the worker's schema, every view attached
    migrate(store)
    RetentionKeeper(store).apply(KEEP_EVERYTHING)
    spent = dict.fromkeys(("decode", "encode", "insert, no view", "insert with views"), 0.0)
    try:  # the bare copy: the intake view's twin, into a copy of events with no view on it
        store.command("CREATE TABLE events_bare AS events")
        store.command("CREATE TABLE intake_bare AS events_intake")
        intake_view = store.query(
            "SELECT create_table_query AS q FROM system.tables WHERE name = 'events_intake_mv' "
            "AND database = currentDatabase()"
        )[0]["q"]
        store.command(
            intake_view.replace("events_intake_mv", "intake_bare_mv")
            .replace(" TO default.events ", " TO events_bare ")
            .replace(f"FROM default.{INTAKE_TABLE}", "FROM intake_bare")
        )
        for start in range(0, len(lines), args.batch_size):
            t = time.process_time()
            decoder = Decoder()
            events = [
                event
                for _, event in (
                    item for raw in lines[start : start + args.batch_size] for item in decoder.decode_message(raw)
                )
            ]
            spent["decode"] += time.process_time() - t
            t = time.process_time()
            data = b"\n".join(intake_line(e) for e in events)
            spent["encode"] += time.process_time() - t
            for name, target in (("insert, no view", "intake_bare"), ("insert with views", INTAKE_TABLE)):
                t = time.process_time()
                store.stream_lines(target, data, {**INSERT_SETTINGS, **INTAKE_SETTINGS}, INTAKE_FORMAT)
                spent[name] += time.process_time() - t
        assert store.query("SELECT count() AS n FROM events_bare")[0]["n"] == len(lines), "the bare copy is empty"
    finally:
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)
    table = Table(title=f"CPU per stage, {args.events:,} events ({claims:,} claims), batches of {args.batch_size:,}")
    for col in ("stage", "µs/claim", "µs/event", "share"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    total = spent["decode"] + spent["encode"] + spent["insert with views"]
    for name, seconds in spent.items():
        table.add_row(
            name,
            f"{seconds / claims * 1e6:,.1f}",
            f"{seconds / len(lines) * 1e6:,.1f}",
            "" if name == "insert, no view" else f"{seconds / total:.0%}",
        )
    console.print(table)
    console.print(
        f"the views: {(spent['insert with views'] - spent['insert, no view']) / claims * 1e6:,.1f} µs/claim; "
        "process CPU time (chDB's threads included); decode and encode hold the GIL, inserts mostly not"
    )
    if recording:
        recording.finish(
            Figure(f"profile: {name}", round(t / claims * 1e6, 1), "µs/claim") for name, t in spent.items()
        )
    return 0


def backlog(args, console: Console, recording: Recording | None) -> int:
    """A worker started on a backlog of envelopes: how much memory it takes to drain it."""
    workdir = Path(tempfile.mkdtemp(prefix="cw-bench-backlog-"))
    prefix = f"bench{random.Random().randrange(1 << 30)}"
    lines, claims = simulated_events(args.events, args.seed)
    env = {"CLAIMWATCH_INGEST__BATCH_SIZE": str(args.batch_size), **dict(kv.split("=", 1) for kv in args.env)}
    try:
        with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
            topic = f"{prefix}.verdicts"
            create_topics(broker.bootstrap, [topic, f"{prefix}.verdicts.dlq", f"{prefix}.alerts"], args.partitions)
            messages = produce(broker.bootstrap, topic, lines, envelope_batcher(args))
            nbytes = sum(map(len, lines))
            console.print(
                f"backlog: {args.events:,} events ({claims:,} claims) in {messages:,} envelopes, "
                f"{nbytes / 2**20:,.0f} MiB"
            )
            wall, measured, cpu, rss, _ = full_path(broker.bootstrap, prefix, args.events, workdir / "worker", env)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    measured_claims = measured * claims / args.events
    console.print(
        f"worker drained it at {measured_claims / wall:,.0f} claims/s, "
        f"{cpu / measured_claims * 1e6:,.1f} CPU µs/claim; "
        f"peak RSS {rss / 2**20:,.0f} MiB = {rss / nbytes:.2f} of the backlog (target < 1 GiB)"
    )
    if recording:
        recording.finish(
            [
                Figure(
                    "backlog: peak RSS",
                    round(rss / 2**20),
                    "MiB",
                    RSS_TARGET,
                    round(nbytes / 2**20),
                    round(rss / nbytes, 2),
                ),
                Figure("backlog: drain", round(measured_claims / wall), "claims/s"),
                Figure("backlog: CPU", round(cpu / measured_claims * 1e6, 1), "µs/claim"),
            ]
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--envelope-events",
        type=int,
        default=None,
        metavar="N",
        help="at most N events per envelope (default: as VerdictProducer packs them, up to 900 KB)",
    )
    parser.add_argument("--batch-size", type=int, default=2000, help="worker ingest batch size (messages)")
    parser.add_argument(
        "--backlog",
        action="store_true",
        help="only the envelope topic, sent whole before the worker starts: its peak RSS",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the worker, e.g. CLAIMWATCH_INGEST__PIPELINE_DEPTH=2 (repeatable)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="in process, no broker: CPU µs per claim of decoding, columns and each store insert",
    )
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args(argv)
    recording = Recording.start(__file__, argv) if args.record else None
    if args.backlog:
        return backlog(args, Console(width=140), recording)
    if args.profile:
        return profile(args, Console(width=140), recording)
    console = Console(width=140)

    workdir = Path(tempfile.mkdtemp(prefix="cw-bench-ingest-"))
    prefix = f"bench{random.Random().randrange(1 << 30)}"
    lines, claims = simulated_events(args.events, args.seed)
    nbytes = sum(map(len, lines))
    per_event = claims / len(lines)
    env = {"CLAIMWATCH_INGEST__BATCH_SIZE": str(args.batch_size), **dict(kv.split("=", 1) for kv in args.env)}
    try:
        with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
            topics = {kind: f"{prefix}-{kind}.verdicts" for kind in ("singles", "envelopes")}
            create_topics(
                broker.bootstrap,
                [
                    name
                    for kind in topics
                    for name in (topics[kind], f"{prefix}-{kind}.verdicts.dlq", f"{prefix}-{kind}.alerts")
                ],
                args.partitions,
            )
            console.print(
                f"producing {args.events:,} events ({claims:,} claims, {nbytes / args.events:,.0f} B/event) "
                f"twice to {broker.bootstrap} ..."
            )
            t = time.perf_counter()
            singles = produce(broker.bootstrap, topics["singles"], lines, None)
            envelopes = produce(broker.bootstrap, topics["envelopes"], lines, envelope_batcher(args))
            console.print(
                f"  {singles:,} single-event and {envelopes:,} envelope messages "
                f"({args.events / envelopes:,.0f} events each) in {time.perf_counter() - t:.1f} s"
            )

            raw_before = asyncio.run(raw_consume(broker.bootstrap, topics["singles"], singles))
            runs = []
            raw_s, raw_cpu = asyncio.run(raw_consume(broker.bootstrap, topics["envelopes"], envelopes))
            runs.append(Run("raw envelopes", "the same on envelopes", claims, raw_s, raw_cpu, envelopes))
            console.print("  raw consumption done; Faust ceiling ...")
            for path, what, inline in (
                ("ceiling", "Faust take + ack only, single events", False),
                ("ceiling, inline", "the same with the worker's transport", True),
            ):
                per_s, cpu_each = faust_ceiling(broker.bootstrap, topics["singles"], singles, args.batch_size, inline)
                # Stated per wall second: the agent reports rates, not totals.
                runs.append(Run(path, what, per_s * per_event, 1.0, cpu_each * per_s, round(per_s)))
            for kind, messages in (("singles", singles), ("envelopes", envelopes)):
                console.print(f"  full path on {kind} ...")
                wall, measured, cpu, rss, threads = full_path(
                    broker.bootstrap, f"{prefix}-{kind}", args.events, workdir / kind, env
                )
                runs.append(
                    Run(
                        f"full, {kind}",
                        "worker: Faust -> validate -> ClickHouse -> views",
                        measured * per_event,
                        wall,
                        cpu,
                        round(measured * messages / args.events),
                        rss,
                        threads,
                    )
                )
            # The baseline is read again after the workers, and both count: this machine's speed drifts by a
            # third within minutes, and a baseline from one moment alone moved the envelope ratio as much.
            raw_after = asyncio.run(raw_consume(broker.bootstrap, topics["singles"], singles))
            rates = " and ".join(f"{claims / seconds:,.0f}" for seconds, _ in (raw_before, raw_after))
            runs.insert(
                0,
                Run(
                    "raw",
                    f"aiokafka consume + orjson parse, single events (before and after the workers: {rates})",
                    2 * claims,
                    raw_before[0] + raw_after[0],
                    raw_before[1] + raw_after[1],
                    2 * singles,
                ),
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    report(runs, args.events, claims, nbytes, console)
    ceiling, inline_ceiling, single, envelope = runs[2:6]
    console.print(
        f"full path, single events: {fmt(single.rate / ceiling.rate, '.2f')} of the Faust ceiling (target ≥ 0.8; "
        f"{fmt(single.rate / inline_ceiling.rate, '.2f')} of it with the worker's transport); "
        f"envelopes: {fmt(envelope.rate / runs[0].rate, '.3f')} of raw (target ≥ 0.25); "
        f"peak RSS {max(single.peak_rss, envelope.peak_rss) / 2**20:,.0f} MiB (target < 1 GiB)"
    )
    console.print(
        f"[dim]claims/s from events × {per_event:.2f} claims per event; seed {args.seed}, "
        f"{args.partitions} partitions, worker batch {args.batch_size} messages[/dim]"
    )
    if recording:
        recording.finish(
            [
                # round(x, 0), not round(x): a run too small to time has NaN rates, which are not recorded
                Figure("raw", round(runs[0].rate, 0), "claims/s"),
                Figure("singles", round(single.rate, 0), "claims/s"),
                Figure("singles / Faust ceiling", round(single.rate / ceiling.rate, 3), "x", SINGLES_TARGET),
                Figure("envelopes", round(envelope.rate, 0), "claims/s"),
                Figure("envelopes / raw", round(envelope.rate / runs[0].rate, 3), "x", ENVELOPES_TARGET),
                Figure(
                    "envelopes CPU",
                    round(envelope.cpu_seconds / envelope.claims * 1e6, 1) if envelope.claims else math.nan,
                    "µs/claim",
                ),
                Figure("peak RSS", round(max(single.peak_rss, envelope.peak_rss) / 2**20), "MiB", RSS_TARGET),
            ]
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
