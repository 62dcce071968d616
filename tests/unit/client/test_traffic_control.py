"""The demo's live traffic control: `claimwatch demo-traffic stop|break|resume ROUTE` and the simulator reading it."""
from __future__ import annotations

import orjson

from services.client.simulate_run import UNREAD_SCHEMA, TrafficControl

EVENT = orjson.dumps({"schema": "claimwatch.verdict/v1", "route": "billing-faq", "event_id": "e1"})


def test_a_stopped_route_sends_nothing_and_a_broken_one_an_unread_contract_version(tmp_path):
    writer, reader = TrafficControl(tmp_path / "control.json"), TrafficControl(tmp_path / "control.json")
    reader.refresh()
    assert reader.apply(b"billing-faq", EVENT) == EVENT  # no file: nothing changes
    writer.change("billing-faq", "stop")
    reader.refresh()
    assert reader.apply(b"billing-faq", EVENT) is None and reader.apply(b"parcel-status", b"x") == b"x"
    writer.change("billing-faq", "break")  # a route is either stopped or broken
    reader.refresh()
    assert orjson.loads(reader.apply(b"billing-faq", EVENT))["schema"] == UNREAD_SCHEMA
    assert reader.apply(b"billing-faq", b"not json") == b"not json"  # bad input stays as it was
    writer.change("billing-faq", "resume")
    reader.refresh()
    assert (reader.stopped, reader.broken) == (frozenset(), frozenset())


def test_a_half_written_file_keeps_what_was_in_force(tmp_path):
    control = TrafficControl(tmp_path / "control.json")
    control.change("a", "stop")
    (tmp_path / "control.json").write_bytes(b'{"stopped": ["a"')
    control.refresh()
    assert control.stopped == frozenset({"a"})
