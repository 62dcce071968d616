"""Live, minute by minute on the wall clock (issue 21): a route whose verifier stops pages route_silent within ten
minutes, while a stopped route holds the other routes' watermark back for only a few minutes. Real chDB store,
the live writer and evaluator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.alerts.lifecycle.kinds import SILENT_KIND
from services.alerts.lifecycle.records import alert_repository
from services.app.compose import evaluator_for
from services.app.settings import load_settings
from services.client.simulate import Scenario, generate
from services.contract.decode import Decoder
from services.store.dlq import DeadLetterRepository
from services.store.rates import RateRepository
from services.store.writer import EventWriter

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
MINUTES, STOP_AT = 150, 120
SETTINGS = load_settings(None, {"CLAIMWATCH_DRIFT__WATERMARK_SECONDS": "0"}, {})


@pytest.mark.slow
def test_a_route_that_stops_sending_live_pages_within_ten_minutes(store):
    demo = Scenario.demo()
    scenario = Scenario(
        routes=(demo.routes[0], demo.routes[2]),
        regressions=(),
        bad_fraction=0.0,
        duplicate_fraction=0.0,
        late_fraction=0.0,
    )
    decoder = Decoder()
    by_minute: dict[int, list] = {}
    for sim in generate(scenario, START, MINUTES, seed=9):
        event = decoder.decode(sim.raw)
        if not (event.route == "hr-policy" and sim.minute >= STOP_AT):
            by_minute.setdefault(sim.minute, []).append(event)
    writer = EventWriter(store)
    evaluator = evaluator_for(
        SETTINGS, RateRepository(store), DeadLetterRepository(store), alert_repository(store), checkpoint=False
    )
    fired = None
    for minute in range(MINUTES):
        writer.write(by_minute.get(minute, []))
        now = START + timedelta(minutes=minute + 1, seconds=5)  # each minute lands as the next one starts
        for alert in evaluator.evaluate(now):
            if (alert.route, alert.kind, alert.recorded_state) == ("hr-policy", SILENT_KIND, "firing"):
                fired = fired or now
    assert fired is not None and fired - (START + timedelta(minutes=STOP_AT)) <= timedelta(minutes=10), fired
    others = [a for a in alert_repository(store).list() if a.route != "hr-policy" or a.kind != SILENT_KIND]
    assert others == []  # billing-faq kept sending: nothing else
