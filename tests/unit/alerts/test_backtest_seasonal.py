"""`claimwatch backtest` over 72 hours of swinging traffic runs the live detector, seasonal baseline and
mix adjustment included: routes whose base rate only swings ±1 point over the day never fire; the two
that get a +5-point step at hour 64 fire soon after it.

Four routes at 30 answers a minute (±50% diurnal volume, 1-8 claims per answer, intra-answer correlation
0.1), each with its own rate peak hour, 518k events in all (count-only, to keep the file small)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.app.compose import run_backtest
from services.app.settings import Settings
from services.client.simulate import Scenario, generate, write_jsonl
from services.client.simulate.scenario import Regression, Route

# its fixtures take tens of seconds: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

START = datetime(2026, 11, 1, tzinfo=UTC)
HOURS, STEP_HOUR = 72, 64
STEPPED = {"route-0", "route-2"}


@pytest.fixture(scope="module")
def transitions(tmp_path_factory) -> list[dict]:
    families = Scenario.demo().routes[0].families
    routes = tuple(
        Route(
            f"route-{i}",
            per_minute=30.0,
            base_rate=0.08,
            families=families,
            versions={"model": "gen-1", "corpus": "docs@1"},
            rate_swing=0.01,
            rate_peak_hour=3.0 + 6 * i,
        )
        for i in range(4)
    )
    steps = tuple(Regression(name, STEP_HOUR * 60, {"model": "gen-2"}, 0.05) for name in sorted(STEPPED))
    scenario = Scenario(
        routes=routes,
        regressions=steps,
        bad_fraction=0.0,
        duplicate_fraction=0.0,
        late_fraction=0.0,
        textless_fraction=1.0,
    )
    workdir = tmp_path_factory.mktemp("swing")
    write_jsonl(generate(scenario, START, HOURS * 60, seed=5), workdir / "events.jsonl")
    summary = run_backtest(workdir / "events.jsonl", workdir / "alerts.jsonl", Settings())
    assert summary.minutes == HOURS * 60 and summary.events > 400_000
    return [orjson.loads(line) for line in (workdir / "alerts.jsonl").read_bytes().splitlines()]


def test_no_firing_alert_on_a_route_that_only_swings(transitions):
    fired = {t["route"] for t in transitions if t["state"] == "firing"}
    assert fired == STEPPED
    assert not [t for t in transitions if t["kind"] == "mix_shift"]  # the mix never moved


def test_each_step_fires_within_half_an_hour_against_the_time_of_day_expectation(transitions):
    step = START + timedelta(hours=STEP_HOUR)
    for route in STEPPED:
        firing = [t for t in transitions if t["route"] == route and t["state"] == "firing"]
        assert len(firing) == 1
        at = datetime.fromisoformat(firing[0]["at"])
        assert step < at <= step + timedelta(minutes=30), (route, at)
        record = firing[0]
        assert record["rate"] - record["expected"] == pytest.approx(record["delta"])
        assert record["mix_effect"] + record["rate_effect"] == pytest.approx(record["delta"])
        assert record["rate_effect"] >= 0.02  # the step is a regression on the same mix of questions
