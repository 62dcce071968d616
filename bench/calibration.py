"""Calibrated-rate benchmark: coverage and width of the 95% intervals, raw against calibrated.

The world is the one the coverage test uses (tests/support/calibration_world.py): three routes whose
verifiers err asymmetrically and differently (sensitivity / specificity for "failed" 0.70/0.97,
0.92/0.90, 0.80/0.99; true rates 20%, 10%, 30%), answers of 1 to 5 correlated claims, review labels
sampled stratified by the verifier's verdict, two reviewers each wrong ``--reviewer-error`` of the
time and an adjudicator (as often wrong) on their disputes.

Estimates, each through the product's code:
- raw: the verifier's rate with the answer-clustered interval `claimwatch rates` shows;
- calibrated, per route: Rogan–Gladen from the route's own labels (``review.min_labels`` met);
- calibrated, pooled: the same with every route's labels pooled (what a route with too few labels
  borrows from the routes of its verifier version).

A second table runs the same routes with one verifier that errs alike on all of them (Se 0.80, Sp 0.95):
there pooling is honest and narrower; in the first it is not.

Run: python bench/calibration.py --reps 500 --seed 16
"""
from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from services.review.calibration import Calibrator  # noqa: E402
from tests.support.calibration_world import NOW, ROUTES, RouteTruth, World, raw_interval  # noqa: E402

ESTIMATES = ("raw", "calibrated, pooled", "calibrated, per route")


def run(world: World, reps: int, seed: int, n_boot: int) -> dict[tuple[str, str], tuple[int, float, int]]:
    """(estimate, route) -> (intervals covering the true rate, summed width, intervals)."""
    rng = np.random.default_rng(seed)
    found = {(e, r.route): [0, 0.0, 0] for e in ESTIMATES for r in world.routes}
    per_route = Calibrator(1, timedelta(days=90), n_boot=n_boot)
    pooled = Calibrator(world.labels + 1, timedelta(days=90), n_boot=n_boot)  # own labels too few: pool
    for rep in range(reps):
        traffic, claims = world.draw(rng)
        per_route.seed = pooled.seed = rep
        intervals = {"raw": {t.route: raw_interval(t) for t in traffic}}
        for name, calibrator in (("calibrated, per route", per_route), ("calibrated, pooled", pooled)):
            intervals[name] = {r: c.interval for r, c in calibrator.calibrate_all(traffic, claims, NOW).items()}
        for truth in world.routes:
            for estimate in ESTIMATES:
                interval = intervals[estimate][truth.route]
                if interval is None:
                    continue
                lo, hi = interval
                cell = found[(estimate, truth.route)]
                cell[0] += lo <= truth.true_rate <= hi
                cell[1] += hi - lo
                cell[2] += 1
    return {k: tuple(v) for k, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--answers", type=int, default=2000, help="answers per route in the window")
    parser.add_argument("--labels", type=int, default=200, help="reviewed claims per route")
    parser.add_argument("--reviewer-error", type=float, default=0.05)
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap draws (the product's default)")
    args = parser.parse_args()
    alike = tuple(RouteTruth(r.route, r.true_rate, 0.80, 0.95) for r in ROUTES)
    console = Console(width=140)
    started = time.perf_counter()
    for title, routes in (("verifier errors differ by route", ROUTES), ("one verifier errs alike on every route", alike)):
        world = World(answers=args.answers, labels=args.labels, reviewer_error=args.reviewer_error, routes=routes)
        console.print(report(world, run(world, args.reps, args.seed, args.boot), title, args))
    console.print(f"width: the mean interval width. {time.perf_counter() - started:.1f} s (seed {args.seed}, "
                  f"{args.boot} bootstrap draws)")


def report(world: World, found: dict, title: str, args) -> Table:
    table = Table(title=f"{title}: 95% intervals over {args.reps} repetitions, {args.answers} answers and "
                        f"{args.labels} reviewed claims a route, reviewers wrong {args.reviewer_error:.0%}")
    table.add_column("route")
    for column in ("true rate", "Se / Sp", *(f"{e}\n{what}" for e in ESTIMATES for what in ("coverage", "width"))):
        table.add_column(column, justify="right")

    def cells(found_cells) -> list[str]:
        return [text for covered, width, n in found_cells for text in
                ((f"{100 * covered / n:.1f}%", f"{100 * width / n:.1f} pts") if n else ("—", "—"))]

    for truth in world.routes:
        table.add_row(truth.route, f"{truth.true_rate:.0%}", f"{truth.sensitivity:.2f} / {truth.specificity:.2f}",
                      *cells(found[(e, truth.route)] for e in ESTIMATES))
    totals = [tuple(sum(found[(e, r.route)][i] for r in world.routes) for i in range(3)) for e in ESTIMATES]
    table.add_row("all routes", "", "", *cells(totals), style="bold")
    return table


if __name__ == "__main__":
    main()
