"""How narrow can a calibrated interval get at 200 labels a route? The floor for what the labels can be split by.

A calibrated rate from n labels is a stratified mean: Σ_h W_h·ȳ_h, W_h the window's share of claims in stratum h
(known from the traffic), ȳ_h its labels' failed share. Its variance is at least Σ W_h²·σ_h² / n_h, and with
the labels split the best way (Neyman: n_h ∝ W_h·σ_h) it is (Σ W_h·σ_h)² / n. Nothing else in the estimate
shrinks it: this floor leaves out the reviewers' own errors and the window's noise in W, which only add. So
the floor says what information a narrower interval would need, whatever the estimator (PPI, PPI++ or
Rogan–Gladen are all of this form once the labels are a stratified sample of the window's claims).

The routes are bench/calibration.py's (bench/calibration_world.py): a large window of their answers
(1-5 claims sharing a propensity), the verifier's verdict by its Se and Sp. The strata tried:
- the verdict (flagged or passed), labels split evenly (the review's default `allocate`) or the Neyman way
  (what `review plan` asks for);
- the verdict and how many of the answer's other claims the verifier flagged (none, some, most; a claim of a
  bad answer is more likely bad);
- the verdict and bands of the verifier's `score` (the contract's confidence in its verdict; quantile bands
  within each verdict), for simulated scores more or less able to tell a wrong verdict from a right one
  (AUROC of the score for "this verdict is wrong");
- the verdict and the product's fixed score bands (services/core/score_bands.py) of the score
  bench/calibration.py's sharp world draws (AUROC 0.86), Neyman: alone, then with the settled labels as wrong
  as that bench's reviewers make them (each wrong 5%: both on the wrong side, or one and then the adjudicator,
  0.73%), then with the window's own noise at that bench's 2,000 answers a route added. The last is the floor
  under the width bench/calibration.py measures with scores.

Run: python bench/calibration_floor.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.calibration_world import ROUTES, SCORE_GAPS, RouteDraw, World  # noqa: E402
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from services.core.score_bands import bands_of  # noqa: E402
from services.review.confidence import auroc  # noqa: E402

Z = 1.959964
# The score of a right verdict ~ Beta(right), of a wrong one ~ Beta(wrong).
SCORES = {"weak": ((6, 3), (4, 3)), "typical": ((8, 2), (4, 3)), "sharp": ((9, 1), (2, 3))}


def floor_width(
    failed: np.ndarray, strata: np.ndarray, labels: int, neyman: bool, label_error: float = 0.0, extra: float = 0.0
) -> float:
    """The 95% interval's width at the floor, labels split evenly between the verdicts (then spread over each
    verdict's strata in proportion, as a sample of that verdict would fall) or the Neyman way over all strata.
    ``label_error``: the share of settled labels on the wrong side; ``extra``: variance added (the window's)."""
    keys, inverse = np.unique(strata, return_inverse=True)
    share = np.bincount(inverse) / len(strata)
    failed_share = np.bincount(inverse, weights=failed) / np.bincount(inverse)
    failed_share = failed_share + label_error * (1 - 2 * failed_share)  # what the settled labels say
    spread = np.sqrt(failed_share * (1 - failed_share))
    if neyman:
        variance = (share @ spread) ** 2 / labels
    else:
        verdict = keys // 100  # strata are verdict·100 + band
        in_verdict = {v: share[verdict == v].sum() for v in np.unique(verdict)}
        n = np.array([labels / len(in_verdict) * s / in_verdict[v] for v, s in zip(verdict, share)])
        variance = float(np.sum(share**2 * spread**2 / n))
    return 2 * Z * float(np.sqrt(variance + extra))


def window_variance(draw: RouteDraw, strata: np.ndarray, answers: int) -> float:
    """The post-stratified estimate's variance from the window alone, at ``answers`` answers (services/review/
    score_strata.py: d'Cd / (Σ claims)², answers resampled), the cells' failed shares known."""
    keys, inverse = np.unique(strata, return_inverse=True)
    failed_share = np.bincount(inverse, weights=draw.failed) / np.bincount(inverse)
    per_claim = failed_share[inverse] - draw.failed.mean()
    per_answer = np.add.reduceat(per_claim, np.r_[0, np.cumsum(draw.answer_claims)[:-1]])
    return float(per_answer @ per_answer) / len(strata) ** 2 * len(draw.answer_claims) / answers


def bands(values: np.ndarray, by: np.ndarray, k: int) -> np.ndarray:
    """Quantile band (0..k-1) of each value within its group ``by``."""
    out = np.zeros(len(values), dtype=np.int64)
    for g in np.unique(by):
        m = by == g
        edges = np.quantile(values[m], np.linspace(0, 1, k + 1)[1:-1])
        out[m] = np.digitize(values[m], edges)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=int, default=200)
    parser.add_argument("--answers", type=int, default=200_000, help="answers per route in the (large) window")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument(
        "--rg-width", type=float, default=8.1, help="Rogan–Gladen's mean width, from bench/calibration.py"
    )
    parser.add_argument("--reviewer-error", type=float, default=0.05, help="as bench/calibration.py's reviewers")
    parser.add_argument("--bench-answers", type=int, default=2000, help="answers per route in bench/calibration.py")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None
    rng = np.random.default_rng(args.seed)
    world = World(answers=args.answers)
    rows: dict[str, list[float]] = {}
    aurocs: dict[str, list[float]] = {}
    for truth in ROUTES:
        draw = world.route(rng, truth)
        failed, flagged = draw.failed.astype(float), draw.flagged.astype(np.int64)
        per_answer = np.add.reduceat(flagged, np.r_[0, np.cumsum(draw.answer_claims)[:-1]])
        others = np.repeat(draw.answer_claims, draw.answer_claims) - 1
        others_flagged = np.repeat(per_answer, draw.answer_claims) - flagged
        siblings = np.where(others == 0, 0, 1 + (others_flagged > 0) + (2 * others_flagged > others))

        def add(name: str, strata: np.ndarray, neyman: bool = True, failed=failed, flagged=flagged) -> None:
            rows.setdefault(name, []).append(floor_width(failed, flagged * 100 + strata, args.labels, neyman))

        add("verdict, split evenly", 0, neyman=False)
        add("verdict, Neyman split", 0)
        add("verdict × the answer's other verdicts, Neyman", siblings)
        scored = World(answers=args.answers, score_gap=SCORE_GAPS["sharp"]).route(rng, truth)
        cells = scored.flagged.astype(np.int64) * 100 + bands_of(scored.scores)
        settled_error = args.reviewer_error**2 * (3 - 2 * args.reviewer_error)  # both wrong, or one and the umpire
        bench = "verdict × bands of the bench's score (AUROC 0.86), Neyman"
        for name, error, extra in (
            (bench, 0.0, 0.0),
            (f"{bench}, settled labels {100 * settled_error:.2f}% wrong", settled_error, 0.0),
            (
                f"{bench}, those labels and the window's noise at {args.bench_answers:,} answers",
                settled_error,
                window_variance(scored, cells, args.bench_answers),
            ),
        ):
            rows.setdefault(name, []).append(
                floor_width(scored.failed.astype(float), cells, args.labels, True, error, extra)
            )
        right = draw.flagged == draw.failed
        for name, (good, bad) in SCORES.items():
            score = np.where(right, rng.beta(*good, size=right.size), rng.beta(*bad, size=right.size))
            for k, neyman in ((4, False), (4, True), (10, True)):
                key = f"verdict × {k} bands of a {name} score, {'Neyman' if neyman else 'split evenly'}"
                aurocs.setdefault(key, []).append(float(auroc(score, right.astype(float), np.ones(right.size))))
                add(key, bands(score, flagged, k), neyman)
    console = Console(width=120)
    table = Table(title=f"The floor of the calibrated interval's width at {args.labels} labels a route (points)")
    for column in ("strata", *(r.route for r in ROUTES), "mean", "vs. verdict, even"):
        table.add_column(column, justify="left" if column == "strata" else "right")
    base = np.mean(rows["verdict, split evenly"])
    for name, widths in rows.items():
        label = name + (f" (AUROC {np.mean(aurocs[name]):.2f})" if name in aurocs else "")
        table.add_row(
            label, *(f"{100 * w:.2f}" for w in widths), f"{100 * np.mean(widths):.2f}", f"{np.mean(widths) / base:.2f}"
        )
    console.print(table)
    console.print(
        f"Floors: the reviewers' errors and the window's own noise only add to them. Issue 24's target, "
        f"25% under Rogan–Gladen's {args.rg_width:g} points (bench/calibration.py), is "
        f"{0.75 * args.rg_width:.2f} points."
    )
    if recording:
        target = Target(at_most=0.75 * args.rg_width, text=f"≤ {0.75 * args.rg_width:.2f} (issue 24)")
        floor = [name for name in rows if name.startswith(bench)][-1]  # its labels' errors and its window's noise
        recording.finish(
            [
                Figure(
                    "verdict, split evenly",
                    round(100 * float(np.mean(rows["verdict, split evenly"])), 2),
                    "pts",
                    target,
                ),
                Figure(
                    "verdict x bands of bench/calibration.py's AUROC-0.86 score, with its labels' errors and window",
                    round(100 * float(np.mean(rows[floor])), 2),
                    "pts",
                    Target(at_most=6.0, text="≤ 6.0 (issue 56)"),
                ),
            ]
        )


if __name__ == "__main__":
    main()
