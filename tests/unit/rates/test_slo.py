"""SLO arithmetic (services/rates/slo.py) and burn alerts (services/alerts/evaluation/slo_watch.py) on constructed
histories: the budget with sampling weights, each rule firing at its exact minute, windows with too few claims or
too little history, and a route within its objective left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.alerts.detection.slo_burn import DEFAULT_RULES
from services.alerts.evaluation.slo_watch import SloWatch
from services.rates.intervals import Counts
from services.rates.slo import BURN_WINDOWS, MinuteSeries, Slo, budget, burn
from services.store.rates import SUM_FIELDS

T0 = datetime(2026, 11, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
SLO = Slo("billing-faithfulness", "billing-*", 0.95, 28 * 24 * 60)  # budget: 5% of claims may fail


def answers(n: int, claims: int, failed_each: int, weight: float = 1.0) -> Counts:
    """``n`` answers of ``claims`` claims, ``failed_each`` of them failed, each weighing ``weight``."""
    f, c, w = failed_each, claims, weight
    return Counts(
        events=n, claims=n * c, failed=n * f, claims_sq=n * c * c, failed_sq=n * f * f, failed_claims=n * f * c,
        supported=n * (c - f), unsupported=n * f, served=n, served_unsafe=n if f else 0,
        sampled=n if w != 1 else 0, w_events=n * w, w2_events=n * w * w, w_claims=n * w * c, w_failed=n * w * f,
        w2_claims=n * w * w * c, w2_claims_sq=n * w * w * c * c, w2_failed_sq=n * w * w * f * f,
        w2_failed_claims=n * w * w * f * c, w_served=n * w, w_served_unsafe=n * w if f else 0.0,
        w_supported=n * w * (c - f), w_unsupported=n * w * f,
    )  # fmt: skip


def test_the_budget_weights_each_answer_by_its_sampling_rate():
    # 90 answers verified in full, none failing; 10 verified 1 in 10 (each stands for 10), half their claims failed.
    traffic = answers(90, 4, 0) + answers(10, 4, 2, weight=10.0)
    spent = budget(traffic, SLO)
    weighted_rate = (10 * 10 * 2) / (90 * 4 + 10 * 10 * 4)  # 200 / 760: the sampled answers stand for 100
    assert spent.bad_share == pytest.approx(weighted_rate)
    assert spent.spent == pytest.approx(weighted_rate / 0.05)
    assert spent.remaining == pytest.approx(1 - weighted_rate / 0.05)
    unweighted = budget(answers(90, 4, 0) + answers(10, 4, 2), SLO)
    assert unweighted.spent == pytest.approx((20 / 400) / 0.05)  # the stored counts alone would say 1.0
    assert spent.spent_interval.lo < spent.spent < spent.spent_interval.hi


def test_served_answers_count_an_answer_bad_when_any_claim_failed():
    slo = Slo("safe-serving", "billing-*", 0.99, 28 * 24 * 60, sli="served_answers")
    traffic = answers(95, 3, 0) + answers(5, 3, 1)
    assert budget(traffic, slo).bad_share == pytest.approx(5 / 100)
    assert budget(traffic, slo).spent == pytest.approx(5.0)


def test_a_window_with_too_few_claims_or_too_little_history_says_so():
    thin = burn(answers(5, 1, 0), SLO, "5m", 5, history_minutes=600, min_claims=30)
    assert thin.rate is None and thin.reason == "too few claims to tell (5 of 30)"
    young = burn(answers(500, 4, 0), SLO, "3d", BURN_WINDOWS["3d"], history_minutes=90)
    assert young.rate is None and young.reason == "too little history: 1.5h of 3d"
    known = burn(answers(100, 4, 1), SLO, "1h", 60, history_minutes=60)
    assert known.rate == pytest.approx(0.25 / 0.05) and known.interval.lo < 5 < known.interval.hi


class History:
    """An SLO's minutes as the store would give them (services/store/rates.py: slo_minutes): constant traffic of 50
    answers of 4 claims a minute, its failed claims per minute set by span."""

    def __init__(self, start: datetime, spans: list[tuple[int, int]]):
        self.start = start
        self.failed: list[int] = [failed for minutes, failed in spans for _ in range(minutes)]

    @property
    def end(self) -> datetime:
        return self.start + (len(self.failed) - 1) * MINUTE

    def row(self, failed: int) -> list[float]:
        c = answers(50 - failed, 4, 0) + answers(failed, 4, 1)  # each failing answer has one failed claim of four
        return [float(getattr(c, f)) for f in SUM_FIELDS]

    def slo_minutes(self, routes, version, start, end):
        return [
            (self.start + i * MINUTE, self.row(f))
            for i, f in enumerate(self.failed)
            if start <= self.start + i * MINUTE <= end
        ]

    def slo_first_minute(self, routes, version):
        return self.start

    def slo_sums(self, routes, version, start, end):
        return [sum(v) for v in zip(*(r for _, r in self.slo_minutes(routes, version, start, end)))]


def transitions(history: History, slo: Slo = SLO) -> list[tuple[str, str, int]]:
    """(severity, state, minute number) of each transition over the whole history, as the backtest steps it."""
    watch = SloWatch([slo], history, alerts=None, evaluated=lambda: history.end, labels_of=lambda s: {"team": "t"})
    return [
        (a.severity, a.recorded_state, int((a.transition_at - history.start) / MINUTE))
        for a in watch.step(history.start, history.end)
    ]


# 200 claims a minute: 5 failed is half the budget (2.5% of 5%), 160 failed is 16 times it (80%).
HALF, SIXTEEN = 5, 160
THREE_DAYS = BURN_WINDOWS["3d"]


def test_a_jump_to_16_times_the_budget_pages_when_the_1h_window_passes_14_4():
    history = History(T0, [(THREE_DAYS, HALF), (120, SIXTEEN), (30, HALF)])
    jump = THREE_DAYS
    # The 1h burn passes 14.4 once k of its 60 minutes burn at 16 and the rest at 0.5: 16k + 0.5(60 - k) > 864,
    # k > 53.8, so at the jump's 54th minute; the 5m window passed 14.4 at its 5th.
    found = transitions(history)
    page = [t for t in found if t[0] == "critical"]
    assert page[0] == ("critical", "firing", jump + 53)
    assert page[0][2] - jump < 60  # the target: paged within the hour
    # It resolves as soon as the short window says the burn stopped: at the first minute back at half the budget the
    # 5m burn is (4 x 16 + 0.5) / 5 = 12.9, below 14.4. The 6h/30m rule never held: two hours at 16 in six bring the
    # 6h burn to (120 x 16 + 240 x 0.5) / 360 = 5.67 at most, below 6.
    back = jump + 120
    assert page[1] == ("critical", "resolved", back)
    assert len(page) == 2


def test_a_burn_of_7_times_the_budget_pages_when_the_6h_window_passes_6():
    # 7 x 5% = 35% of 200 claims: 70 failed a minute, after six hours at half the budget. The 1h rule never holds
    # (7 < 14.4); the 6h burn passes 6 once (7k + 0.5(360 - k)) / 360 > 6: k > 304.6, at the 305th minute, when the
    # 30m burn (7) has long passed 6.
    history = History(T0, [(360, HALF), (400, 70)])
    assert transitions(history) == [("critical", "firing", 360 + 304)]


def test_a_steady_burn_of_1_8_gets_a_ticket_once_3_days_hold_it_and_no_page():
    # 1.8 x 5% = 9% of 200 claims: 18 failed a minute, from the first minute on.
    history = History(T0, [(THREE_DAYS + 60, 18)])
    assert transitions(history) == [("warning", "firing", THREE_DAYS - 1)]  # the 3d window is covered there


def test_a_route_within_its_objective_gets_nothing():
    history = History(T0, [(THREE_DAYS + 600, 9)])  # 0.9 x the budget, for more than three days
    assert transitions(history) == []


def test_every_default_rule_uses_known_windows():
    assert {r.long for r in DEFAULT_RULES} | {r.short for r in DEFAULT_RULES} <= set(BURN_WINDOWS)
    series = MinuteSeries(T0, T0 + 9 * MINUTE, [(T0 + i * MINUTE, History(T0, []).row(5)) for i in range(10)], T0)
    assert series.total(T0 + 9 * MINUTE, 5).claims == 5 * 200
    assert series.total(T0 + 2 * MINUTE, 5).claims == 3 * 200  # minutes before the series count as empty
