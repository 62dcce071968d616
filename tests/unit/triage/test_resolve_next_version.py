"""Resolving in the next version records the corpus, model and prompt versions current on the issue's dominant
route (the newest claim stored there); resolving outright records none, so any recurrence regresses (the tracker's
side: tests/unit/clustering/test_track.py)."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest

from clustering.issue import RESOLVED
from services.contract.decode import Decoder
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter
from tests.support.triage_world import T0, an_issue, triage_world


def event(event_id: str, at, versions: dict):
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": event_id,
                "trace_id": f"tr-{event_id}",
                "versions": versions,
                "observed_at": at.isoformat(),
                "route": "billing-faq",
                "query": {"text": f"question {event_id}"},
                "claims": [{"text": f"claim {event_id}", "verdict": "contradicted"}],
            }
        )
    )


@pytest.fixture()
def world(tmp_path, store_templates):
    with triage_world(tmp_path, store_templates) as (components, clock):
        RetentionKeeper(components.store).apply(KEEP_EVERYTHING)  # fixed event times must not age past a TTL
        EventWriter(components.store).write(
            [
                event("e-old", T0 - timedelta(hours=2), {"model": "gen-1", "prompt": "p2", "verifier": "v8"}),
                event("e-new", T0 - timedelta(hours=1), {"model": "gen-2", "prompt": "p3", "verifier": "v9"}),
            ],
            [],
        )
        an_issue(components, "iss-a")
        yield components


def test_resolving_in_the_next_version_records_the_versions_current_on_its_route(world):
    shown = world.triage.resolve("iss-a", "sam", in_next_version=True)
    record = world.repos.issues.get("iss-a")
    assert shown["state"] == RESOLVED and shown["resolved_in"] == {"model": "gen-2", "prompt": "p3"}
    assert record.resolved_in == {"model": "gen-2", "prompt": "p3"}  # the verifier's version is not a release
    assert record.history[-1]["event"] == "resolved" and record.history[-1]["by"] == "sam"
    assert record.history[-1]["in_next_version"] == {"model": "gen-2", "prompt": "p3"}


def test_resolving_outright_waits_for_no_version(world):
    world.triage.resolve("iss-a", "sam")
    assert world.repos.issues.get("iss-a").resolved_in == {}
