"""`review plan`'s arithmetic on constructed rates (how often following it lands under the width:
bench/calibration.py --plan)."""

from __future__ import annotations

import math

import pytest

from services.review.calibration import CalibratedRate
from services.review.estimators import VerdictClass, stratified_variance
from services.review.planning import LabelPlanner, cautious_spread, neyman

Z = 1.959964


def rate(route="r", flagged=(0.2, 0.8, 50.0), passed=(0.8, 0.1, 50.0), raw_variance=1e-5, **kw) -> CalibratedRate:
    """A route whose verifier flags 20% of claims, 80% of those failed, 10% of the passed, 50 labels each."""
    f, p = VerdictClass(*flagged), VerdictClass(*passed)
    fields = dict(
        route=route,
        raw=f.share,
        value=0.24,
        interval=(0.2, 0.28),
        sensitivity=0.67,
        specificity=0.95,
        labels=int(f.labels + p.labels),
        pooled=False,
        label_routes=(route,),
        verifier_version="v1",
        stale=False,
        flagged=f,
        passed=p,
        raw_variance=raw_variance,
        own_labels=int(f.labels + p.labels),
    )
    return CalibratedRate(**{**fields, **kw})


BUDGET = (0.03 / (2 * Z)) ** 2
PARTS = (0.2 * 0.4, 0.8 * 0.3)  # W·σ of a flagged class 80% failed and a passed class 10% failed


def test_neyman_splits_by_share_times_spread_and_totals_the_textbook_count():
    n_flagged, n_passed = neyman(PARTS, (0.0, 0.0), BUDGET)
    assert n_flagged / n_passed == pytest.approx(PARTS[0] / PARTS[1])
    assert n_flagged + n_passed == pytest.approx((2 * Z * sum(PARTS) / 0.03) ** 2)
    assert PARTS[0] ** 2 / n_flagged + PARTS[1] ** 2 / n_passed == pytest.approx(BUDGET)


def test_a_class_with_more_than_its_share_keeps_it_and_the_other_takes_the_rest():
    n_flagged, n_passed = neyman(PARTS, (5000.0, 10.0), BUDGET)
    assert n_flagged == 5000
    assert PARTS[0] ** 2 / 5000 + PARTS[1] ** 2 / n_passed == pytest.approx(BUDGET)


def test_following_the_plan_brings_the_modelled_width_to_the_target():
    planner = LabelPlanner("ppi", min_labels=30, caution=0.0)
    plan = planner.plan(rate(), 0.03)
    assert plan.more == plan.flagged + plan.passed and plan.flagged > 0 and plan.passed > plan.flagged
    r = rate()
    after = stratified_variance(
        r.flagged, r.passed, r.slope(), r.raw_variance, (r.flagged.labels + plan.flagged, r.passed.labels + plan.passed)
    )
    assert 2 * Z * math.sqrt(after) <= 0.03
    fewer = stratified_variance(
        r.flagged,
        r.passed,
        r.slope(),
        r.raw_variance,
        (r.flagged.labels + plan.flagged - 2, r.passed.labels + plan.passed - 2),
    )
    assert 2 * Z * math.sqrt(fewer) > 0.03, "no label is asked for in vain"


def test_caution_asks_for_more_the_fewer_labels_the_estimates_rest_on():
    careful, bold = LabelPlanner("ppi", 30, caution=1.0), LabelPlanner("ppi", 30, caution=0.0)
    few = rate(flagged=(0.2, 0.8, 20.0), passed=(0.8, 0.1, 20.0))
    many = rate(flagged=(0.2, 0.8, 2000.0), passed=(0.8, 0.1, 2000.0))
    extra = {name: careful.plan(r, 0.02).more / bold.plan(r, 0.02).more for name, r in (("few", few), ("many", many))}
    assert extra["few"] > extra["many"] > 1, extra
    assert cautious_spread(VerdictClass(0.8, 0.0, 40.0), 1.0) > cautious_spread(VerdictClass(0.8, 0.0, 40.0), 0.0) > 0


def test_when_the_window_s_own_noise_is_wider_no_count_is_given():
    plan = LabelPlanner("ppi", 30).plan(rate(raw_variance=1e-3), 0.03)
    assert plan.more is None and "window alone: 8.7 pts" in plan.note  # 2z · 0.7 · √1e-3
    close = LabelPlanner("ppi", 30).plan(rate(raw_variance=4.5e-5), 0.03)
    assert close.more > 3000 and "a longer one needs fewer" in close.note


def test_rogan_gladen_s_heavier_slope_asks_for_more_labels():
    # λ = 1 / (0.67 + 0.95 - 1) = 1.61 against 0.8 - 0.1 = 0.7: p's noise takes more of the budget.
    r = rate(raw_variance=2e-5)
    assert LabelPlanner("rogan_gladen", 30).plan(r, 0.03).more > LabelPlanner("ppi", 30).plan(r, 0.03).more


def test_pooled_labels_do_not_count_for_the_route_and_min_labels_is_a_floor():
    planner = LabelPlanner("ppi", 30)
    pooled = planner.plan(rate(pooled=True, own_labels=4), 0.03)
    alone = planner.plan(rate(), 0.03)
    assert pooled.labels == 4 and "own count from 0" in pooled.note
    assert pooled.more == pytest.approx(alone.more + 100, abs=2), "the 100 pooled labels count from zero"
    assert planner.plan(rate(pooled=True, own_labels=4), 0.6).more == 26, "wide enough, but min_labels first"
    assert planner.plan(rate(), 0.3).more == 0, "wide enough already"


def test_a_route_without_labels_is_planned_as_a_coin_toss():
    plan = LabelPlanner("ppi", 30).plan(
        rate(flagged=(0.2, None, 0.0), passed=(0.8, None, 0.0), labels=0, own_labels=0), 0.03
    )
    # σ = ½ in both classes, and p's noise counted whole (λ unknown, at most 1).
    assert "no labels yet" in plan.note and plan.flagged / plan.passed == pytest.approx(0.2 / 0.8, rel=0.02)
    assert plan.more == pytest.approx(0.5**2 / (BUDGET - 1e-5), abs=2)


def test_plans_come_worst_first():
    plans = LabelPlanner("ppi", 30).plan_all(
        [
            rate("small"),
            rate("noisy", raw_variance=1e-3),
            rate("thin", flagged=(0.2, 0.8, 5.0), passed=(0.8, 0.1, 5.0)),
        ],
        0.03,
    )
    assert [p.route for p in plans] == ["noisy", "thin", "small"]


def test_the_sampler_is_asked_for_the_plan_and_a_hopeless_route_still_gets_min_labels():
    planner = LabelPlanner("ppi", 30)
    plans = planner.plan_all(
        [
            rate("thin", flagged=(0.2, 0.8, 5.0), passed=(0.8, 0.1, 5.0), own_labels=10, labels=10),
            rate("noisy", raw_variance=1e-3, own_labels=7, labels=7),
        ],
        0.03,
    )
    needs = planner.needs(plans)
    thin = next(p for p in plans if p.route == "thin")
    assert needs[("thin", True)] == thin.flagged and needs[("thin", False)] == thin.passed and thin.more > 0
    assert needs[("noisy", True)] + needs[("noisy", False)] == 23, "what it lacks of min_labels"
