"""The route bound's alert (issue 49): ``route_cardinality`` fires on route ``*`` while events of new routes are
refused, names the producer creating them, and resolves once refusals stop; on the real chDB engine through the
ingest step, and on every surface that shows it (notification, CLI, page)."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from fastapi.testclient import TestClient

from services.alerts.lifecycle.kinds import CARDINALITY_KIND, FLEET_ROUTE
from services.alerts.notify.payloads import ALERTNAMES
from services.alerts.notify.summary import description, summary
from services.api.app import create_api
from services.app.cli.alerts import alert_fields
from services.app.compose import open_components
from services.app.settings import Settings
from services.core.clock import utcnow
from services.core.command import cli_command
from services.ingest.ingestor import RawMessage

PRODUCERS = {  # versions -> the routes it sends, each how many times
    "known": ({"model": "gen-1"}, ["billing-faq", "parcel-status"], 3),
    "bug": ({"verifier": "nli@3", "model": "gen-9"}, [f"req-{i:04d}" for i in range(12)], 2),
    "other": ({"model": "gen-2"}, ["r-1", "r-2", "r-3"], 1),
}


@pytest.fixture()
def components(tmp_path):
    c = open_components(Settings(clickhouse=f"chdb:{tmp_path / 'ch'}", routes={"max_active": 2}))
    yield c
    c.close()


def traffic(now) -> list[RawMessage]:
    out = []
    for name, (versions, routes, times) in PRODUCERS.items():
        for route in routes:
            for n in range(times):
                event = {
                    "schema": "claimwatch.verdict/v1",
                    "event_id": f"{name}-{route}-{n}",
                    "trace_id": "t",
                    "observed_at": (now - timedelta(minutes=2)).isoformat(),
                    "route": route,
                    "answer": {"action": "served"},
                    "versions": versions,
                    "claims": [{"verdict": "supported"}],
                }
                out.append(RawMessage("verdicts", 0, len(out), orjson.dumps(event), route.encode()))
    return out


@pytest.mark.slow
def test_refused_routes_fire_one_alert_naming_the_producer_then_it_resolves(components):
    now = utcnow()
    outcome = components.ingestor().process(traffic(now), now)
    assert len(outcome.dead) == 12 * 2 + 3 and {d.rejection.rule for d in outcome.dead} == {"route.limit"}
    watch = components.cardinality_watch()

    [fired] = watch.evaluate(now + timedelta(seconds=5))
    assert (fired.route, fired.kind, fired.severity, fired.recorded_state) == (
        FLEET_ROUTE,
        CARDINALITY_KIND,
        "critical",
        "firing",
    )
    d = fired.details
    assert (d["refused_events"], d["refused_routes"], d["max_active"]) == (27, 15, 2)
    assert d["sources"][0] == {
        "source": "verifier=nli@3, model=gen-9",
        "events": 24,
        "routes": 12,
        "example": "req-0000",
    }
    assert (
        d["sources"][1]["source"] == "model=gen-2" and len(d["sources"]) == 2
    )  # the admitted producer refused nothing
    assert components.repos.alerts.transitions(fired.alert_id)[-1]["state"] == "firing"

    assert watch.evaluate(now + timedelta(minutes=1)) == [] and list(watch.open) == [FLEET_ROUTE]  # still firing

    assert ALERTNAMES[CARDINALITY_KIND] == "ClaimRouteCardinality"
    assert summary(fired) == (
        "every route: 27 events of 15 new routes refused over routes.max_active (2); most from "
        "verifier=nli@3, model=gen-9 (24 events, 12 routes, e.g. 'req-0000') in 10 min"
    )
    also = "model=gen-2 (3 events, 3 routes, e.g. 'r-1')"
    assert f"Also from: {also}." in description(fired) and "claimwatch dlq --route ''" in description(fired)

    client = TestClient(create_api(components))
    shown = client.get(f"/api/alerts/{fired.alert_id}").json()
    fields = dict(alert_fields(shown, now))
    assert (
        fields["refused"].startswith("27 events of 15 new routes refused")
        and fields["list them"] == f"{cli_command()} dlq --route ''"
    )
    assert fields["also from"] == [also]
    page = client.get("/alerts").text
    assert "27 events of 15 new routes refused over routes.max_active (2)" in page
    assert f"Also from: {also}".replace("'", "&#39;") in page  # the same phrase on every surface
    assert f'<a href="/">{FLEET_ROUTE}</a>' in page  # every route: the overview, not a route page
    [refused] = [r for r in client.get("/api/dlq", params={"route": ""}).json() if r["reason"] == "route.limit"]
    assert refused["count"] == 27  # the command the alert prints lists exactly these

    [resolved] = watch.evaluate(now + timedelta(minutes=11))
    assert resolved.alert_id == fired.alert_id and resolved.recorded_state == "resolved" and watch.open == {}
    assert watch.evaluate(now + timedelta(minutes=12)) == []
