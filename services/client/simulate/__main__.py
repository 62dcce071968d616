"""Print the generation rate: ``python -m services.client.simulate [--minutes N] [--scale X] [--seed S]``."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

from services.client.simulate import Scenario, expected_counts, generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=int, default=120)
    parser.add_argument("--scale", type=float, default=1.0, help="volume multiplier over Scenario.demo()")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    scenario = Scenario.demo().scaled(args.scale)
    start = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
    setup = time.process_time()
    list(generate(scenario, start, 1, seed=args.seed))  # builds the wording pools (cached per seed)
    print(f"setup (wording pools) {time.process_time() - setup:.2f} s CPU")
    began, cpu_began = time.perf_counter(), time.process_time()
    messages = nbytes = claims = 0
    for sim in generate(scenario, start, args.minutes, seed=args.seed):
        messages += 1
        nbytes += len(sim.raw)
        if sim.event is not None:
            claims += len(sim.event["claims"])
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    print(
        f"{messages:,} messages ({claims:,} claims, {nbytes / 2**20:,.1f} MiB) in {elapsed:.2f} s wall, "
        f"{cpu:.2f} s CPU: "
        f"{messages / elapsed:,.0f} messages/s wall, {messages / cpu:,.0f} messages/s per CPU-second, "
        f"{claims / cpu:,.0f} claims/s per CPU-second"
    )
    counts = expected_counts(generate(scenario, start, min(args.minutes, 60), seed=args.seed))
    for row in counts.as_rates():
        print(f"  {row['route']:<16} events {row['events']:>7,}  rate {row['rate']:.3f}")
    print(f"  bad {counts.bad_total:,} {dict(sorted(counts.bad.items()))}  duplicates {counts.duplicates}")


if __name__ == "__main__":
    main()
