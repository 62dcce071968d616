"""`claimwatch demo`: the embedded stack with accelerated simulated traffic, end to end.

Starts `claimwatch up` (broker, worker, store, evaluator, clustering, API), sends five
hours of history as fast as the stack takes it (a new model regresses billing-faq,
a corpus update regresses parcel-status), then shows what an on-call engineer sees:
rates worst first, the alert with its suspect change, named issues, and the runbook
of the issue the alert names with the commands that promote its traces. Run again, it
first moves the earlier run's store and state aside (var/previous-demo/).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx
from rich.console import Console

from services.client.simulate.scenario import Scenario
from services.core.clock import utcnow
from services.core.files import ProcessRecord
from services.core.threads import die_with_parent

HISTORY_MINUTES = 300
REGRESSION_AT = 255
CORPUS_CHANGE_AT = 265
LIVE_MINUTES = 24 * 60  # after the history, traffic goes on in real time (the regressions stay in force)
CONTROL_FILE = Path("var") / "demo-control.json"  # `claimwatch demo-traffic` stops or breaks a route through it
# What a demo leaves in var/ besides its store: Faust's scratch files (streams/app.py), the traffic control, the logs.
STATE = ("faust", CONTROL_FILE.name, "demo-up.log", "demo-traffic.log")
PREVIOUS = "previous-demo"
EXPLANATION_SECONDS = 120  # how long the alert's explanation may take to name its issue (clustering its window)
DEMO_ENV = {
    "CLAIMWATCH_DRIFT__EVAL_INTERVAL_SECONDS": "2",
    "CLAIMWATCH_DRIFT__WATERMARK_SECONDS": "0",
    "CLAIMWATCH_CLUSTERING__INTERVAL_MINUTES": "0.5",
    "CLAIMWATCH_NOTIFY__RESEND_SECONDS": "10",
    # 300 simulated minutes hold fewer claims than the default warm-up (50,000 per route) on billing-faq
    # at a quiet hour of the day: with the default the demo's alert fired only when it ran at busy hours.
    "CLAIMWATCH_DRIFT__DETECTOR__MIN_BASELINE_CLAIMS": "10000",
    # One SLO, so `claimwatch slo list` has a budget to show: billing-faq fails about 6% of its claims before its
    # regression and 12% after, against a budget of 10%.
    "CLAIMWATCH_SLO": '[{"name": "billing-faithfulness", "routes": "billing-*", "objective": 0.9, "window": "28d", '
    '"description": "9 in 10 claims on the billing routes grounded in their evidence"}]',
}


class DemoError(RuntimeError):
    pass


def demo_record() -> ProcessRecord:
    """Where a running demo says where its traffic control is, for `claimwatch demo-traffic` run from any folder
    ($XDG_STATE_HOME, default ~/.local/state)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    return ProcessRecord(
        (Path(base) if base.strip() else Path.home() / ".local" / "state") / "claimwatch" / "demo.json"
    )


def running_demo() -> tuple[Path, list[str]]:
    """The running demo's traffic control file and routes; DemoError when no demo runs."""
    record = demo_record().read()
    if record is None:
        raise DemoError(
            "no demo is running: start one with `make demo` (or `claimwatch demo`) in the project's "
            "folder, then change its traffic from any folder"
        )
    return Path(record["control"]), list(record["routes"])


STOP_SECONDS = 30  # `claimwatch up` stops within 15 s of SIGINT; after this it is killed


def _cli(*args: str, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    # a killed demo takes its commands with it (Linux: PR_SET_PDEATHSIG)
    return subprocess.run(
        [sys.executable, "-m", "services.app.cli", *args], env=env, check=check, preexec_fn=die_with_parent()
    )


def _wait(what: str, predicate, timeout: float, console: Console, stack: subprocess.Popen, required: bool = True):
    """The first truthy value of ``predicate``, polled each second; on timeout a DemoError, or None if not
    ``required``."""
    deadline = time.monotonic() + timeout
    with console.status(f"waiting for {what} ..."):
        while time.monotonic() < deadline:
            if stack.poll() is not None:
                raise DemoError(
                    f"`claimwatch up` exited with {stack.returncode} while waiting for {what}; see var/demo-up.log"
                )
            value = predicate()
            if value:
                return value
            time.sleep(1)
    if not required:
        return None
    raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}; see var/demo-up.log")


def start_clean(var: Path, store: Path | None) -> str | None:
    """Move an earlier demo's store and state out of ``var`` into ``var/previous-demo/`` (dropping the one kept
    before), so this run shows its own traffic only. Returns the line that says so; None when there was nothing.

    Only what lies in ``var``: a store configured elsewhere is the user's and stays as it is.
    """
    candidates = [var / name for name in STATE]
    if store is not None and store.resolve().is_relative_to(var.resolve()):
        candidates.insert(0, store)
    if not any(map(_holds, candidates)):  # e.g. only Faust's empty scratch tree, as any worker run here leaves
        return None
    earlier = [p for p in candidates if p.exists()]
    previous = var / PREVIOUS
    shutil.rmtree(previous, ignore_errors=True)
    previous.mkdir(parents=True)
    for path in earlier:
        path.rename(previous / path.name)
    return (
        f"{var}/ holds an earlier demo's data: starting clean (moved it to {previous}/, replacing the one kept before)"
    )


def _holds(path: Path) -> bool:
    """A file, or a directory with a file at any depth."""
    return path.is_file() or (path.is_dir() and any(p.is_file() for p in path.rglob("*")))


def chdb_dir(clickhouse: str) -> Path | None:
    """The directory of an embedded (chdb:PATH) store; None for a ClickHouse server."""
    return Path(clickhouse.removeprefix("chdb:") or "./var/clickhouse") if clickhouse.startswith("chdb:") else None


def this_runs_firing(alerts: list[dict], since: datetime, before: set[str]) -> list[dict]:
    """The firing alerts this run's traffic raised, first fired first: none listed before it was sent, none firing
    since before its first change (``since``, event time)."""
    fresh = [
        a
        for a in alerts
        if a["state"] == "firing" and a["alert_id"] not in before and datetime.fromisoformat(a["starts_at"]) >= since
    ]
    return sorted(fresh, key=lambda a: datetime.fromisoformat(a["starts_at"]))


def issue_behind(alert: dict | None, settled: bool = True) -> str | None:
    """The issue the alert's explanation names first; with ``settled``, only once clustering has caught up with the
    alert's window (its explanation no longer says it is clustering)."""
    explanation = (alert or {}).get("explanation") or {}
    issues = explanation.get("issues") or []
    if not issues or (settled and explanation.get("status")):
        return None
    return issues[0]["issue_id"]


def _get(url: str, **params):
    try:
        response = httpx.get(url, params=params, timeout=30)
    except httpx.TransportError:
        return None
    return response.json() if response.status_code == 200 else None


def run_demo(
    settings, console: Console, keep_running: bool, token_hint: str | None = None, cli: str = "claimwatch"
) -> None:
    """``cli``: how the user runs claimwatch from here (services/core/command.py), in every command printed."""
    var = Path("var")
    api = settings.api.url.rstrip("/")
    env = {**os.environ, **DEMO_ENV, "CLAIMWATCH_CLICKHOUSE": settings.clickhouse}
    if _get(api + "/healthz") is not None:
        raise DemoError(f"something already answers at {api}; stop it (or another `claimwatch up`) first")
    cleaned = start_clean(var, chdb_dir(settings.clickhouse))
    if cleaned:
        console.print(cleaned, markup=False, highlight=False, soft_wrap=True)
    var.mkdir(exist_ok=True)
    # SIGTERM (e.g. a CI timeout) must stop the stack too, not orphan it.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log = open(var / "demo-up.log", "ab")
    # Its own session, so Ctrl-C reaches the demo only and the demo stops the stack; and SIGTERM when the
    # demo dies, even by SIGKILL, so no orphan keeps the port, the broker or the store's lock.
    stack = subprocess.Popen(
        [sys.executable, "-m", "services.app.cli", "up"],
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
        preexec_fn=die_with_parent(signal.SIGTERM),
    )
    live = None
    try:
        _wait("the embedded stack", lambda: _get(api + "/readyz"), 120, console, stack)
        console.rule("[bold]claimwatch demo")
        console.print(f"stack up: broker {settings.embedded_broker}, store {settings.clickhouse}, API {api}")
        before = {a["alert_id"] for a in _get(api + "/api/alerts") or []}
        started = time.monotonic()
        now = utcnow().replace(second=0, microsecond=0)
        first_change = now - timedelta(minutes=HISTORY_MINUTES - min(REGRESSION_AT, CORPUS_CHANGE_AT))
        seed = int(now.timestamp()) % 100000
        _cli(
            "simulate",
            "--minutes",
            str(HISTORY_MINUTES),
            "--speed",
            "0",
            "--regression-at",
            str(REGRESSION_AT),
            "--corpus-change-at",
            str(CORPUS_CHANGE_AT),
            "--seed",
            str(seed),
            "--start",
            (now - timedelta(minutes=HISTORY_MINUTES)).isoformat(),
            env=env,
        )
        console.print(
            f"traffic sent in {time.monotonic() - started:.0f}s "
            f"({HISTORY_MINUTES} simulated minutes; new model on billing-faq at minute {REGRESSION_AT}, "
            f"corpus update on parcel-status at minute {CORPUS_CHANGE_AT})"
        )
        live = start_live_traffic(now, seed + 1, env, var)
        demo_record().write(
            os.getpid(), control=str(CONTROL_FILE.resolve()), routes=sorted(r.name for r in Scenario.demo().routes)
        )
        alert = _wait(
            "an alert to fire",
            lambda: this_runs_firing(_get(api + "/api/alerts") or [], first_change, before),
            240,
            console,
            stack,
        )[0]
        console.print(
            f"first alert fired {time.monotonic() - started:.0f}s after traffic started: {alert['kind']} "
            f"on {alert['route']}",
            markup=False,
            highlight=False,
        )
        _wait("ingestion to catch up", lambda: caught_up(api), 240, console, stack)
        console.rule(f"Rates, worst route first ({cli} rates --window 30m)")
        _cli("rates", "--window", "30m", env=env)
        console.rule(f"Alerts ({cli} alerts list)")
        _cli("alerts", "list", env=env)
        console.rule(f"Error budgets ({cli} slo list)")
        _cli("slo", "list", env=env)
        show_issues(api, env, console, stack, alert["alert_id"], cli)
        console.rule("[bold green]done")
        console.print(f"Dashboard: {api}/   API docs: {api}/docs")
        console.print(
            "Traffic goes on in real time. To see the monitor notice broken input, stop a route's "
            "verifier or break its producer, then watch the alerts:",
            markup=False,
            highlight=False,
        )
        console.print(
            f"  {cli} demo-traffic stop billing-faq\n  {cli} demo-traffic break parcel-status\n"
            f"  {cli} demo-traffic resume billing-faq\n  {cli} alerts list",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )  # commands whole, each on a line of its own
        if token_hint:  # where `claimwatch up` keeps the API token, and how to use it
            console.print(token_hint, soft_wrap=True, markup=False, highlight=False)
        if keep_running:
            console.print("The stack keeps running; Ctrl-C stops it.")
            stack.wait()
    except KeyboardInterrupt:
        pass
    finally:
        demo_record().forget(os.getpid())
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
        [
            sys.executable,
            "-m",
            "services.app.cli",
            "simulate",
            "--minutes",
            str(LIVE_MINUTES),
            "--speed",
            "1",
            "--start",
            start.isoformat(),
            "--regression-at",
            "0",
            "--corpus-change-at",
            "0",
            "--seed",
            str(seed),
            "--control",
            str(CONTROL_FILE),
        ],
        env=env,
        stdout=log,
        stderr=log,
        preexec_fn=die_with_parent(),
    )


def caught_up(api: str) -> bool:
    try:
        text = httpx.get(api + "/metrics", timeout=10).text
    except httpx.TransportError:
        return False
    lags = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("claimwatch_consumer_lag{")]
    return bool(lags) and max(lags) == 0


def show_issues(api: str, env: dict, console: Console, stack: subprocess.Popen, alert_id: str, cli: str) -> None:
    """Named issues in priority order, and the runbook of the issue the alert's explanation names first: that one or
    none (never another issue in its place)."""
    _wait("named issues", lambda: _get(api + "/api/issues"), 300, console, stack)
    # The list after the alert's window is clustered, just before the runbook: listed before that wait, the issue
    # behind the alert showed 526 claims in the list and 1,075 in the runbook printed after the wait.
    top = _wait(
        f"the alert's explanation to name its issue (alert {alert_id})",
        lambda: issue_behind(_get(api + f"/api/alerts/{alert_id}")),
        EXPLANATION_SECONDS,
        console,
        stack,
        required=False,
    )
    if top is None:
        last = _get(api + f"/api/alerts/{alert_id}")
        top = issue_behind(last, settled=False)  # named, though clustering of its window goes on
    console.rule(f"Issues by priority ({cli} issues list --limit 10)")
    _cli("issues", "list", "--limit", "10", env=env)
    if top is None:
        status = ((last or {}).get("explanation") or {}).get(
            "status"
        ) or "no failing claims of its window are clustered"
        console.print(
            f"The alert's explanation named no issue within {EXPLANATION_SECONDS} s ({status}), so no runbook "
            "is shown; see it later with:",
            markup=False,
            highlight=False,
        )
        say_commands(console, f"{cli} alerts show {alert_id}")
        return
    console.rule("Runbook of the issue behind the alert")
    # the command on a line of its own, whole at any width (a rule's title is cut to fit)
    console.print(f"{cli} runbook {top} --alert {alert_id}", markup=False, highlight=False, soft_wrap=True)
    _cli("runbook", top, "--alert", alert_id, env=env)
    console.print(
        "From this terminal, take the issue, link its ticket and propose its representative traces:",
        markup=False,
        highlight=False,
    )
    say_commands(
        console,
        f"{cli} issues assign {top} YOUR_NAME",
        f"{cli} issues link {top} TICKET_URL",
        f"{cli} promote propose {top}",
    )


def say_commands(console: Console, *commands: str) -> None:
    """Commands to paste, each on a line of its own, never wrapped."""
    for command in commands:
        console.print(f"  {command}", markup=False, highlight=False, soft_wrap=True)
