"""An events_rejected page's figures agree: dead letters that land after their minute was evaluated are in the store
but not in the alert's count, so the top rule's count must not exceed the alert's "N of M events dead-lettered".
Real chDB store, the live writer and evaluator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest

from services.alerts.lifecycle.kinds import REJECTED_KIND
from services.alerts.lifecycle.records import alert_repository
from services.app.compose import evaluator_for
from services.app.settings import load_settings
from services.client.simulate import Scenario, generate
from services.contract.decode import Decoder, reject
from services.ingest.records import DeadLetter
from services.store.dlq import DeadLetterRepository
from services.store.rates import RateRepository
from services.store.writer import EventWriter

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
MINUTES, BROKEN_FROM = 80, 60
LATE_AT = MINUTES - 1  # the last minute evaluated; its window holds the late ones' minute
SETTINGS = load_settings(None, {"CLAIMWATCH_DRIFT__WATERMARK_SECONDS": "0"}, {})
OFFSETS = count()


def dead_letters(n: int, minute: int, rule: str) -> list[DeadLetter]:
    at = START + timedelta(minutes=minute, seconds=30)
    return [
        DeadLetter(
            "verdicts", 0, next(OFFSETS), b"{}", reject(rule, "$", f"{rule} here"), route="billing-faq", event_time=at
        )
        for _ in range(n)
    ]


@pytest.mark.slow
def test_the_top_rules_count_is_of_the_dead_letters_the_alert_counted(store):
    scenario = Scenario(
        routes=(Scenario.demo().routes[0],), regressions=(), bad_fraction=0.0, duplicate_fraction=0.0, late_fraction=0.0
    )
    decoder, by_minute = Decoder(), {}
    for sim in generate(scenario, START, MINUTES, seed=4):
        by_minute.setdefault(sim.minute, []).append(decoder.decode(sim.raw))
    writer = EventWriter(store)
    evaluator = evaluator_for(
        SETTINGS, RateRepository(store), DeadLetterRepository(store), alert_repository(store), checkpoint=False
    )
    for minute in range(MINUTES):
        refused = []
        if minute >= BROKEN_FROM:  # a producer starts sending the wrong schema: 3 in 4 of its events, one rule
            refused = dead_letters(45, minute, "bad_schema") + dead_letters(5, minute, "not_json")
        if minute == LATE_AT:  # and a partition that lagged delivers two minutes' old ones
            refused += dead_letters(40, minute - 2, "bad_schema")
        writer.write(by_minute.get(minute, []), refused)
        evaluator.evaluate(START + timedelta(minutes=minute + 1, seconds=5))

    (alert,) = [a for a in alert_repository(store).list() if a.kind == REJECTED_KIND]
    d = alert.details
    assert alert.recorded_state == "firing" and d["top_rule"] == "bad_schema"
    since = (START + timedelta(minutes=MINUTES - alert.window)).strftime("%Y-%m-%d %H:%M:%S")
    stored = {
        r["rule"]: r["n"]
        for r in store.query(
            "SELECT rule, count() AS n FROM dlq WHERE event_time >= {t:DateTime64(3)} GROUP BY rule", {"t": since}
        )
    }
    assert sum(stored.values()) > d["rejected"]  # the late ones are in the store's window, not in the alert's count
    assert stored["bad_schema"] > d["rejected"]  # so the store's count of the rule alone would exceed it
    share = stored["bad_schema"] / sum(stored.values())
    assert d["top_rule_count"] == round(share * d["rejected"]) <= d["rejected"]
