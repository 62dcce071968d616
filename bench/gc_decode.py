"""What CPython's default garbage-collector thresholds cost the decode path.

Decodes the same events (bench/ingest.py's shape) in worker-sized batches, first with
the interpreter's default GC settings (the baseline), then under services/core/gcpolicy.py's
bulk policy, in one process, and prints events/s for both and their ratio. Faust and the
worker's modules are imported first so the heap resembles a worker's.

    python bench/gc_decode.py --events 40000
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import faust  # noqa: E402,F401  (a worker's heap holds these)
from ingest import simulated_events  # noqa: E402

import streams.agents  # noqa: E402,F401
import streams.app  # noqa: E402,F401  (not streams.timers: bench/clustering.py shadows clustering/)
from bench.results import RECORD_HELP, Figure, Recording  # noqa: E402
from services.contract.decode import Decoder  # noqa: E402
from services.core.gcpolicy import bulk_allocation  # noqa: E402
from services.store.convert import event_to_row  # noqa: E402


def decode_rate(lines: list[bytes], batch: int) -> float:
    decoder, kept = Decoder(), []
    started = time.perf_counter()
    for i in range(0, len(lines), batch):
        events = [decoder.decode(line) for line in lines[i : i + batch]]
        kept = [event_to_row(e) for e in events]  # the batch stays alive until the next one, as in the worker
    elapsed = time.perf_counter() - started
    del kept
    return len(lines) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=2000, help="worker ingest batch size")
    parser.add_argument("--rounds", type=int, default=3, help="best of this many rounds each")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None
    lines, _ = simulated_events(args.events, seed=3)
    gc.collect()
    baseline = max(decode_rate(lines, args.batch) for _ in range(args.rounds))
    with bulk_allocation():
        tuned = max(decode_rate(lines, args.batch) for _ in range(args.rounds))
    print(f"decode + row, default GC {gc.get_threshold()}: {baseline:>9,.0f} events/s  (baseline)")
    print(f"decode + row, bulk GC policy          : {tuned:>9,.0f} events/s")
    print(f"ratio bulk/default: {tuned / baseline:.2f}")
    if recording:
        ratio = round(tuned / baseline, 2)
        recording.finish(
            [Figure("decode + row, bulk GC policy", round(tuned), "events/s", None, round(baseline), ratio)]
        )


if __name__ == "__main__":
    main()
