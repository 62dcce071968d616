"""A batch the store refuses for what it holds, on the real engine (a CHECK constraint it enforces): the events it
refuses are found and dead-lettered with its message, the rest stored once, and nothing loops."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from services.contract.decode import Decoder
from services.ingest.ingestor import STORE_REJECTED, Ingestor, RawMessage
from services.store.writer import EventWriter

NOW = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)
EVENT = {
    "schema": "claimwatch.verdict/v1",
    "observed_at": "2026-11-21T09:14:03.512Z",
    "route": "billing-faq",
    "answer": {"action": "served"},
    "claims": [{"verdict": "contradicted", "text": "x"}, {"verdict": "supported"}],
}
POISON = "CHECK NOT startsWith(trace_id, 'poison')"


def envelope(offset: int, ids: list[str]) -> RawMessage:
    events = [{**EVENT, "event_id": i, "trace_id": "poison" if i.startswith("p") else "t"} for i in ids]
    return RawMessage(
        "verdicts", 0, offset, orjson.dumps({"schema": "claimwatch.verdicts/v1", "events": events}), b"billing-faq"
    )


def stored_ids(store) -> set[str]:
    return {r["event_id"] for r in store.query("SELECT event_id FROM events FINAL")}


@pytest.mark.slow
def test_the_refused_events_are_dead_lettered_with_the_stores_reason_and_the_rest_stored_once(store):
    store.command(f"ALTER TABLE events ADD CONSTRAINT no_poison {POISON}")
    ids = [f"e{i}" for i in range(60)]
    ids[7], ids[45], ids[46] = "p7", "p45", "p46"
    messages = [envelope(0, ids[:30]), envelope(1, ids[30:])]
    ingestor = Ingestor(EventWriter(store), Decoder())

    outcome = ingestor.process(messages, NOW)

    assert [(d.offset, d.index, d.rejection.rule) for d in outcome.dead] == [
        (0, 7, STORE_REJECTED),
        (1, 15, STORE_REJECTED),
        (1, 16, STORE_REJECTED),
    ]
    assert "no_poison" in outcome.dead[0].rejection.reason  # the store's own words: what to fix
    assert orjson.loads(outcome.dead[0].raw)["event_id"] == "p7"  # the event itself, to replay once fixed
    assert stored_ids(store) == {i for i in ids if i.startswith("e")}
    rows = store.query("SELECT rule, count() AS n FROM dlq FINAL GROUP BY rule")
    assert rows == [{"rule": STORE_REJECTED, "n": 3}]
    events = store.query("SELECT sum(events) AS n FROM rate_minute WHERE dim = ''")[0]["n"]
    assert events == 57

    again = ingestor.process(messages, NOW)  # redelivered, as after a kill mid-split: nothing twice
    assert (again.result.inserted, len(again.dead)) == (0, 3)
    assert store.query("SELECT sum(events) AS n FROM rate_minute WHERE dim = ''")[0]["n"] == 57
    assert store.query("SELECT count() AS n FROM dlq FINAL")[0]["n"] == 3
