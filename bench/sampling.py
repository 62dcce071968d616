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
from bench.sampling_world import LONG, SHORT, draw  # noqa: E402
from services.rates.intervals import ratio_interval  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--answers", type=int, default=6000, help="answers in each population")
    args = parser.parse_args()
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
    ok = True
    for name, (hits, width, bias) in found.items():
        coverage = hits / args.reps
        target = "93-97%" if name == "weighted" else "< 50%"
        met = 0.93 <= coverage <= 0.97 if name == "weighted" else coverage < 0.5
        ok &= met
        print(
            f"{name:10s} coverage {coverage:6.1%} (target {target}: {'ok' if met else 'MISSED'}), mean width "
            f"{100 * width / args.reps:.2f} pts, mean error {100 * bias / args.reps:+.2f} pts"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
