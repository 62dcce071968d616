"""`claimwatch backtest` watches the input too (issue 21): at hour 6, for two hours, three routes stop sending (a
verifier outage) and three send only events of an unknown contract version (a producer's breaking change).
Each of the six pages within ten minutes, with its own kind, and resolves when its input is back; nothing else
fires. Eight routes at 20 answers a minute (±50% daily volume), nine hours, count-only events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.alerts.lifecycle.kinds import REJECTED_KIND, SILENT_KIND
from services.app.compose import run_backtest
from services.app.settings import Settings
from services.client.simulate import Scenario, generate
from services.client.simulate.scenario import Route

# its fixtures take tens of seconds: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

START = datetime(2026, 11, 1, 2, tzinfo=UTC)
HOURS, BREAK_AT, BREAK_MINUTES = 9, 6 * 60, 120
SILENT = {"route-0", "route-1", "route-2"}
BROKEN = {"route-3", "route-4", "route-5"}


@pytest.fixture(scope="module")
def transitions(tmp_path_factory) -> list[dict]:
    families = Scenario.demo().routes[0].families
    routes = tuple(
        Route(f"route-{i}", per_minute=20.0, base_rate=0.08, families=families, versions={"model": "gen-1"})
        for i in range(8)
    )
    scenario = Scenario(
        routes=routes,
        regressions=(),
        bad_fraction=0.0,
        duplicate_fraction=0.0,
        late_fraction=0.0,
        textless_fraction=1.0,
    )
    workdir = tmp_path_factory.mktemp("input-health")
    path = workdir / "events.jsonl"
    outage = range(BREAK_AT, BREAK_AT + BREAK_MINUTES)
    with open(path, "wb") as out:
        for sim in generate(scenario, START, HOURS * 60, seed=8):
            route, minute = sim.event["route"], sim.minute
            if route in SILENT and minute in outage:
                continue  # the verifier is down: nothing is sent
            if route in BROKEN and minute in outage:  # a contract version nobody reads
                out.write(orjson.dumps({**sim.event, "schema": "claimwatch.verdict/v2"}) + b"\n")
                continue
            out.write(sim.raw + b"\n")
    summary = run_backtest(path, workdir / "alerts.jsonl", Settings())
    assert summary.rejected > 0
    return [orjson.loads(line) for line in (workdir / "alerts.jsonl").read_bytes().splitlines()]


def at(t: dict) -> datetime:
    return datetime.fromisoformat(t["at"])


def test_each_broken_route_pages_its_own_kind_within_ten_minutes(transitions):
    broke = START + timedelta(minutes=BREAK_AT)
    firing = {(t["route"], t["kind"]): t for t in transitions if t["state"] == "firing"}
    assert set(firing) == {(r, SILENT_KIND) for r in SILENT} | {(r, REJECTED_KIND) for r in BROKEN}
    for (route, kind), t in firing.items():
        assert broke < at(t) <= broke + timedelta(minutes=10), (route, kind, t["at"])
        if kind == SILENT_KIND:
            assert t["unit"] == "per_minute" and t["rate"] == 0 and t["expected"] > 10
        else:
            assert t["rate"] >= 0.2 and t["details"]["top_rule"]  # of the window, part of it from before
            assert "dlq_command" not in t["details"]  # each surface spells the command as its reader runs it


def test_each_resolves_once_its_input_is_back(transitions):
    back = START + timedelta(minutes=BREAK_AT + BREAK_MINUTES)
    resolved = {(t["route"], t["kind"]): t for t in transitions if t["state"] == "resolved"}
    assert set(resolved) == {(r, SILENT_KIND) for r in SILENT} | {(r, REJECTED_KIND) for r in BROKEN}
    for t in resolved.values():
        assert back <= at(t) <= back + timedelta(minutes=10), t
