"""The route bound as a plain object, and in the ingest step: new routes past the limit are dead-lettered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from services.contract.decode import Decoder
from services.ingest.ingestor import Ingestor, RawMessage
from services.ingest.routes import ROUTE_LIMIT, RouteGuard

NOW = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)
EVENT = {
    "schema": "claimwatch.verdict/v1",
    "trace_id": "t",
    "observed_at": "2026-11-21T09:14:03.512Z",
    "answer": {"action": "served"},
    "versions": {"model": "gen-7", "verifier": "nli@2"},
    "claims": [{"verdict": "supported", "text": "x"}],
}


def test_a_full_guard_refuses_new_routes_keeps_taking_known_ones_and_frees_quiet_ones():
    guard = RouteGuard(2, timedelta(hours=1))
    assert guard.admit("a", NOW) and guard.admit("b", NOW)
    assert not guard.admit("c", NOW) and len(guard) == 2  # refused, and not counted
    assert guard.admit("a", NOW + timedelta(minutes=50))
    assert not guard.admit("c", NOW + timedelta(minutes=59))
    assert guard.admit("c", NOW + timedelta(minutes=61))  # b has been quiet for over an hour: its place is free
    assert set(guard.last_seen) == {"a", "c"}


def test_a_guard_seeded_with_more_routes_than_its_limit_holds_only_the_limit():
    guard = RouteGuard(3, timedelta(hours=1), [f"r{i}" for i in range(10)], NOW)
    assert len(guard) == 3 and not guard.admit("new", NOW)


def test_events_of_routes_past_the_limit_are_dead_lettered_under_no_route_naming_their_producer():
    events = [{**EVENT, "event_id": f"e{i}", "route": f"req-{i}"} for i in range(5)]
    message = RawMessage(
        "verdicts", 0, 3, orjson.dumps({"schema": "claimwatch.verdicts/v1", "events": events}), b"req-0"
    )
    ingestor = Ingestor(None, Decoder(), routes=RouteGuard(2, timedelta(hours=24)))
    batch = ingestor.split([message], NOW)
    assert [key.route for key in batch.keys] == ["req-0", "req-1"]
    assert [(d.index, d.rejection.rule, d.counted_route) for d in batch.dead] == [
        (2, ROUTE_LIMIT, ""),
        (3, ROUTE_LIMIT, ""),
        (4, ROUTE_LIMIT, ""),
    ]
    reason = batch.dead[0].rejection.reason
    assert "'req-2'" in reason and "routes.max_active (2)" in reason and "verifier=nli@2, model=gen-7" in reason
