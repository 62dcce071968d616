"""Backtest throughput: `claimwatch backtest` over a file of about a million simulated events.

Unless --events-file is given, the file is generated first by `claimwatch simulate` in a child
process: the demo's five routes (~300 answers/min), a new model on billing-faq from
--regression-at (+6 points), a corpus update on parcel-status from --corpus-change-at, 5% bad
input (including >1 MiB messages) and 1% duplicate deliveries. 3,400 minutes give ~1.03M lines
(~3.1 GB).

Then, in this process:
1. baseline: read every line and orjson.loads it (the floor any JSONL replay pays);
2. run_backtest, exactly what `claimwatch backtest` runs, with a progress bar.
It prints elapsed time, events/s, the ratio to the baseline, peak RSS, the alert transitions,
and whether the injected regressions were caught (route, delay, first suspect).

    python bench/backtest.py                          # generates /tmp/claimwatch-bench-backtest/events.jsonl
    python bench/backtest.py --events-file EVENTS.jsonl
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.app.compose import run_backtest  # noqa: E402
from services.app.settings import load_settings  # noqa: E402

TARGET_SECONDS = 240  # "a million events in a few minutes", on this 2-core machine
START = "2026-11-20T00:00:00Z"
INJECTED = {"billing-faq": ("model", "gen-2026-11"), "parcel-status": ("corpus", "carrier-docs@2026-11-15")}


def generate(path: Path, minutes: int, seed: int, regression_at: int, corpus_change_at: int, console: Console) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "services.app.cli",
        "simulate",
        "--minutes",
        str(minutes),
        "--seed",
        str(seed),
        "--start",
        START,
        "--out",
        str(path),
        "--regression-at",
        str(regression_at),
        "--corpus-change-at",
        str(corpus_change_at),
    ]
    console.print(f"[dim]generating: {' '.join(command[1:])}[/dim]")
    subprocess.run(command, check=True, cwd=Path(__file__).resolve().parents[1])


def raw_parse(path: Path) -> tuple[int, float]:
    """Lines and seconds to read and JSON-parse every line (unparseable ones are counted, not kept)."""
    lines = 0
    started = time.perf_counter()
    with open(path, "rb", buffering=1 << 22) as f:
        for line in f:
            lines += 1
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError:
                pass
    return lines, time.perf_counter() - started


def injected_rises(alerts_path: Path, minutes: dict[str, int]) -> list[tuple[str, str, str]]:
    """For each injected change: the first alert firing on its route after it started, its delay and first suspect."""
    records = [orjson.loads(line) for line in alerts_path.read_bytes().splitlines() if line]
    start = datetime.fromisoformat(START.replace("Z", "+00:00"))
    found = []
    for route, (key, value) in INJECTED.items():
        onset = start + timedelta(minutes=minutes[route])
        firing = [
            r
            for r in records
            if r["route"] == route and r["state"] == "firing" and datetime.fromisoformat(r["at"]) >= onset
        ]
        if not firing:
            found.append((route, f"{key}={value} at {onset:%H:%M}", "[red]missed[/red]"))
            continue
        first = firing[0]
        delay = (datetime.fromisoformat(first["at"]) - onset) / timedelta(minutes=1)
        suspect = first["suspect_changes"][0] if first["suspect_changes"] else {}
        right = suspect.get("key") == key and suspect.get("value") == value
        found.append(
            (
                route,
                f"{key}={value} at {onset:%H:%M}",
                f"fired after {delay:.0f} min; first suspect {suspect.get('key')}={suspect.get('value')} "
                + ("[green](right)[/green]" if right else "[red](wrong)[/red]"),
            )
        )
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events-file", type=Path, help="replay this JSONL file instead of generating one")
    ap.add_argument("--out-dir", type=Path, default=Path("/tmp/claimwatch-bench-backtest"))
    ap.add_argument("--minutes", type=int, default=3400, help="simulated minutes to generate (~300 messages each)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--regression-at", type=int, default=2000, help="minute of the model regression on billing-faq")
    ap.add_argument("--corpus-change-at", type=int, default=2800, help="minute of the corpus change on parcel-status")
    ap.add_argument("--regenerate", action="store_true", help="generate even if the file exists")
    ap.add_argument("--config", help="TOML settings file, as `claimwatch backtest --config`")
    ap.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = ap.parse_args(argv)
    recording = Recording.start(__file__, argv) if args.record else None
    console = Console(width=150)
    events = args.events_file or args.out_dir / f"events-{args.minutes}m-seed{args.seed}.jsonl"
    if args.events_file is None and (args.regenerate or not events.exists()):
        generate(events, args.minutes, args.seed, args.regression_at, args.corpus_change_at, console)
    if not events.exists():
        ap.error(f"--events-file {events} does not exist")
    alerts_out = args.out_dir / "alerts.jsonl"
    alerts_out.parent.mkdir(parents=True, exist_ok=True)
    settings = load_settings(args.config, os.environ, {})  # as `claimwatch backtest` loads them

    lines, raw_seconds = raw_parse(events)
    console.print(
        f"baseline: read + orjson.loads of {lines:,} lines ({events.stat().st_size / 1e9:.2f} GB) "
        f"in {raw_seconds:.1f} s = {lines / raw_seconds:,.0f} lines/s"
    )
    with Progress(
        TextColumn("backtest"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("lines"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("lines", total=lines)
        started = time.perf_counter()
        summary = run_backtest(events, alerts_out, settings, progress=lambda n: progress.advance(task, n))
        elapsed = time.perf_counter() - started
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    table = Table(title=f"claimwatch backtest of {events.name}")
    for col in ("figure", "value"):
        table.add_column(col)
    table.add_row(
        "lines (valid / invalid / duplicate)",
        f"{lines:,} ({summary.events:,} / {summary.rejected:,} / {summary.duplicates:,})",
    )
    per_million = elapsed * 1e6 / lines
    table.add_row(
        "elapsed",
        f"{elapsed:.1f} s = {per_million:.0f} s per million lines (target <= {TARGET_SECONDS} s: "
        + ("[green]met[/green]" if per_million <= TARGET_SECONDS else "[red]not met[/red]")
        + ")",
    )
    table.add_row("throughput", f"{lines / elapsed:,.0f} lines/s, {summary.events / elapsed:,.0f} stored events/s")
    table.add_row("ratio to raw read + parse", f"{raw_seconds / elapsed:.2f}")
    table.add_row("minutes evaluated", f"{summary.minutes:,}")
    table.add_row("alert transitions", f"{summary.transitions} -> {alerts_out}")
    table.add_row("peak RSS (this process)", f"{peak_mib:,.0f} MiB")
    console.print(table)
    if args.events_file is None:
        for route, change, outcome in injected_rises(
            alerts_out, {"billing-faq": args.regression_at, "parcel-status": args.corpus_change_at}
        ):
            console.print(f"  {route}: {change}: {outcome}")
    if recording:
        recording.finish(
            [
                Figure("throughput", round(lines / elapsed), "lines/s", None, round(lines / raw_seconds)),
                Figure("per million lines", round(per_million), "s", Target(at_most=TARGET_SECONDS)),
                Figure("peak RSS", round(peak_mib * 2**20 / 1e9, 2), "GB"),
            ],
            note=f"{lines:,} lines",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
