"""Where a window ends, for every reader at once: the rates API, the overview, the route page and the
Prometheus gauges. One answer dated a month ahead (a producer's clock gone wrong) is stored, but moves no
window: every other route stays on the page, and no window ends after the wall clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from services.api.app import create_api
from services.api.security import ApiPolicy
from services.app.compose import build
from services.app.settings import Settings
from services.contract.decode import Decoder
from services.store.writer import EventWriter

NOW = datetime(2026, 11, 21, 9, 0, 20, tzinfo=UTC)
LIVE = {"billing-faq", "parcel-status"}


def event(event_id: str, route: str, at: datetime, verdicts: list[str]):
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": event_id,
                "trace_id": f"tr-{event_id}",
                "observed_at": at.isoformat(),
                "route": route,
                "answer": {"action": "served"},
                "claims": [{"verdict": v} for v in verdicts],
            }
        )
    )


@pytest.fixture
def client(store):
    live = [
        event(
            f"{route}-{i}",
            route,
            NOW - timedelta(minutes=20 - i),
            ["contradicted" if i % 4 else "supported", "supported"],
        )
        for route in sorted(LIVE)
        for i in range(20)
    ]
    EventWriter(store).write([*live, event("ahead-1", "ahead", NOW + timedelta(days=30), ["contradicted"])])
    return TestClient(create_api(build(Settings(), store, clock=lambda: NOW), ApiPolicy(), now=lambda: NOW))


def gauge_routes(client: TestClient) -> set[str]:
    return {
        s.labels["route"]
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for s in family.samples
        if s.name == "claimwatch_route_hallucination_rate"
    }


@pytest.mark.slow
def test_an_answer_dated_a_month_ahead_hides_no_route_and_moves_no_window(client):
    for window in ("30m", "24h"):
        assert {r["route"] for r in client.get("/api/rates", params={"window": window}).json()} == LIVE
    overview = client.get("/").text
    assert all(f'href="/routes/{route}"' in overview for route in LIVE) and 'href="/routes/ahead"' not in overview
    assert gauge_routes(client) == LIVE

    newest = "2026-11-21T08:59:00Z"  # the newest minute stored up to the clock
    detail = client.get("/api/routes/billing-faq", params={"window": "30m"}).json()
    assert detail["end"] == newest and detail["current"]["end"] == newest and detail["totals"]["claims"] == 40
    ahead = client.get("/api/routes/ahead").json()  # seen, but only ahead of the clock: its range ends at the clock
    assert ahead["end"] == "2026-11-21T09:00:00Z" and ahead["totals"]["claims"] == 0
    assert "ahead" in {r["route"] for r in client.get("/api/rates", params={"window": "all"}).json()}
