"""Eval metrics: bootstrap coverage by simulation, kappa on textbook cases, slices, the abstention pair, the gate."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from services.evalset.metrics import (
    ItemOutcome,
    LabelPair,
    agreement,
    cohen_kappa,
    confusion_matrix,
    disagreement_slices,
    eval_report,
    faithfulness,
    gate,
    parse_slice_min,
)


def item(i, verdicts, query_type="lookup", stakes="low", answerable=True, abstained=False):
    return ItemOutcome(f"it-{i}", query_type, stakes, answerable, abstained, tuple(verdicts))


def pairs_from_counts(table: dict[tuple[str, str], int]) -> tuple[list[str], list[str]]:
    a, b = [], []
    for (x, y), n in table.items():
        a += [x] * n
        b += [y] * n
    return a, b


# --- faithfulness and slices -------------------------------------------------------------------


def test_faithfulness_is_supported_over_checkable_with_trivial_excluded():
    outcomes = [
        item(0, ["supported", "trivial", "contradicted"]),
        item(1, ["entailed", "unlinked", "trivial"]),
        item(2, ["trivial"]),
        item(3, []),
    ]
    figure = faithfulness(outcomes, n_boot=200)
    assert (figure.numerator, figure.denominator, figure.items) == (2, 4, 2)
    assert figure.value == 0.5 and figure.lo <= 0.5 <= figure.hi


def test_unknown_verdict_names_the_item():
    with pytest.raises(ValueError, match="item it-7: unknown verdict 'maybe'"):
        faithfulness([item(7, ["maybe"])])


def test_slices_are_listed_worst_first_with_volume():
    outcomes = (
        [item(i, ["supported"] * 9 + ["unsupported"], "lookup", "low") for i in range(20)]
        + [item(100 + i, ["supported", "contradicted"], "multi_hop", "high") for i in range(10)]
        + [item(200 + i, ["supported"] * 3 + ["stale"], "aggregation", "low") for i in range(5)]
    )
    report = eval_report(outcomes, n_boot=300)
    names = [s.name for s in report.slices]
    assert names == ["query_type=multi_hop", "stakes=high", "query_type=aggregation", "stakes=low", "query_type=lookup"]
    assert [s.faithfulness.items for s in report.slices] == [10, 10, 5, 25, 20]
    high = report.slice("stakes=high").faithfulness
    assert high.value == 0.5 and high.denominator == 20
    assert report.slice("stakes=medium") is None
    assert report.faithfulness.value == pytest.approx((180 + 10 + 15) / (200 + 20 + 20))


def test_intervals_are_reproducible_under_a_seed_and_independent_of_other_slices():
    rng = np.random.default_rng(3)
    outcomes = [item(i, rng.choice(["supported", "unsupported"], size=4, p=[0.8, 0.2]), "lookup") for i in range(60)]
    extra = [item(1000 + i, ["supported"], "other") for i in range(10)]
    a = eval_report(outcomes, n_boot=500, seed=11)
    b = eval_report(outcomes + extra, n_boot=500, seed=11)
    c = eval_report(outcomes, n_boot=500, seed=12)
    assert a.slice("query_type=lookup") == b.slice("query_type=lookup")
    assert a.slice("query_type=lookup") != c.slice("query_type=lookup")


def test_interval_resamples_items_not_claims():
    # Ten items, each all-supported or all-failed with 50 claims: the between-item spread dominates.
    outcomes = [item(i, ["supported" if i % 2 else "unsupported"] * 50) for i in range(10)]
    figure = faithfulness(outcomes, n_boot=2000)
    # Resampling 500 claims would give roughly +-0.044; resampling 10 items gives roughly +-0.31.
    assert figure.hi - figure.lo > 0.4


@pytest.mark.slow
def test_bootstrap_interval_covers_the_true_faithfulness_about_95_percent_of_the_time():
    rng = np.random.default_rng(20261121)
    alpha, beta = 8.0, 2.0  # per-item support probability ~ Beta(8, 2): true faithfulness 0.8
    truth, simulations, covered = alpha / (alpha + beta), 400, 0
    for s in range(simulations):
        claims = 1 + rng.poisson(3, size=120)
        support = rng.binomial(claims, rng.beta(alpha, beta, size=120))
        outcomes = [
            item(i, ["supported"] * k + ["unsupported"] * (n - k)) for i, (k, n) in enumerate(zip(support, claims))
        ]
        figure = faithfulness(outcomes, n_boot=800, seed=s)
        covered += figure.lo <= truth <= figure.hi
    coverage = covered / simulations
    # Binomial sd of the coverage estimate at 400 runs is ~0.011; percentile intervals run a little short.
    assert 0.91 <= coverage <= 0.985, coverage


# --- the abstention pair ------------------------------------------------------------------------


def test_abstention_pair_is_reported_together():
    outcomes = (
        [item(i, [], answerable=False, abstained=True) for i in range(8)]
        + [item(10 + i, ["supported"], answerable=False, abstained=False) for i in range(2)]
        + [item(20 + i, [], answerable=True, abstained=True) for i in range(3)]
        + [item(30 + i, ["supported"], answerable=True, abstained=False) for i in range(27)]
        + [item(60 + i, ["supported"], answerable=None, abstained=True) for i in range(5)]
    )
    pair = eval_report(outcomes, n_boot=500).abstention
    assert pair.correct_abstention.value == pytest.approx(0.8) and pair.correct_abstention.items == 10
    assert pair.over_refusal.value == pytest.approx(0.1) and pair.over_refusal.items == 30
    for figure in (pair.correct_abstention, pair.over_refusal):
        assert figure.lo <= figure.value <= figure.hi


def test_abstention_pair_without_unanswerable_items_is_undefined_not_zero():
    pair = eval_report([item(0, ["supported"], answerable=True)], n_boot=50).abstention
    assert pair.correct_abstention.value is None and pair.over_refusal.value == 0.0


# --- kappa and confusion --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, expected",
    [
        # Wikipedia "Cohen's kappa", simple example: 50 proposals, p_o = 0.7, p_e = 0.5.
        ({("yes", "yes"): 20, ("yes", "no"): 5, ("no", "yes"): 10, ("no", "no"): 15}, 0.4),
        # Same article, equal p_o = 0.60 with different marginals.
        ({("yes", "yes"): 45, ("yes", "no"): 15, ("no", "yes"): 25, ("no", "no"): 15}, 0.1304),
        ({("yes", "yes"): 25, ("yes", "no"): 35, ("no", "yes"): 5, ("no", "no"): 35}, 0.2593),
        # Perfect agreement and perfect (balanced) disagreement.
        ({("a", "a"): 3, ("b", "b"): 2, ("c", "c"): 5}, 1.0),
        ({("yes", "no"): 5, ("no", "yes"): 5}, -1.0),
    ],
)
def test_cohen_kappa_on_hand_computable_cases(table, expected):
    a, b = pairs_from_counts(table)
    assert cohen_kappa(a, b) == pytest.approx(expected, abs=1e-4)


def test_cohen_kappa_is_near_zero_for_chance_agreement_and_matches_sklearn():
    rng = np.random.default_rng(5)
    labels = ["supported", "unsupported", "contradicted"]
    a = list(rng.choice(labels, size=20000, p=[0.6, 0.3, 0.1]))
    b = list(rng.choice(labels, size=20000, p=[0.6, 0.3, 0.1]))
    assert abs(cohen_kappa(a, b)) < 0.02
    assert cohen_kappa(a[:300], b[:300]) == pytest.approx(cohen_kappa_score(a[:300], b[:300]))


def test_cohen_kappa_edge_cases():
    assert np.isnan(cohen_kappa(["x", "x"], ["x", "x"]))  # one label throughout: undefined
    with pytest.raises(ValueError, match="no label pairs"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="differ in length"):
        confusion_matrix(["a"], ["a", "b"], ["a", "b"])
    with pytest.raises(ValueError, match="label 'z' is not in labels"):
        confusion_matrix(["a"], ["z"], ["a", "b"])


def test_confusion_matrix_rows_are_the_first_rater():
    matrix = confusion_matrix(["s", "s", "u", "c"], ["s", "u", "u", "s"], ["s", "u", "c"])
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]


def test_agreement_and_disagreement_slices():
    pairs = (
        [LabelPair(f"i{n // 2}", n % 2, "supported", "supported", "lookup", "low", "numeric") for n in range(20)]
        + [
            LabelPair(f"j{n // 2}", n % 2, "supported", "unsupported", "multi_hop", "high", "attribute")
            for n in range(6)
        ]
        + [LabelPair(f"k{n}", 0, "contradicted", "contradicted", "multi_hop", "high", "attribute") for n in range(4)]
    )
    result = agreement(pairs, n_boot=500)
    assert result.labels == ("contradicted", "supported", "unsupported")
    assert result.confusion == ((4, 0, 0), (0, 20, 6), (0, 0, 0))
    assert result.observed.value == pytest.approx(24 / 30) and result.kappa.items == 17
    assert result.kappa.value == pytest.approx(cohen_kappa([p.verifier for p in pairs], [p.human for p in pairs]))
    assert result.kappa.lo <= result.kappa.value <= result.kappa.hi
    worst = result.slices[0]
    assert worst.name in ("query_type=multi_hop", "stakes=high", "claim_type=attribute")
    assert worst.disagreement == pytest.approx(0.6) and worst.top_confusion == ("supported", "unsupported", 6)
    assert all(s.disagreement == 0 for s in result.slices if s.name in ("query_type=lookup", "stakes=low"))
    assert [s.name for s in disagreement_slices(pairs, dims=("stakes",), min_pairs=11)] == ["stakes=low"]


def test_agreement_with_no_pairs_is_empty_not_an_error():
    result = agreement([])
    assert result.kappa.value is None and result.confusion == () and result.slices == ()


# --- the gate ---------------------------------------------------------------------------------


def gate_report():
    outcomes = (
        [item(i, ["supported"] * 7 + ["contradicted"] * 3, "lookup", "high") for i in range(10)]
        + [item(100 + i, ["supported"] * 9 + ["unsupported"], "multi_hop", "low") for i in range(10)]
        + [item(200 + i, [], "unanswerable", "low", answerable=False, abstained=True) for i in range(4)]
        + [item(300 + i, [], "lookup", "low", answerable=True, abstained=True) for i in range(2)]
    )
    return eval_report(outcomes, n_boot=300)


def test_gate_passes_just_below_and_fails_just_above_the_measured_faithfulness():
    report = gate_report()
    measured = report.faithfulness.value
    assert measured == pytest.approx(0.8)
    assert gate(report, min_faithfulness=measured - 1e-9).passed
    result = gate(report, min_faithfulness=measured + 1e-9)
    assert not result.passed and [f.slice for f in result.failures] == ["all"]
    assert (
        "faithfulness on all is 0.8000" in result.failures[0].message
        and "below the minimum" in result.failures[0].message
    )


def test_gate_names_the_failing_slice_and_checks_over_refusal():
    report = gate_report()
    over = report.abstention.over_refusal.value  # 2 of 22 answerable items abstained
    assert gate(report, max_over_refusal=over + 1e-9).passed
    assert [f.metric for f in gate(report, max_over_refusal=over - 1e-9).failures] == ["over-refusal"]
    result = gate(report, slice_min={"stakes=high": 0.75, "query_type=multi_hop": 0.85})
    assert [f.slice for f in result.failures] == ["stakes=high"]
    result = gate(report, slice_min=0.8)
    assert {f.slice for f in result.failures} == {"stakes=high", "query_type=lookup"}


def test_gate_fails_on_a_slice_with_no_evidence():
    result = gate(gate_report(), slice_min={"stakes=medium": 0.5})
    assert not result.passed and "undefined" in result.failures[0].message
    assert not gate(eval_report([], n_boot=10), min_faithfulness=0.1).passed


def test_parse_slice_min():
    assert parse_slice_min("0.8") == 0.8
    assert parse_slice_min("stakes=high:0.9, query_type=lookup:0.85") == {"stakes=high": 0.9, "query_type=lookup": 0.85}
    with pytest.raises(ValueError, match="DIM=VALUE:MIN"):
        parse_slice_min("high:0.9")
    with pytest.raises(ValueError, match="DIM=VALUE:MIN"):
        parse_slice_min("stakes=high:lots")


def test_the_gate_refuses_to_pass_on_fewer_items_than_its_minimum_and_a_pass_states_its_interval():
    """`eval gate --min-faithfulness 0.5` on 5 items printed "eval gate passed", with no interval and no word that
    5 items cannot support a gate."""
    five = eval_report([item(i, ["supported"] * 9 + ["unsupported"]) for i in range(5)], n_boot=300)
    thin = gate(five, min_faithfulness=0.5, min_items=30)
    assert not thin.passed and "rests on fewer than eval.min_items (30)" in thin.failures[0].message
    assert "5 items" in thin.failures[0].message
    report = gate_report()  # 26 items, 20 with claims
    passed = gate(report, min_faithfulness=0.5, max_over_refusal=0.5, min_items=20)
    assert passed.passed and len(passed.checked) == 2
    assert (
        passed.checked[0].startswith("faithfulness on all is 0.8000 (95% CI ")
        and "20 items), at least" in passed.checked[0]
    )
    assert not gate(report, min_faithfulness=0.5, min_items=21).passed
