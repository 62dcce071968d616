"""Sampled verification: coverage of the whole traffic's rate by the weighted and the unweighted 95% interval.

The world (bench/sampling_world.py): short answers (1-2 claims, 5% failing) all verified, long ones
(4-8 claims, 25% failing) verified 1 in 10, claims of one answer correlated. Each repetition draws a fresh
population of answers and a sample of it; the estimand is the population's own claim-level rate. Both
intervals are the product's (services/rates/intervals.py ratio_interval) over the sums the store keeps:
weighted (each answer 1 / its sampling.rate) and as if every answer had been verified.

Target (issue 24): the weighted interval covers 93-97% of 500 repetitions; the unweighted one under 50%.

Run: python bench/sampling.py --reps 500 --seed 24
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from bench.sampling_world import LONG, SHORT, draw  # noqa: E402
from services.rates.intervals import ratio_interval  # noqa: E402

TARGETS = {"weighted": Target(93, 97, "93-97%"), "unweighted": Target(at_most=50, text="< 50%")}  # issue 24


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--answers", type=int, default=6000, help="answers in each population")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None
    rng = np.random.default_rng(args.seed)
    found = {"weighted": [0, 0.0, 0.0], "unweighted": [0, 0.0, 0.0]}  # hits, summed width, summed estimate error
    for _ in range(args.reps):
        truth, weighted, unweighted = draw(rng, args.answers)
        for name, counts in (("weighted", weighted), ("unweighted", unweighted)):
            interval = ratio_interval(counts)
            cell = found[name]
            cell[0] += truth in interval
            cell[1] += interval.width
            cell[2] += counts.rate - truth
    print(
        f"{args.reps} populations of {args.answers:,} answers: short {SHORT.share:.0%} ({SHORT.failure:.0%} failing, "
        f"verified at {SHORT.rate:g}), long {LONG.share:.0%} ({LONG.failure:.0%} failing, verified at {LONG.rate:g})"
    )
    ok, figures = True, []
    for name, (hits, width, bias) in found.items():
        coverage = hits / args.reps
        target, met = TARGETS[name], TARGETS[name].met(100 * coverage)
        ok &= met
        print(
            f"{name:10s} coverage {coverage:6.1%} (target {target}: {'ok' if met else 'MISSED'}), mean width "
            f"{100 * width / args.reps:.2f} pts, mean error {100 * bias / args.reps:+.2f} pts"
        )
        figures.append(Figure(f"{name} coverage", round(100 * coverage, 1), "%", target))
        if name == "weighted":
            figures.append(Figure("weighted mean width", round(100 * width / args.reps, 2), "pts"))
    if recording:
        recording.finish(figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
