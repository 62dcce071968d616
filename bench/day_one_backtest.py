"""Day one through `claimwatch backtest` (issue 21): new routes, as an independent replay would send them.

Eight routes new at the file's first minute, 60 answers a minute (±50% daily volume), 1-8 claims per answer
(mean 4.5), a base rate of 8% swinging ±1 point over the day with a different peak per route, 26 hours,
nothing injected. Every transition the live evaluator writes is a false alarm.

Run: python bench/day_one_backtest.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.app.compose import run_backtest  # noqa: E402
from services.app.settings import Settings  # noqa: E402
from services.client.simulate import Scenario, generate, write_jsonl  # noqa: E402
from services.client.simulate.scenario import Route  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--routes", type=int, default=8)
    ap.add_argument("--hours", type=int, default=26)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = ap.parse_args(argv)
    recording = Recording.start(__file__, argv) if args.record else None
    families = Scenario.demo().routes[0].families
    routes = tuple(
        Route(
            f"new-{i}",
            per_minute=60.0,
            base_rate=0.08,
            families=families,
            versions={"model": "m1"},
            mean_claims=4.5,
            rate_swing=0.01,
            rate_peak_hour=24 * i / args.routes,
        )
        for i in range(args.routes)
    )
    scenario = Scenario(
        routes=routes,
        regressions=(),
        bad_fraction=0.0,
        duplicate_fraction=0.0,
        late_fraction=0.0,
        textless_fraction=1.0,
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        events, alerts = Path(tmp) / "events.jsonl", Path(tmp) / "alerts.jsonl"
        write_jsonl(generate(scenario, datetime(2026, 11, 2, 7, tzinfo=UTC), args.hours * 60, args.seed), events)
        summary = run_backtest(events, alerts, Settings())
        transitions = [orjson.loads(line) for line in alerts.read_bytes().splitlines()]
    print(
        f"{summary.events:,} events, {args.routes} new routes x {args.hours} h: {len(transitions)} alert transitions "
        f"({sum(t['state'] == 'firing' for t in transitions)} firing) in {time.perf_counter() - started:.0f}s"
    )
    for t in transitions:
        print(f"  {t['at']} {t['route']} {t['kind']} {t['state']}")
    if recording:  # new routes with nothing wrong: any transition is a false alarm
        recording.finish([Figure("alert transitions", len(transitions), "transitions", Target(at_most=0, text="0"))])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
