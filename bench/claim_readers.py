"""How fast the claim readers answer: the issue page's members, an alert window's members, a re-cluster's
failing claims and an alert window's unassigned claims, on simulated events written by the real writer
(every migration, so claims reference their answer and the readers join ``events`` for its text).

    python bench/claim_readers.py                  # 100,000 events; median of 7 runs per query
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import simulated_events  # noqa: E402

from bench.results import RECORD_HELP, Figure, Recording  # noqa: E402
from services.contract.decode import Decoder  # noqa: E402
from services.contract.model import FAILED_VERDICTS  # noqa: E402
from services.store.backends import ChdbStore  # noqa: E402
from services.store.issues import IssueRepository  # noqa: E402
from services.store.migrate import migrate  # noqa: E402
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper  # noqa: E402
from services.store.writer import EventWriter  # noqa: E402

ISSUES = 20  # failing claims are spread over this many issues by a hash of their answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None
    figures = []
    lines, _ = simulated_events(args.events, args.seed)
    decoder = Decoder()
    events = [event for raw in lines for _, event in decoder.decode_message(raw)]
    workdir = Path(tempfile.mkdtemp(prefix="cw-bench-readers-"))
    store = ChdbStore(workdir / "clickhouse")
    try:
        migrate(store)
        RetentionKeeper(store).apply(KEEP_EVERYTHING)
        writer = EventWriter(store)
        for start in range(0, len(events), 5000):
            writer.write(events[start : start + 5000])
        store.command(
            "INSERT INTO issue_members SELECT concat(event_id, ':', toString(claim_idx)), "
            f"concat('iss-', toString(cityHash64(event_id) % {ISSUES})), 0.5, 'batch', 'default', 0, 0, "
            "observed_at, now64(6) FROM claims WHERE verdict IN {failed:Array(String)}",
            {"failed": sorted(FAILED_VERDICTS)},
        )
        for table in ("events", "claims", "issue_members"):
            store.command(f"OPTIMIZE TABLE {table} FINAL")
        repo = IssueRepository(store, dict, dict)
        first, last = min(e.observed_at for e in events), max(e.observed_at for e in events)
        route = events[0].route
        queries = {
            "an issue's top 500 members (issue page)": lambda: repo.members("iss-3", 500),
            "its members in an alert's window": lambda: repo.members_in_window("iss-3", route, first, last, 500),
            "the last hour's failing claims (re-cluster)": lambda: repo.failing_claims(last - timedelta(hours=1)),
            "a window's unassigned claims (assignment)": lambda: repo.window_claims(route, first, last, 500),
        }
        print(f"{args.events:,} events; median of {args.runs} runs")
        for name, query in queries.items():
            times, rows = [], 0
            for _ in range(args.runs):
                started = time.perf_counter()
                rows = len(query())
                times.append(time.perf_counter() - started)
            print(f"  {name:46s} {statistics.median(times) * 1000:7.1f} ms  ({rows:,} rows)")
            figures.append(Figure(name, round(statistics.median(times) * 1000, 1), "ms"))
    finally:
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if recording:
        recording.finish(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
