"""`claimwatch demo`: the embedded stack with accelerated simulated traffic, end to end.

Starts `claimwatch up` (broker, worker, store, evaluator, clustering, API), sends five
hours of history as fast as the stack takes it (a new model regresses billing-faq,
a corpus update regresses parcel-status), then shows what an on-call engineer sees:
rates worst first, the alert with its suspect change, named issues, and the runbook
of the top issue with the commands that promote its traces.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx
from rich.console import Console

from services.core.clock import utcnow
from services.core.threads import die_with_parent

HISTORY_MINUTES = 300
REGRESSION_AT = 255
CORPUS_CHANGE_AT = 265
LIVE_MINUTES = 24 * 60  # after the history, traffic goes on in real time (the regressions stay in force)
CONTROL_FILE = Path("var") / "demo-control.json"  # `claimwatch demo-traffic` stops or breaks a route through it
CLI = os.path.relpath(Path(sys.executable).parent / "claimwatch")  # as the user can paste it from here
DEMO_ENV = {
    "CLAIMWATCH_DRIFT__EVAL_INTERVAL_SECONDS": "2",
    "CLAIMWATCH_DRIFT__WATERMARK_SECONDS": "0",
    "CLAIMWATCH_CLUSTERING__INTERVAL_MINUTES": "0.5",
    "CLAIMWATCH_NOTIFY__RESEND_SECONDS": "10",
    # 300 simulated minutes hold fewer claims than the default warm-up (50,000 per route) on billing-faq
    # at a quiet hour of the day: with the default the demo's alert fired only when it ran at busy hours.
    "CLAIMWATCH_DRIFT__DETECTOR__MIN_BASELINE_CLAIMS": "10000",
}


class DemoError(RuntimeError):
    pass


STOP_SECONDS = 30  # `claimwatch up` stops within 15 s of SIGINT; after this it is killed


def _cli(*args: str, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    # a killed demo takes its commands with it (Linux: PR_SET_PDEATHSIG)
    return subprocess.run([sys.executable, "-m", "services.app.cli", *args], env=env, check=check,
                          preexec_fn=die_with_parent())


def _wait(what: str, predicate, timeout: float, console: Console, stack: subprocess.Popen):
    deadline = time.monotonic() + timeout
    with console.status(f"waiting for {what} ..."):
        while time.monotonic() < deadline:
            if stack.poll() is not None:
                raise DemoError(f"`claimwatch up` exited with {stack.returncode} while waiting for {what}; see var/demo-up.log")
            value = predicate()
            if value:
                return value
            time.sleep(1)
    raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}; see var/demo-up.log")


def _get(url: str, **params):
    try:
        response = httpx.get(url, params=params, timeout=30)
    except httpx.TransportError:
        return None
    return response.json() if response.status_code == 200 else None


def run_demo(settings, console: Console, keep_running: bool, token_hint: str | None = None) -> None:
    var = Path("var")
    var.mkdir(exist_ok=True)
    api = settings.api.url.rstrip("/")
    env = {**os.environ, **DEMO_ENV, "CLAIMWATCH_CLICKHOUSE": settings.clickhouse}
    if _get(api + "/healthz") is not None:
        raise DemoError(f"something already answers at {api}; stop it (or another `claimwatch up`) first")
    # SIGTERM (e.g. a CI timeout) must stop the stack too, not orphan it.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log = open(var / "demo-up.log", "ab")
    # Its own session, so Ctrl-C reaches the demo only and the demo stops the stack; and SIGTERM when the
    # demo dies, even by SIGKILL, so no orphan keeps the port, the broker or the store's lock.
    stack = subprocess.Popen([sys.executable, "-m", "services.app.cli", "up"], env=env, stdout=log, stderr=log,
                             start_new_session=True, preexec_fn=die_with_parent(signal.SIGTERM))
    live = None
    CONTROL_FILE.unlink(missing_ok=True)  # every route sends at first
    try:
        _wait("the embedded stack", lambda: _get(api + "/readyz"), 120, console, stack)
        console.rule("[bold]claimwatch demo")
        console.print(f"stack up: broker {settings.embedded_broker}, store {settings.clickhouse}, API {api}")
        started = time.monotonic()
        now = utcnow().replace(second=0, microsecond=0)
        seed = int(now.timestamp()) % 100000
        _cli("simulate", "--minutes", str(HISTORY_MINUTES), "--speed", "0", "--regression-at", str(REGRESSION_AT),
             "--corpus-change-at", str(CORPUS_CHANGE_AT), "--seed", str(seed),
             "--start", (now - timedelta(minutes=HISTORY_MINUTES)).isoformat(), env=env)
        console.print(f"traffic sent in {time.monotonic() - started:.0f}s "
                      f"({HISTORY_MINUTES} simulated minutes; new model on billing-faq at minute {REGRESSION_AT}, "
                      f"corpus update on parcel-status at minute {CORPUS_CHANGE_AT})")
        live = start_live_traffic(now, seed + 1, env, var)
        _wait("an alert to fire", lambda: [a for a in _get(api + "/api/alerts") or [] if a["state"] == "firing"],
              240, console, stack)
        console.print(f"first alert fired {time.monotonic() - started:.0f}s after traffic started")
        _wait("ingestion to catch up", lambda: caught_up(api), 240, console, stack)
        console.rule("Rates, worst route first (claimwatch rates --window 30m)")
        _cli("rates", "--window", "30m", env=env)
        console.rule("Alerts (claimwatch alerts list)")
        _cli("alerts", "list", env=env)
        show_issues(api, env, console, stack)
        console.rule("[bold green]done")
        console.print(f"Dashboard: {api}/   API docs: {api}/docs")
        console.print("Traffic goes on in real time. To see the monitor notice broken input, stop a route's "
                      "verifier or break its producer, then watch `claimwatch alerts list`:")
        console.print(f"  {CLI} demo-traffic stop billing-faq\n  {CLI} demo-traffic break parcel-status\n"
                      f"  {CLI} demo-traffic resume billing-faq", markup=False, highlight=False, soft_wrap=True)
        if token_hint:  # where `claimwatch up` keeps the API token, and how to use it
            console.print(token_hint, soft_wrap=True, markup=False, highlight=False)
        if keep_running:
            console.print("The stack keeps running; Ctrl-C stops it.")
            stack.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None and live.poll() is None:
            live.terminate()
        if stack.poll() is None:
            stack.send_signal(signal.SIGINT)
            try:
                stack.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(stack.pid, signal.SIGKILL)


def start_live_traffic(start, seed: int, env: dict, var: Path) -> subprocess.Popen:
    """Real-time traffic from the end of the history on, read through CONTROL_FILE each minute."""
    log = open(var / "demo-traffic.log", "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "services.app.cli", "simulate", "--minutes", str(LIVE_MINUTES), "--speed", "1",
         "--start", start.isoformat(), "--regression-at", "0", "--corpus-change-at", "0", "--seed", str(seed),
         "--control", str(CONTROL_FILE)], env=env, stdout=log, stderr=log, preexec_fn=die_with_parent())


def caught_up(api: str) -> bool:
    try:
        text = httpx.get(api + "/metrics", timeout=10).text
    except httpx.TransportError:
        return False
    lags = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("claimwatch_consumer_lag{")]
    return bool(lags) and max(lags) == 0


def _top_contributor(api: str) -> str | None:
    """The issue that accounts for most of the first firing alert's excess failing claims."""
    firing = [a for a in _get(api + "/api/alerts") or [] if a["state"] == "firing"]
    if not firing:
        return None
    detail = _get(api + f"/api/alerts/{firing[0]['alert_id']}") or {}
    contributors = (detail.get("explanation") or {}).get("issues") or []
    return contributors[0]["issue_id"] if contributors else None


def show_issues(api: str, env: dict, console: Console, stack: subprocess.Popen) -> None:
    """Named issues in priority order, and the runbook of the issue behind the firing alert."""
    issues = _wait("named issues", lambda: _get(api + "/api/issues"), 300, console, stack)
    console.rule("Issues by priority (claimwatch issues list --limit 10)")
    _cli("issues", "list", "--limit", "10", env=env)
    top = _top_contributor(api) or issues[0]["issue_id"]
    console.rule(f"Runbook of the issue behind the alert (claimwatch runbook {top})")
    _cli("runbook", top, env=env)
