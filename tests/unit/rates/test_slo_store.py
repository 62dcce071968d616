"""An SLO's traffic as the store selects it (services/store/rates.py: slo_minutes, slo_sums, slo_first_minute): routes
by glob, traffic by one version's glob, weights kept; and its burn alerts evaluated pass by pass, as the live cycle
runs them, giving the transitions one step over every minute gives (the backtest's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.alerts.evaluation.slo_watch import SloWatch
from services.alerts.lifecycle.records import alert_repository
from services.contract.decode import Decoder
from services.rates.slo import Slo, budget, counts_of
from services.store.rates import RateRepository
from services.store.writer import EventWriter

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def event(n: int, route: str, minute: int, verdicts: list[str], model: str = "gen-2026-11", rate: float | None = None):
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": f"e-{route}-{n}",
                "trace_id": f"t-{n}",
                "observed_at": (START + minute * MINUTE).isoformat(),
                "route": route,
                "versions": {"model": model},
                "claims": [{"verdict": v} for v in verdicts],
                **({"sampling": {"rate": rate}} if rate else {}),
            }
        )
    )


def test_the_store_selects_an_slos_routes_and_versions_and_keeps_the_weights(store):
    ok, bad = ["supported"] * 4, ["supported", "supported", "supported", "contradicted"]
    events = [event(i, "billing-faq", i % 3, ok) for i in range(20)]
    events += [event(100 + i, "billing-refunds", 1, bad, model="gen-2026-10", rate=0.5) for i in range(4)]
    events += [event(200 + i, "shipping-faq", 1, bad) for i in range(9)]  # not billing-*
    events += [event(300 + i, "billing_x", 1, bad) for i in range(9)]  # "_" is no wildcard: not billing-*
    EventWriter(store).write(events)
    rates = RateRepository(store)
    end = START + 5 * MINUTE
    everything = counts_of(rates.slo_sums("billing-*", None, START, end))
    assert (everything.events, everything.claims, everything.failed) == (24, 96, 4)
    assert everything.w_failed == pytest.approx(8.0)  # the four sampled answers stand for eight
    assert everything.rate == pytest.approx(8 / (80 + 32))
    older = counts_of(rates.slo_sums("billing-*", ("model", "gen-2026-1?"), START, end))
    assert older.events == 24
    only_10 = counts_of(rates.slo_sums("billing-*", ("model", "*-10"), START, end))
    assert (only_10.events, only_10.failed) == (4, 4)
    minutes = rates.slo_minutes("billing-*", None, START, end)
    assert [m for m, _ in minutes] == [START, START + MINUTE, START + 2 * MINUTE]
    assert rates.slo_first_minute("billing-*", None) == START
    assert rates.slo_first_minute("nothing-*", None) is None
    slo = Slo("billing", "billing-*", 0.9, 3 * 24 * 60)
    assert budget(everything, slo).spent == pytest.approx((8 / 112) / 0.1)


def test_passes_as_the_live_cycle_runs_them_give_the_backtests_transitions(store):
    # Four hours: one quiet, an hour and a half at 16 times the budget, the rest quiet again.
    events, n = [], 0
    for minute in range(240):
        failing = 60 <= minute < 150
        for _ in range(10):
            verdicts = ["contradicted"] * 3 + ["supported"] if failing else ["supported"] * 4
            events.append(event(n, "billing-faq", minute, verdicts))
            n += 1
    EventWriter(store).write(events)
    rates, alerts = RateRepository(store), alert_repository(store)
    slo = Slo("billing", "billing-*", 0.95, 3 * 24 * 60)  # budget 5%: 75% failed claims burn 15 times it
    end = START + 239 * MINUTE
    once = SloWatch([slo], rates, alerts, lambda: end, lambda s: {"team": "billing"}).step(START, end)
    # Live: the evaluator has evaluated up to a minute that moves on pass by pass, 7 minutes at a time.
    evaluated = [START]
    live = SloWatch([slo], rates, alerts, lambda: evaluated[0], lambda s: {"team": "billing"})
    live.last_minute = START - MINUTE  # as a cycle that ran from the first minute
    seen = []
    while evaluated[0] < end:
        evaluated[0] = min(end, evaluated[0] + 7 * MINUTE)
        seen += live.evaluate(evaluated[0])
    key = [(a.alert_id, a.recorded_state, a.transition_at) for a in once]
    assert key == [(a.alert_id, a.recorded_state, a.transition_at) for a in seen]
    assert [(a.severity, a.recorded_state) for a in once] == [("critical", "firing"), ("critical", "resolved")]
    firing, resolved = once
    assert firing.transition_at == START + 117 * MINUTE  # 15 x k / 60 > 14.4 from the 58th minute at 15 times
    assert resolved.transition_at == START + 150 * MINUTE  # the 5m burn falls to 12 at the first quiet minute
    assert firing.labels == {"service": "claimwatch", "team": "billing", "slo": "billing"}
    assert firing.route == "billing-*" and firing.kind == "slo_burn" and firing.unit == "burn"
    assert alerts.get(firing.alert_id).ends_at == resolved.ends_at  # the live watch stored what it saw
