"""`make demo` raises its alert at any hour: its settings warm the baseline at the quietest time of day.

The demo sends 300 simulated minutes ending now, a new model on billing-faq at minute 255 and a
corpus update on parcel-status at 265. The baseline holds only finished wall-clock hours, and the
simulator's volume follows the day (a trough at 02:00 UTC), so the worst case is a run at the trough
whose regression starts at the last minute of an hour. The live evaluator walks that stream with the
demo's own settings (``DEMO_ENV``) and with the product's default warm-up.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.app.compose import evaluator_for, open_components
from services.app.settings import load_settings
from services.client.demo import CORPUS_CHANGE_AT, DEMO_ENV, HISTORY_MINUTES, REGRESSION_AT
from services.client.simulate import Scenario, generate
from services.contract.decode import validate_event
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter

# The regression's first minute is 02:59, in the volume's trough.
START = datetime(2026, 11, 21, 2, 59, tzinfo=UTC) - timedelta(minutes=REGRESSION_AT)
NOW = START + timedelta(minutes=HISTORY_MINUTES)


@pytest.fixture(scope="module")
def events():
    scenario = Scenario.demo(regression_at=REGRESSION_AT, corpus_change_at=CORPUS_CHANGE_AT)
    return [
        validate_event(s.event)
        for s in generate(scenario, START, HISTORY_MINUTES, seed=3)
        if s.event is not None and not s.duplicate
    ]


def firing_routes(tmp_path, events, env: dict[str, str]) -> set[str]:
    settings = load_settings(None, {**env, "CLAIMWATCH_CLICKHOUSE": f"chdb:{tmp_path / 'ch'}"}, {})
    components = open_components(settings)
    try:
        RetentionKeeper(components.store).apply(KEEP_EVERYTHING)  # fixed event times must not age past a TTL
        EventWriter(components.store).write(events, [])
        evaluator_for(
            settings, components.repos.rates, components.repos.dead_letters, components.repos.alerts, checkpoint=False
        ).evaluate(NOW)
        alerts = components.repos.alerts.list()
        return {a.route for a in alerts if a.recorded_state == "firing" and a.kind != "mix_shift"}
    finally:
        components.close()


def test_the_demo_settings_fire_both_injected_regressions_at_the_quietest_hour(tmp_path, events):
    assert firing_routes(tmp_path, events, DEMO_ENV) == {"billing-faq", "parcel-status"}


def test_the_default_warm_up_would_leave_the_demo_silent_at_that_hour(tmp_path, events):
    env = {k: v for k, v in DEMO_ENV.items() if k != "CLAIMWATCH_DRIFT__DETECTOR__MIN_BASELINE_CLAIMS"}
    assert "billing-faq" not in firing_routes(tmp_path, events, env)
