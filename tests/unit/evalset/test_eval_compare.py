"""Two eval runs compared (issue 53), without I/O: the paired difference on constructed runs whose true difference is
known, the interval's coverage over many simulated datasets, the gate's regression check and the run matchers."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from services.core.numbers import change_interval_text, pts
from services.evalset.compare import (
    CORRECT_ABSTENTION,
    FAITHFULNESS,
    OVER_REFUSAL,
    EvalRun,
    PairedComparison,
    PairedFigure,
    RunComparison,
    parse_matcher,
    regression_check,
)
from services.evalset.metrics import Figure, ItemOutcome, eval_report

NOW = datetime(2026, 11, 21, tzinfo=UTC)
S, C, T = "supported", "contradicted", "trivial"


def served(item_id: str, *verdicts: str, answerable: bool | None = True, stakes: str = "low") -> ItemOutcome:
    return ItemOutcome(item_id, "lookup", stakes, answerable, False, verdicts)


def abstained(item_id: str, answerable: bool | None) -> ItemOutcome:
    return ItemOutcome(item_id, "lookup", "low", answerable, True, ())


def runs() -> tuple[list[ItemOutcome], list[ItemOutcome]]:
    """20 answered items, each with 4 checkable claims and a trivial one: the baseline supports 3 of 4 on every
    item (60 of 80), the candidate all 4 on items 0-9 (high stakes) and 3 on 10-19 (70 of 80). Then 8 unanswerable
    items, each served with a supported and a contradicted claim or abstained: the baseline abstains on 2, the
    candidate on 6. Item q0 only the baseline answered."""
    base = [served(f"a{i:02d}", S, S, S, C, T, stakes="high" if i < 10 else "low") for i in range(20)]
    cand = [served(f"a{i:02d}", S, S, S, S if i < 10 else C, T, stakes="high" if i < 10 else "low") for i in range(20)]
    base += [abstained(f"u{i}", False) if i < 2 else served(f"u{i}", S, C, answerable=False) for i in range(8)]
    cand += [abstained(f"u{i}", False) if i < 6 else served(f"u{i}", S, C, answerable=False) for i in range(8)]
    return base + [served("q0", S)], cand


def test_the_paired_difference_is_the_known_one_and_each_side_is_the_reports_figure():
    base, cand = runs()
    paired = PairedComparison(n_boot=2000).compare(base, cand)
    assert (paired.items, paired.baseline_only, paired.candidate_only) == (28, 1, 0)
    faith, correct, over = paired.metrics
    # Faithfulness pairs the items both runs made checkable claims on: a00-a19, and u6, u7 (1 of 2 supported).
    assert faith.metric == FAITHFULNESS and faith.pairs == 22
    assert (faith.baseline.numerator, faith.baseline.denominator) == (62, 84)
    assert (faith.candidate.numerator, faith.candidate.denominator) == (72, 84)
    assert faith.difference == pytest.approx(10 / 84)
    assert faith.lo < faith.difference < faith.hi and faith.lo > 0 and faith.excludes_zero
    assert faith.reading == "candidate better"
    # Each side's value is what the report computes over the same items.
    both = {o.item_id for o in base if o.verdicts} & {o.item_id for o in cand if o.verdicts}
    assert faith.candidate.value == eval_report([o for o in cand if o.item_id in both]).faithfulness.value
    assert faith.baseline.value == eval_report([o for o in base if o.item_id in both]).faithfulness.value
    assert (correct.metric, correct.where, correct.pairs) == (CORRECT_ABSTENTION, "unanswerable", 8)
    assert (correct.baseline.value, correct.candidate.value, correct.difference) == (0.25, 0.75, 0.5)
    assert correct.note == "n=8: too few for an interval" and not correct.excludes_zero
    assert correct.reading == "too few items"
    assert (over.metric, over.where, over.pairs, over.difference) == (OVER_REFUSAL, "answerable", 20, 0.0)
    assert over.note.endswith("every resample agrees, so the bootstrap gives no interval")
    assert (over.lo, over.hi, over.reading) == (0.0, 0.0, "no credible difference")


def test_faithfulness_by_slice_puts_the_candidates_largest_loss_first():
    base, cand = runs()
    paired = PairedComparison(n_boot=500).compare(cand, base)  # the roles swapped: a loss on the high-stakes items
    worst = paired.slices[0]
    assert worst.where == "stakes=high" and worst.pairs == 10
    assert worst.difference == pytest.approx(30 / 40 - 1.0)
    # Every high-stakes item lost a claim in 4: each resample agrees, so the interval is that one value.
    assert worst.note == "n=10: every resample agrees, so the bootstrap gives no interval"
    assert worst.lo == worst.hi == worst.difference and worst.reading == "candidate worse"
    assert [s.where for s in paired.slices].count("query_type=lookup") == 1


def test_identical_runs_differ_by_nothing_and_the_interval_is_seeded():
    base, cand = runs()
    same = PairedComparison(n_boot=500).compare(base, base).metrics[0]
    assert same.difference == 0 and not same.excludes_zero and same.reading == "no credible difference"
    one, two = (PairedComparison(n_boot=500, seed=3).compare(base, cand).metrics[0] for _ in range(2))
    assert (one.lo, one.hi) == (two.lo, two.hi)
    other = PairedComparison(n_boot=500, seed=4).compare(base, cand).metrics[0]
    assert (other.lo, other.hi) != (one.lo, one.hi)


def test_the_interval_is_paired_narrower_than_the_two_runs_intervals_suggest():
    """Items differ a lot in difficulty and the candidate gains one claim in 20 on every one: the sides' own
    intervals overlap, yet the paired difference is credibly positive. Resampling each run's items apart would
    not exclude 0."""
    rng = np.random.default_rng(5)
    base, cand = [], []
    for i in range(60):
        good = int(rng.integers(2, 19))
        base.append(served(f"i{i}", *[S] * good, *[C] * (20 - good)))
        cand.append(served(f"i{i}", *[S] * (good + 1), *[C] * (19 - good)))
    faith = PairedComparison(n_boot=2000).compare(base, cand).metrics[0]
    assert faith.difference == pytest.approx(0.05)
    assert faith.candidate.lo < faith.baseline.hi  # the two runs' own intervals overlap
    assert faith.excludes_zero and faith.lo > 0.04  # paired: every item gains exactly 0.05


@pytest.mark.slow
def test_the_95_percent_interval_covers_the_true_difference_95_percent_of_the_time():
    """1,000 datasets from a known distribution, each compared as `eval compare` does. An item's difficulty u is
    Beta(8, 2); the baseline supports each claim with probability u, the candidate with 1 - 0.75 (1 - u), so the
    true faithfulnesses are E[u] = 0.8 and 1 - 0.75 * 0.2 = 0.85: a difference of +0.05. Each answer makes 1 +
    Poisson(3) checkable claims and a trivial one, which does not count. The stated 95% must cover it in 93-97%."""
    rng = np.random.default_rng(2026)
    truth, reps, covered = 0.85 - 0.8, 1000, 0
    for rep in range(reps):
        u = rng.beta(8, 2, 80)
        base, cand = [], []
        for i, (k_b, k_c) in enumerate(zip(1 + rng.poisson(3, 80), 1 + rng.poisson(3, 80))):
            s_b, s_c = rng.binomial(k_b, u[i]), rng.binomial(k_c, 1 - 0.75 * (1 - u[i]))
            base.append(served(f"i{i}", *[S] * s_b, *[C] * (k_b - s_b), T, answerable=None))
            cand.append(served(f"i{i}", T, *[C] * (k_c - s_c), *[S] * s_c, answerable=None))
        faith = PairedComparison(n_boot=1000, seed=rep).compare(base, cand, dims=()).metrics[0]
        assert faith.pairs == 80
        covered += faith.lo <= truth <= faith.hi
    assert 0.93 <= covered / reps <= 0.97, f"covered {covered} of {reps}"


def comparison(metric: str = FAITHFULNESS, difference=0.0, lo=-0.01, hi=0.01, pairs: int = 40) -> RunComparison:
    """r-11 against r-10: every metric within a point of no change over 40 items, but ``metric`` as given."""
    side = Figure(0.9, 0.85, 0.95, pairs)

    def figure(name: str) -> PairedFigure:
        d, low, high = (difference, lo, hi) if name == metric else (0.0, -0.01, 0.01)
        credible = low > 0 or high < 0
        return PairedFigure(
            name, "all", name != OVER_REFUSAL, pairs, side, side, d, low, high, credible, "", ""
        )  # fmt: skip

    run_b = EvalRun.of("r-10", {"model": "gen-2026-10"}, 40, NOW)
    run_c = EvalRun.of("r-11", {"model": "gen-2026-11"}, 40, NOW)
    metrics = tuple(figure(name) for name in (FAITHFULNESS, CORRECT_ABSTENTION, OVER_REFUSAL))
    return RunComparison(run_b, run_c, pairs, 0, 0, 0.95, metrics)


@pytest.mark.parametrize(
    "metric, difference, lo, hi, tolerance, fails",
    [
        (FAITHFULNESS, -0.05, -0.08, -0.02, 0.01, True),  # credibly worse by more than a point
        (FAITHFULNESS, -0.05, -0.08, -0.02, 0.03, False),  # ... but not by more than 3
        (FAITHFULNESS, -0.05, -0.08, 0.01, 0.0, False),  # the interval reaches 0: not credibly worse
        (FAITHFULNESS, 0.05, 0.02, 0.08, 0.0, False),  # better
        (OVER_REFUSAL, 0.05, 0.02, 0.08, 0.01, True),  # more refusal is worse
        (OVER_REFUSAL, -0.05, -0.08, -0.02, 0.01, False),
        (CORRECT_ABSTENTION, -0.05, -0.08, -0.02, 0.01, True),
    ],
)
def test_the_gate_fails_a_candidate_credibly_worse_beyond_the_tolerance(metric, difference, lo, hi, tolerance, fails):
    failures, checked = regression_check(comparison(metric, difference, lo, hi), tolerance)
    assert [f.metric for f in failures] == ([f"{metric} against the baseline"] if fails else [])
    assert len(checked) == 3 - fails
    if fails:
        message = failures[0].message
        assert message.startswith(f"{metric} on all is 90.0% for r-11 (model=gen-2026-11) against 90.0% for r-10")
        assert f"{pts(difference)} (95% CI {change_interval_text(lo, hi)}, 40 items): credibly worse" in message


def test_the_gate_needs_items_behind_the_faithfulness_difference_and_an_interval_to_fail():
    [failure], _ = regression_check(comparison(pairs=12), 0.01, min_items=30)
    assert "fewer than eval.min_items (30) items: too few to gate on" in failure.message
    assert regression_check(comparison(pairs=30), 0.01, min_items=30)[0] == []
    base, cand = runs()
    few = RunComparison.of(
        EvalRun.of("r-10", {}, 28, NOW), EvalRun.of("r-11", {}, 28, NOW), PairedComparison(200).compare(base, cand)
    )
    failures, checked = regression_check(few, 0.01)
    assert failures == [] and "correct abstention on unanswerable" in checked[1]
    assert checked[1].endswith("n=8: too few for an interval; 8 items); not gated: too few items to show a regression")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("r-77", ("r-77", {})),
        (" model=gen-2026-11 ", ("", {"model": "gen-2026-11"})),
        ("model=gen-2026-11, prompt=p7", ("", {"model": "gen-2026-11", "prompt": "p7"})),
    ],
)
def test_a_matcher_is_a_run_id_or_version_pairs(text, expected):
    assert parse_matcher(text, "baseline") == expected


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "baseline: give a run id or version matchers"),
        ("model=", "baseline: 'model=' is not KEY=VALUE"),
        ("model=a,prompt", "baseline: 'prompt' is not KEY=VALUE"),
        ("model=a,model=b", "baseline: model is given twice (a and b); keep one"),
    ],
)
def test_a_bad_matcher_is_refused_with_a_sentence(text, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_matcher(text, "baseline")
