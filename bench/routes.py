"""Thousands of routes (issue 49): the real worker, evaluator and API with N routes at 3 answers a minute each.

For each size (--baseline-routes, default 1,000, then --routes, default 10,000), on a fresh embedded broker and
store with a real worker process (`claimwatch worker --serve-api`):

1. a backfill: --history-minutes of past minutes, produced as fast as the worker takes them; the evaluator's
   first passes catch up on them. A few routes (--silent) stop 20 minutes before the backfill ends, so their
   `route_silent` alerts fire;
2. --minutes of live traffic at wall-clock pace (event time = now), as production sends it. Measured: seconds of
   evaluation per wall-clock minute and the longest pass (the evaluator logs each pass), its lag behind the wall
   clock (wall clock minus the end of the newest minute evaluated: it must not grow), the worker's RSS;
3. the API under that load, each read with a timeout: GET / (the overview), /api/rates, /metrics (size and time)
   and `claimwatch rates --api` (time); the evaluator's stored state from /api/storage (bytes on disk);
4. a restart: the worker stopped (SIGINT) while traffic goes on, its store's largest evaluator value read, and
   a new worker on the same store: how long until it resumes every route, and whether its alerts are the same
   ones with the same transitions (no duplicates) and the firing count on /metrics agrees.

Then one table: each figure at both sizes and their ratio.

    python bench/routes.py                                                   # 1,000 then 10,000 routes
    python bench/routes.py --routes 2000 --baseline-routes 500 --history-minutes 40 --minutes 3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.processes import WorkerProcess  # noqa: E402
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.app.broker import EmbeddedBroker, create_topics  # noqa: E402
from services.client.produce import raw_producer  # noqa: E402
from services.store.backends import ChdbStore  # noqa: E402

ANSWERS_PER_MINUTE = 3
EVALUATED = re.compile(r"evaluated (\d+) routes through (\S+): (\d+) minutes in ([\d.]+) s")
RESUMED = re.compile(r"evaluator resumed at (\S+): (\d+) routes, (\d+) open alerts, in ([\d.]+) s")
VERDICTS = ["supported"] * 11 + ["unsupported", "contradicted"]
MIXES = [("lookup", "low"), ("lookup", "high"), ("multi_hop", "high")]
console = Console()


# -- the worker process ----------------------------------------------------------------------------------------
WORKER_ENV = {"PYTHONPATH": str(ROOT), "CLAIMWATCH_CLUSTERING__IN_WORKER": "false"}


def timed_get(worker: WorkerProcess, path: str, timeout: float = 30, **params) -> tuple[int | None, float, bytes]:
    """(status or None, seconds, body) of a GET."""
    started = time.perf_counter()
    try:
        response = httpx.get(worker.url + path, params=params or None, timeout=timeout)
    except httpx.HTTPError:
        return None, time.perf_counter() - started, b""
    return response.status_code, time.perf_counter() - started, response.content


def json_of(worker: WorkerProcess, path: str, **params):
    """The JSON of a 200 answer, waiting up to a minute for it (10,000 routes' pages are slow); None otherwise."""
    status, _, body = timed_get(worker, path, 60, **params)
    return orjson.loads(body) if status == 200 else None


def wait_for(predicate, timeout: float, what: str, worker: WorkerProcess | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker is not None and worker.proc is not None and worker.proc.poll() is not None:
            raise SystemExit(f"the worker exited ({worker.proc.returncode}) waiting for {what}; log: {worker.log_path}")
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return tuple(int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M)[1]) / 1024 for k in ("VmRSS", "VmHWM"))


def record_rss(worker: WorkerProcess, path: Path, stop: threading.Event) -> threading.Thread:
    """Every half second, the worker's VmRSS (MiB) to ``path``: when a peak happened, beside the worker's log."""

    def sample() -> None:
        with open(path, "a") as out:
            while not stop.wait(0.5):
                try:
                    out.write(f"{datetime.now():%H:%M:%S.%f}\t{rss_mib(worker.proc.pid)[0]:.0f}\n")
                    out.flush()
                except (OSError, AttributeError, TypeError):  # between workers (a restart; an exited one has no VmRSS)
                    pass

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    return thread


def metrics_of(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = sample.name + "".join(f"{{{k}={v}}}" for k, v in sorted(sample.labels.items()))
            out[key] = out.get(key, 0.0) + sample.value
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


# -- traffic ---------------------------------------------------------------------------------------------------
def route_name(i: int) -> str:
    return f"route-{i:05d}"


def templates(routes: int, seed: int) -> list[list[bytes]]:
    """Per route, a few answers with @ID@ and @TS@ to patch (bytes.replace): three mix slices, ~8% failing."""
    rng = random.Random(seed)
    out = []
    for i in range(routes):
        variants = []
        for v in range(4):
            query_type, stakes = MIXES[(i + v) % len(MIXES)]
            variants.append(
                orjson.dumps(
                    {
                        "schema": "claimwatch.verdict/v1",
                        "event_id": "@ID@",
                        "trace_id": "@ID@",
                        "observed_at": "@TS@",
                        "route": route_name(i),
                        "answer": {"action": "served"},
                        "versions": {"model": "m1", "prompt": "p1"},
                        "query": {"query_type": query_type, "stakes": stakes, "answerable": True},
                        "claims": [{"verdict": rng.choice(VERDICTS)} for _ in range(rng.randint(2, 6))],
                    }
                )
            )
        out.append(variants)
    return out


def stamp(at: datetime) -> bytes:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3].encode() + b"Z"


def send_minute(producer, topic: str, pool: list[list[bytes]], minute: datetime, tag: str, quiet: set[int]) -> int:
    """Every route's answers of one minute (spread over its seconds); the quiet routes send nothing."""
    n = 0
    for i, variants in enumerate(pool):
        if i in quiet:
            continue
        for a in range(ANSWERS_PER_MINUTE):
            at = minute + timedelta(seconds=(i * 7 + a * 20) % 60)
            value = (
                variants[(a + i) % len(variants)]
                .replace(b"@ID@", f"{tag}-{i}-{a}".encode())
                .replace(b"@TS@", stamp(at))
            )
            producer.send(topic, key=route_name(i).encode(), value=value)
            n += 1
    return n


def live_traffic(bootstrap: str, topic: str, routes: int, seed: int, quiet: list[int], stop, sent) -> None:
    """Each wall-clock minute's answers, sent through that minute (event time = when sent), until ``stop``."""
    producer = raw_producer(bootstrap)
    pool, quiet = templates(routes, seed), set(quiet)
    per_route = [(i, a) for a in range(ANSWERS_PER_MINUTE) for i in range(routes) if i not in quiet]
    minute = None
    while not stop.is_set():
        now = datetime.now(UTC)
        if now.replace(second=0, microsecond=0) != minute:
            minute, done = now.replace(second=0, microsecond=0), 0
            tag = minute.strftime("live%H%M")
        due = int(len(per_route) * min(1.0, (now - minute).total_seconds() / 58))
        for i, a in per_route[done:due]:
            value = (
                pool[i][(a + i) % len(pool[i])].replace(b"@ID@", f"{tag}-{i}-{a}".encode()).replace(b"@TS@", stamp(now))
            )
            producer.send(topic, key=route_name(i).encode(), value=value)
        sent.value += due - done
        done = due
        time.sleep(0.2)
    producer.flush()
    producer.close()


# -- the evaluator's passes, from the worker's log ---------------------------------------------------------------
class EvaluatorLog:
    def __init__(self, path: Path):
        self.path, self.offset = path, 0
        self.passes: list[tuple[float, int, datetime, int, float]] = []  # (seen at, routes, through, minutes, seconds)
        self.resumed: list[tuple[float, datetime, int, float]] = []  # (seen at, minute, routes, seconds restoring)

    def read(self) -> None:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].decode(errors="replace").splitlines():
            if found := EVALUATED.search(line):
                self.passes.append(
                    (time.time(), int(found[1]), datetime.fromisoformat(found[2]), int(found[3]), float(found[4]))
                )
            elif found := RESUMED.search(line):
                self.resumed.append((time.time(), datetime.fromisoformat(found[1]), int(found[2]), float(found[4])))

    def lag(self) -> float | None:
        """Wall clock minus the end of the newest minute evaluated, in seconds."""
        self.read()
        if not self.passes:
            return None
        return (datetime.now(UTC) - (self.passes[-1][2] + timedelta(minutes=1))).total_seconds()


# -- one size ----------------------------------------------------------------------------------------------------
def run_size(routes: int, args) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"cw-bench-routes-{routes}-"))
    prefix = f"routes{random.randrange(1 << 30)}"
    topic = f"{prefix}.verdicts"
    silent = list(range(min(args.silent, routes)))
    out: dict = {"routes": routes}
    console.rule(f"{routes:,} routes; work dir {workdir}")
    with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
        create_topics(broker.bootstrap, [topic, f"{prefix}.verdicts.dlq", f"{prefix}.alerts"], args.partitions)
        worker = WorkerProcess(broker.bootstrap, f"chdb:{workdir / 'ch'}", prefix, workdir / "worker.log", WORKER_ENV)
        log = EvaluatorLog(worker.log_path)
        worker.start(600)
        sampling = threading.Event()
        record_rss(worker, workdir / "rss.tsv", sampling)
        try:
            backfill(worker, broker.bootstrap, topic, routes, silent, log, args, out)
            stop, sent = mp.Event(), mp.Value("q", 0)
            producer = mp.Process(
                target=live_traffic, args=(broker.bootstrap, topic, routes, args.seed, silent, stop, sent)
            )
            producer.start()
            try:
                live(worker, log, args, out)
                reads(worker, args, out)
                restart(worker, log, silent, args, out)
            finally:
                stop.set()
                producer.join(60)
        finally:
            sampling.set()
            worker.stop()
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return out


def stored_events(worker: WorkerProcess) -> int:
    status, _, body = timed_get(worker, "/metrics", 60)
    if status != 200:
        return -1
    m = metrics_of(body.decode())
    # the fleet's total: per-route series are only for the top metrics.max_route_series routes
    return int(m.get("claimwatch_fleet_events_total", 0) - m.get("claimwatch_duplicate_events_total", 0))


def backfill(
    worker: WorkerProcess,
    bootstrap: str,
    topic: str,
    routes: int,
    silent: list[int],
    log: EvaluatorLog,
    args,
    out: dict,
) -> None:
    producer = raw_producer(bootstrap)
    pool = templates(routes, args.seed)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    started, produced = time.monotonic(), 0
    for k in range(args.history_minutes, 0, -1):
        minute = now - timedelta(minutes=k)
        quiet = set(silent) if k <= 20 else set()
        produced += send_minute(producer, topic, pool, minute, minute.strftime("b%H%M"), quiet)
    producer.flush()
    producer.close()
    console.print(
        f"backfill: {produced:,} answers over {args.history_minutes} minutes produced in "
        f"{time.monotonic() - started:.0f} s"
    )
    wait_for(lambda: stored_events(worker) >= produced, args.timeout, "the backfill to be stored", worker)
    out["backfill_stored_s"] = round(time.monotonic() - started)
    watermark = 60
    wait_for(
        lambda: (lag := log.lag()) is not None and lag <= watermark + 120,
        args.timeout,
        "the evaluator to catch up with the backfill",
        worker,
    )
    out["caught_up_s"] = round(time.monotonic() - started)
    out["rss_peak_after_backfill_mib"] = round(rss_mib(worker.proc.pid)[1])
    console.print(
        f"stored after {out['backfill_stored_s']} s, evaluator caught up after {out['caught_up_s']} s "
        f"({sum(p[3] for p in log.passes)} minutes evaluated in {len(log.passes)} passes)"
    )


def live(worker: WorkerProcess, log: EvaluatorLog, args, out: dict) -> None:
    log.read()
    first_pass = len(log.passes)
    started, lags, rss = time.monotonic(), [], []
    status, _, body = timed_get(worker, "/metrics", 60)
    before = metrics_of(body.decode()) if status == 200 else {}
    while time.monotonic() - started < args.minutes * 60:
        time.sleep(10)
        lag = log.lag()
        lags.append(lag)
        rss.append(rss_mib(worker.proc.pid)[0])
        console.print(
            f"  t={time.monotonic() - started:>4.0f} s  lag {lag if lag is None else round(lag)} s  "
            f"rss {rss[-1]:,.0f} MiB  passes {len(log.passes) - first_pass}"
        )
    elapsed = time.monotonic() - started
    status, _, body = timed_get(worker, "/metrics", 60)
    after = metrics_of(body.decode()) if status == 200 else {}
    passes = log.passes[first_pass:]
    seconds = after.get("claimwatch_evaluation_seconds_sum", 0) - before.get("claimwatch_evaluation_seconds_sum", 0)
    gauge = after.get("claimwatch_evaluator_lag_seconds")
    half = len(lags) // 2
    out.update(
        {
            "eval_s_per_min": round(seconds / elapsed * 60, 2),
            "longest_pass_s": round(max((p[4] for p in passes), default=0.0), 2),
            "passes": len(passes),
            "lag_s_first_half_max": round(max((x for x in lags[:half] if x is not None), default=-1)),
            "lag_s_second_half_max": round(max((x for x in lags[half:] if x is not None), default=-1)),
            "lag_gauge_s": None if gauge is None else round(gauge),
            "rss_live_max_mib": round(max(rss, default=0)),
            "rss_peak_after_live_mib": round(rss_mib(worker.proc.pid)[1]),
        }
    )
    out["keeps_up"] = (
        0 <= out["lag_s_second_half_max"] <= out["lag_s_first_half_max"] + 60
        and out["lag_s_second_half_max"] <= 60 + args.eval_interval + out["longest_pass_s"] + 60
    )


def reads(worker: WorkerProcess, args, out: dict) -> None:
    """The API's pages and reads under live traffic, each the best of three with a timeout."""
    for name, path, params in (
        ("overview", "/", {}),
        ("api_rates", "/api/rates", {"window": "30m"}),
        ("metrics", "/metrics", {}),
    ):
        tries = [timed_get(worker, path, args.read_timeout, **params) for _ in range(3)]
        ok = [t for t in tries if t[0] == 200]
        out[f"{name}_s"] = round(min(t[1] for t in ok), 3) if ok else f"failed ({tries[-1][0]})"
        out[f"{name}_bytes"] = len(ok[0][2]) if ok else 0
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "services.app.cli", "rates", "--api", worker.url, "-o", "json"],
                capture_output=True,
                timeout=args.read_timeout,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            if done.returncode == 0:
                timings.append((time.perf_counter() - started, len(done.stdout)))
        except subprocess.TimeoutExpired:
            pass
    out["cli_rates_s"] = round(min(t[0] for t in timings), 2) if timings else "failed"
    out["cli_rates_bytes"] = timings[0][1] if timings else 0
    storage = json_of(worker, "/api/storage") or {"tables": []}
    tables = {t["table"]: t for t in storage["tables"]}
    out["state_disk_bytes"] = sum(
        tables.get(t, {}).get("disk_bytes", 0) for t in ("alert_route_state", "route_expectations")
    )
    out["state_rows"] = tables.get("alert_route_state", {}).get("rows", 0)
    out["rss_peak_after_reads_mib"] = round(rss_mib(worker.proc.pid)[1])


def alerts_now(worker: WorkerProcess) -> dict[str, list[str]]:
    """Each alert's id -> its transitions' states."""
    listed = json_of(worker, "/api/alerts") or []
    return {
        a["alert_id"]: [
            t["state"] for t in (json_of(worker, f"/api/alerts/{a['alert_id']}") or {}).get("transitions", [])
        ]
        for a in listed
    }


def firing_gauge(worker: WorkerProcess) -> float | None:
    status, _, body = timed_get(worker, "/metrics", 60)
    return metrics_of(body.decode()).get("claimwatch_alerts{state=firing}") if status == 200 else None


def restart(worker: WorkerProcess, log: EvaluatorLog, silent: list[int], args, out: dict) -> None:
    before, firing_before = alerts_now(worker), firing_gauge(worker)
    log.read()
    through = log.passes[-1][2]
    worker.stop()
    store = ChdbStore(Path(worker.clickhouse.removeprefix("chdb:")))
    try:
        row = store.query("SELECT max(length(body)) AS biggest, uniqExact(route) AS routes FROM alert_route_state")[0]
        out["state_biggest_value_bytes"] = int(row["biggest"])
        out["state_routes"] = int(row["routes"]) - 1  # without the row of where the evaluator got to
    finally:
        store.close()
    started = time.time()  # the log's entries are stamped with time.time()
    worker.start(600)
    found = wait_for(lambda: (log.read(), log.resumed)[1], args.timeout, "the evaluator to resume", worker)
    resumed_at, resumed_minute, resumed_routes, restoring = found[-1]
    out["restart_resume_s"] = round(resumed_at - started, 1)  # the worker's start, its first evaluation, the restore
    out["restore_s"] = round(restoring, 1)
    seen = len(log.passes)
    wait_for(lambda: (log.read(), len(log.passes) >= seen + 2)[1], args.timeout, "two passes after the restart", worker)
    after, firing_after = alerts_now(worker), firing_gauge(worker)
    out["rss_peak_restarted_mib"] = round(rss_mib(worker.proc.pid)[1])
    out["rss_peak_mib"] = max(out["rss_peak_after_reads_mib"], out["rss_peak_restarted_mib"])  # either worker's
    silent_alerts = {k: v for k, v in after.items() if k in before}
    out["restart_resumed_every_route"] = resumed_routes == out["state_routes"] and resumed_minute >= through
    out["restart_same_alerts"] = (
        set(before) <= set(after)
        and all(v == before[k] for k, v in silent_alerts.items())
        and all(len(v) == len(set(v)) for v in after.values())
    )
    out["firing_before_after"] = (
        f"{firing_before:g} -> {firing_after:g}" if None not in (firing_before, firing_after) else "?"
    )
    out["silent_alerts_firing"] = sum(1 for v in after.values() if v[-1:] == ["firing"])
    console.print(
        f"restart: resumed {resumed_routes:,} routes at {resumed_minute:%H:%M} after {out['restart_resume_s']} s; "
        f"alerts before {len(before)}, after {len(after)}; firing gauge {out['firing_before_after']}"
    )


# -- report ------------------------------------------------------------------------------------------------------
RATIOS = (
    "eval_s_per_min",
    "longest_pass_s",
    "rss_peak_mib",
    "rss_peak_after_backfill_mib",
    "rss_peak_after_live_mib",
    "rss_peak_after_reads_mib",
    "rss_peak_restarted_mib",
    "state_disk_bytes",
    "overview_s",
    "overview_bytes",
    "api_rates_s",
    "metrics_s",
    "metrics_bytes",
    "cli_rates_s",
    "restart_resume_s",
    "restore_s",
)


def report(results: list[dict]) -> None:
    table = Table(title=f"bench/routes.py: {ANSWERS_PER_MINUTE} answers a minute per route")
    table.add_column("figure")
    for r in results:
        table.add_column(f"{r['routes']:,} routes", justify="right")
    if len(results) == 2:
        table.add_column("ratio", justify="right")
    for key in results[-1]:
        values = [r.get(key) for r in results]
        cells = [f"{v:,}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v) for v in values]
        if len(results) == 2:
            a, b = values
            ok = key in RATIOS and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) and a
            cells.append(f"{b / a:.1f}x" if ok else "")
        table.add_row(key, *cells)
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routes", type=int, default=10_000)
    parser.add_argument("--baseline-routes", type=int, default=1_000, help="measured first, for ratios (0: none)")
    parser.add_argument("--history-minutes", type=int, default=60, help="minutes of backfill before the live phase")
    parser.add_argument("--minutes", type=float, default=5, help="minutes of live traffic measured")
    parser.add_argument("--silent", type=int, default=10, help="routes that stop 20 minutes before the live phase")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--eval-interval", type=float, default=30, help="the worker's drift.eval_interval_seconds")
    parser.add_argument("--read-timeout", type=float, default=120)
    parser.add_argument("--timeout", type=float, default=3600, help="give up a phase after this many seconds")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the work directories (stores, logs, the worker's RSS every half second in rss.tsv)",
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args(argv)
    recording = Recording.start(__file__, argv) if args.record else None
    os.environ["CLAIMWATCH_DRIFT__EVAL_INTERVAL_SECONDS"] = str(args.eval_interval)
    sizes = [n for n in (args.baseline_routes, args.routes) if n]
    results = [run_size(n, args) for n in sizes]
    report(results)
    if args.out:
        args.out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    if recording:
        recording.finish(figures(results), note=outcome(results[-1]))
    return 0


UNDER_2_GB = Target(at_most=2048, text="≤ 2 GB")
RECORDED = (  # (key, figure, unit, scale, target): issue 49's targets
    ("eval_s_per_min", "evaluation per wall-clock minute", "s", 1, Target(at_most=20, text="≤ 20 s")),
    ("longest_pass_s", "longest live pass", "s", 1, None),
    ("rss_live_max_mib", "live RSS, max", "MiB", 1, UNDER_2_GB),
    ("rss_peak_after_reads_mib", "peak RSS, first worker", "MiB", 1, UNDER_2_GB),
    ("rss_peak_restarted_mib", "peak RSS, restarted worker", "MiB", 1, UNDER_2_GB),
    ("state_disk_bytes", "evaluator state on disk", "MB", 1e-6, Target(at_most=100, text="≤ 100 MB")),
    ("overview_s", "overview GET /", "s", 1, Target(at_most=1, text="≤ 1 s")),
    ("overview_bytes", "overview size", "KB", 1e-3, Target(at_most=1000, text="≤ 1 MB")),
    ("metrics_bytes", "GET /metrics size", "KB", 1e-3, Target(at_most=5000, text="< 5 MB")),
    ("restart_resume_s", "restart to every route resumed", "s", 1, None),
)


def figures(results: list[dict]) -> list[Figure]:
    """The largest size's figures, each against the smaller size's where one ran; a read that failed is left out."""
    *smaller, largest = results
    found = []
    for key, name, unit, scale, target in RECORDED:
        value, base = largest.get(key), smaller[0].get(key) if smaller else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        value = round(value * scale, 3)
        base = round(base * scale, 3) if isinstance(base, (int, float)) and base else None
        ratio = round(value / base, 1) if base and key in RATIOS else None  # as report() prints them
        found.append(Figure(name, value, unit, target, base, ratio))
    return found


def outcome(result: dict) -> str:
    """What the figures cannot say: the routes, and whether the evaluator kept up and the restart resumed all."""
    checks = ("keeps_up", "restart_resumed_every_route", "restart_same_alerts")
    return f"{result['routes']:,} routes; " + ", ".join(f"{name} {result.get(name)}" for name in checks)


if __name__ == "__main__":
    raise SystemExit(main())
