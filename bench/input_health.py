"""Input-health benchmark (issue 21): does the monitor notice when it cannot see, and only then?

Drives the shipped ``InputHealthEngine`` (services/alerts/input_health.py) with many routes at once, minute by
minute. Traffic per route: 60 answers a minute on average (``--traffic``), Poisson, daily volume ±50% with a
random phase (so the night holds a third of the peak: more than halving); 1% of events dead-lettered as
ordinary noise; 5% of answers abstained.

Conditions:
- ``quiet``: nothing happens for ``--days`` days: every page is false (the nightly dip must not fire);
- ``incidents``: from hour 6 of a route's life (so some fall in its first, learning day), incidents of two
  hours 12 to 36 hours apart, each one of: the route stops sending (a verifier outage), every event of it is
  dead-lettered (a contract version nobody reads), or it abstains on half its answers while serving fewer.
  An incident is caught when its kind enters "firing" within 30 minutes; the delay counts minutes from its
  start. Pages of a kind outside its incidents (and 30 minutes after them) are false.

Run: python bench/input_health.py --seed 21 --days 60 --routes 200
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.alerts.detection.health_engine import (  # noqa: E402
    FIRING,
    TESTS,
    WIDTH,
    InputHealthConfig,
    InputHealthEngine,
)

DIURNAL_VOLUME, NOISE_REJECTED, ABSTAINED, BASE_RATE, CLAIMS_PER_ANSWER = 0.5, 0.01, 0.05, 0.08, 4.5
INCIDENT_MINUTES, CATCH_WITHIN, GAP_HOURS, FIRST_HOUR = 120, 30, (12, 36), 6
QUALITY_FILE = Path(__file__).resolve().parents[1] / "services" / "alerts" / "rule_quality.json"


def plan(rng, routes: int, minutes: int) -> np.ndarray:
    """Incidents as rows (route, start minute, kind index into TESTS)."""
    rows = []
    for r in range(routes):
        t = FIRST_HOUR * 60 + int(rng.uniform(0, GAP_HOURS[1] * 60))
        while t + INCIDENT_MINUTES + CATCH_WITHIN < minutes:
            rows.append((r, t, int(rng.integers(len(TESTS)))))
            t += INCIDENT_MINUTES + int(rng.uniform(*GAP_HOURS) * 60)
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def simulate_day(rng, day: int, routes: int, traffic: float, phase: np.ndarray, incidents: np.ndarray) -> np.ndarray:
    """One day of minutes: (1440, routes, WIDTH) in the engine's column order."""
    t = np.arange(day * 1440, (day + 1) * 1440)
    volume = traffic * (1 + DIURNAL_VOLUME * np.sin(2 * np.pi * t[:, None] / 1440 + phase[None, :]))
    kind = np.full((1440, routes), -1)
    for r, start, k in incidents:
        lo, hi = max(start, t[0]), min(start + INCIDENT_MINUTES, t[-1] + 1)
        if lo < hi:
            kind[lo - t[0] : hi - t[0], r] = k
    received = rng.poisson(np.where(kind == 0, 0.0, volume))
    rejected = np.where(kind == 1, received, rng.binomial(received, NOISE_REJECTED))
    answers = received - rejected
    abstained = rng.binomial(answers, np.where(kind == 2, 0.5, ABSTAINED))
    claims = rng.poisson(CLAIMS_PER_ANSWER * (answers - abstained))
    failed = rng.binomial(claims, BASE_RATE)
    return np.stack([received, rejected, answers, abstained, answers - abstained, claims, failed], axis=2).astype(float)


def run(config: InputHealthConfig, routes: int, days: int, traffic: float, seed: int, incidents: bool):
    rng = np.random.default_rng(seed)
    minutes = days * 1440
    planned = plan(rng, routes, minutes) if incidents else np.zeros((0, 3), dtype=np.int64)
    phase = rng.uniform(0, 2 * np.pi, routes)
    engine = InputHealthEngine(config, routes)
    states = np.zeros((minutes, len(TESTS), routes), dtype=np.int8)
    for day in range(days):
        x = simulate_day(rng, day, routes, traffic, phase, planned)
        assert x.shape[2] == WIDTH
        for i in range(1440):
            engine.step(x[i], day * 1440 + i)
            states[day * 1440 + i] = engine.state
    return planned, states


def score(planned: np.ndarray, states: np.ndarray) -> dict:
    firing = states == FIRING
    entered = firing & ~np.concatenate([np.zeros_like(firing[:1]), firing[:-1]])
    exposed = np.ones_like(entered)
    delays = {k: [] for k in range(len(TESTS))}
    learning = {k: [] for k in range(len(TESTS))}
    for r, start, k in planned:
        exposed[start : start + INCIDENT_MINUTES + CATCH_WITHIN, k, r] = False
        hits = np.flatnonzero(entered[start : start + CATCH_WITHIN, k, r])
        delay = hits[0] + 1 if hits.size else math.inf
        (learning if start < 1440 else delays)[k].append(delay)
    days = exposed.sum(axis=(0, 2)) / 1440
    false = (entered & exposed).sum(axis=(0, 2))
    return {
        "false": false,
        "route_days": days,
        "delays": {k: np.array(v, dtype=float) for k, v in delays.items()},
        "learning": {k: np.array(v, dtype=float) for k, v in learning.items()},
    }


def med(values: np.ndarray) -> float:
    if values.size == 0:
        return math.nan
    x = np.quantile(np.where(np.isinf(values), 1e9, values), 0.5, method="higher")
    return math.inf if x >= 1e9 else float(x)


def fmt(values: np.ndarray) -> str:
    if values.size == 0:
        return "-"
    missed = np.isinf(values).mean()
    p90 = np.quantile(np.where(np.isinf(values), 1e9, values), 0.9, method="higher")
    show = lambda x: f">{CATCH_WITHIN}" if x >= 1e9 or math.isinf(x) else f"{x:.0f}"  # noqa: E731
    return f"{show(med(values))} / {show(p90)} (n={values.size}" + (f", {missed:.1%} missed)" if missed else ")")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--routes", type=int, default=200)
    ap.add_argument("--traffic", type=float, default=60.0)
    ap.add_argument(
        "--write", action="store_true", help=f"record the figures in {QUALITY_FILE.name} for `alerts rules`"
    )
    ap.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = ap.parse_args(argv)
    recording = Recording.start(__file__, argv) if args.record else None
    console = Console(width=150)
    config = InputHealthConfig()
    started = time.perf_counter()
    quiet = score(*run(config, args.routes, args.days, args.traffic, args.seed, incidents=False))
    console.print(f"[dim]quiet: {args.days} days x {args.routes} routes in {time.perf_counter() - started:.0f}s[/dim]")
    busy = score(*run(config, args.routes, args.days, args.traffic, args.seed + 1, incidents=True))
    table = Table(
        title=f"Input health at {args.traffic:g} answers/min (±50% daily volume), {args.routes} routes x "
        f"{args.days} days; delays median / p90 minutes from the incident's start"
    )
    for col in (
        "kind",
        "false alarms (quiet) / route / 60 d",
        "false alarms (with incidents)",
        "delay, day 2 on",
        "delay, first day (learning)",
    ):
        table.add_column(col, justify="left" if col == "kind" else "right")
    per60 = lambda n, d: n / max(d, 1e-9) * 60  # noqa: E731
    for k, kind in enumerate(TESTS):
        table.add_row(
            kind,
            f"{quiet['false'][k]} ({per60(quiet['false'][k], quiet['route_days'][k]):.3f})",
            f"{busy['false'][k]} in {busy['route_days'][k]:,.0f} route-days",
            fmt(busy["delays"][k]),
            fmt(busy["learning"][k]),
        )
    console.print(table)
    rows = []
    for k, kind in enumerate(TESTS[:2]):
        m = med(busy["delays"][k])
        rows += [
            (f"{kind}: pages within 10 min (median)", f"{m:.0f}", m <= 10),
            (
                f"{kind}: no page on the nightly dip over {args.days} d x {args.routes} routes",
                str(quiet["false"][k]),
                quiet["false"][k] == 0,
            ),
        ]
    targets = Table(title="Targets (issue 21)")
    for col in ("target", "measured", "met"):
        targets.add_column(col)
    for name, value, ok in rows:
        targets.add_row(name, value, "[green]yes[/green]" if ok else "[red]no[/red]")
    console.print(targets)
    if args.write:
        quality = json.loads(QUALITY_FILE.read_text()) if QUALITY_FILE.exists() else {}
        command = f"python bench/input_health.py --seed {args.seed} --days {args.days} --routes {args.routes} --write"
        for k, kind in enumerate(TESTS):
            quality[kind] = {
                "false_alarms_per_route_per_60_days": round(per60(quiet["false"][k], quiet["route_days"][k]), 4),
                "median_delay_minutes": {
                    "after day one": med(busy["delays"][k]),
                    "first day": med(busy["learning"][k]),
                },
                "measured_by": command,
                "measured_on": date.today().isoformat(),
                "note": f"{args.routes} routes x {args.days} days at {args.traffic:g} answers/min, ±50% daily volume",
            }
        QUALITY_FILE.write_text(json.dumps(quality, indent=2, sort_keys=True) + "\n")
        console.print(f"wrote {QUALITY_FILE}")
    console.print(f"[dim]seed {args.seed}, total {time.perf_counter() - started:.0f}s[/dim]")
    if recording:  # issue 21's targets are for the first two kinds: silent and rejected routes
        figures = []
        for k, kind in enumerate(TESTS):
            targeted = k < 2
            never, within = Target(at_most=0, text="0"), Target(at_most=10)
            figures += [
                Figure(f"{kind}: false alarms, quiet", quiet["false"][k], "pages", never if targeted else None),
                Figure(f"{kind}: median delay", med(busy["delays"][k]), "min", within if targeted else None),
            ]
        recording.finish(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
