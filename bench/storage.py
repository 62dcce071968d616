"""Storage cost: bytes per claim on disk after N simulated events, against the raw JSON of the same events.

The demo's five routes (services/client/simulate; no bad input or duplicates; event times from a recent
midnight, so a seed gives the same traffic and no TTL applies) go through the live decoder and the real
EventWriter into an embedded store in a temporary directory, in batches as the worker writes them; the
materialized views fill `claims` and `rate_minute`. Every table is then merged (OPTIMIZE ... FINAL, as
background merges would eventually), and the storage report (`claimwatch storage`) is printed per table:
compressed bytes and bytes on disk, each per claim, and the raw JSON bytes of the same events divided by them
(the ratio).

    python bench/storage.py                   # 1,000,000 events
    python bench/storage.py --events 20000    # a smoke check
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.client.simulate.generate import generate  # noqa: E402
from services.client.simulate.scenario import Scenario  # noqa: E402
from services.contract.decode import Decoder  # noqa: E402
from services.contract.model import VerdictEvent  # noqa: E402
from services.core.clock import utcnow  # noqa: E402
from services.store.backends import ChdbStore  # noqa: E402
from services.store.migrate import migrate  # noqa: E402
from services.store.storage import StorageRepository  # noqa: E402
from services.store.writer import EventWriter  # noqa: E402

MIN_EVENTS_PER_MINUTE = 150  # the demo's volume at the bottom of its daily swing; bounds the minutes to simulate


def fill(store: ChdbStore, events: int, seed: int, batch: int, console: Console) -> tuple[int, int, int]:
    """Write ``events`` simulated events; returns (events, claims, raw JSON bytes) of what was written."""
    scenario = Scenario.demo(bad_fraction=0.0, duplicate_fraction=0.0)
    minutes = math.ceil(events / MIN_EVENTS_PER_MINUTE) + 10
    # From a midnight, so a seed gives the same traffic (volume follows the time of day); within the raw TTL.
    start = (utcnow() - timedelta(minutes=minutes)).replace(hour=0, minute=0, second=0, microsecond=0)
    decoder, writer = Decoder(), EventWriter(store)
    written = claims = raw_bytes = 0
    pending: list[VerdictEvent] = []
    with Progress(
        TextColumn("writing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("events"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("events", total=events)
        for sim in generate(scenario, start, minutes, seed):
            event = decoder.decode(sim.raw)
            if not isinstance(event, VerdictEvent):
                continue
            pending.append(event)
            raw_bytes += len(sim.raw)
            claims += len(event.claims)
            if len(pending) == batch or written + len(pending) == events:
                written += writer.write(pending).inserted
                progress.advance(task, len(pending))
                pending = []
            if written == events:
                break
    if written < events:
        raise SystemExit(f"the simulation gave only {written:,} events; raise MIN_EVENTS_PER_MINUTE's margin")
    return written, claims, raw_bytes


def per_claim(n: int, claims: int) -> str:
    return f"{n / claims:,.1f}"


def ratio(raw: int, stored: int) -> str:
    return f"{raw / stored:.2f}" if stored else "—"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="simulated events to write")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--batch", type=int, default=5000, help="events per write (the worker's batch)")
    ap.add_argument(
        "--keep", type=Path, default=None, help="keep the store in this directory (default: a temp dir, removed)"
    )
    ap.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = ap.parse_args(argv)
    if args.events < 1:
        ap.error("--events must be at least 1")
    recording = Recording.start(__file__, argv) if args.record else None
    console = Console(width=130)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="claimwatch-bench-storage-"))
    store = ChdbStore(workdir / "clickhouse")
    try:
        migrate(store)
        started = time.perf_counter()
        events, claims, raw_bytes = fill(store, args.events, args.seed, args.batch, console)
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        storage = StorageRepository(store)
        storage.compact()
        merge_s = time.perf_counter() - started
        report = storage.report()
    finally:
        store.close()
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if report["claims"] != claims:
        console.print(f"[red]claims stored {report['claims']:,} != claims written {claims:,}[/red]")
        return 1

    table = Table(title=f"Storage after {events:,} simulated events ({claims:,} claims), merged")
    for col, justify in (
        ("table", "left"),
        ("rows", "right"),
        ("compressed", "right"),
        ("B/claim", "right"),
        ("on disk", "right"),
        ("disk B/claim", "right"),
        ("raw JSON ÷ disk", "right"),
        ("TTL", "left"),
    ):
        table.add_column(col, justify=justify)
    for t in report["tables"]:
        if not t["rows"] or t["table"] == "schema_migrations":  # bookkeeping: no share of the events' bytes
            continue
        table.add_row(
            t["table"],
            f"{t['rows']:,}",
            f"{t['compressed_bytes']:,}",
            per_claim(t["compressed_bytes"], claims),
            f"{t['disk_bytes']:,}",
            per_claim(t["disk_bytes"], claims),
            ratio(raw_bytes, t["disk_bytes"]),
            f"{t['ttl_days']} d" if t["ttl_days"] else "forever",
        )
    total = report["total"]
    table.add_row(
        "[bold]total[/bold]",
        f"{total['rows']:,}",
        f"{total['compressed_bytes']:,}",
        per_claim(total["compressed_bytes"], claims),
        f"{total['disk_bytes']:,}",
        per_claim(total["disk_bytes"], claims),
        ratio(raw_bytes, total["disk_bytes"]),
        "",
    )
    table.add_row(
        "[dim]baseline: raw JSON[/dim]",
        f"{events:,}",
        f"{raw_bytes:,}",
        per_claim(raw_bytes, claims),
        f"{raw_bytes:,}",
        per_claim(raw_bytes, claims),
        "1.00",
        "",
    )
    console.print(table)
    console.print(
        f"raw JSON {raw_bytes / events:,.0f} B per event, {raw_bytes / claims:,.1f} B per claim; stored "
        f"{total['disk_bytes'] / claims:,.1f} B per claim on disk ({total['compressed_bytes'] / claims:,.1f} "
        f"compressed), ratio raw JSON ÷ disk {ratio(raw_bytes, total['disk_bytes'])}"
    )
    console.print(
        f"[dim]written in {write_s:.1f} s ({events / write_s:,.0f} events/s, batches of {args.batch:,}); "
        f"merged in {merge_s:.1f} s; seed {args.seed}[/dim]"
    )
    if recording:
        recording.finish(figures(report, claims, raw_bytes, events, ap.get_default("events")))
    return 0


RECORDED_TABLES = ("events", "claims", "rate_minute", "event_keys")
PER_CLAIM_TARGET = Target(at_most=96, text="≤ 96 B (issue 25)")


def figures(report: dict, claims: int, raw_bytes: int, events: int, default_events: int) -> list[Figure]:
    """Bytes on disk per claim, in all (against the claims' raw JSON) and, at the default size, for the ingest
    tables; named by the store's size when it is not the default's, as merges and codecs change with it."""
    at = "" if events == default_events else f", {events:,} answers"
    tables = {t["table"]: t["disk_bytes"] for t in report["tables"]}
    total = report["total"]["disk_bytes"]
    return [
        Figure(f"on disk per claim{at}", round(total / claims, 1), "B", PER_CLAIM_TARGET, round(raw_bytes / claims)),
        *(
            Figure(f"{name} per claim{at}", round(tables[name] / claims, 1), "B")
            for name in RECORDED_TABLES
            if name in tables and not at
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
