"""EnvelopeBatcher (per-key batches, limits, linger) and the replay packing, without a broker."""

from __future__ import annotations

import time

import orjson
import pytest

from services.client.batching import EnvelopeBatcher, LingeringBatcher, envelope
from services.client.produce import replay_messages
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent


def event(i: int, route: str = "billing-faq", text: str = "") -> bytes:
    return orjson.dumps(
        {
            "schema": "claimwatch.verdict/v1",
            "event_id": f"e{i}",
            "trace_id": f"t{i}",
            "observed_at": "2026-11-21T09:00:00Z",
            "route": route,
            "answer": {"text": text},
            "claims": [],
        }
    )


def test_batches_close_at_max_events_per_key():
    batcher = EnvelopeBatcher(max_events=3, linger_seconds=1.0)
    ready = [b for i in range(7) for b in batcher.add(b"a" if i % 2 else b"b", event(i), i, now=0.0)]
    assert [(b.key, b.items) for b in ready] == [(b"b", [0, 2, 4]), (b"a", [1, 3, 5])]
    assert len(batcher) == 1
    assert [(b.key, b.items) for b in batcher.drain()] == [(b"b", [6])]


def test_batches_close_before_passing_max_bytes_and_decode_as_envelopes():
    batcher = EnvelopeBatcher(max_bytes=1000)
    values = [event(i, text="x" * 200) for i in range(10)]
    ready = [b for i, v in enumerate(values) for b in batcher.add(b"k", v, i, 0.0)] + batcher.drain()
    assert all(len(b.message()) <= 1000 for b in ready) and [i for b in ready for i in b.items] == list(range(10))
    decoded = [e for b in ready for _, e in Decoder().decode_message(b.message())]
    assert [e.event_id for e in decoded] == [f"e{i}" for i in range(10)]


def test_an_event_too_large_for_any_envelope_goes_alone_and_a_batch_of_one_is_a_plain_event():
    batcher = EnvelopeBatcher(max_bytes=300)
    big = event(1, text="x" * 400)
    [alone] = batcher.add(b"k", big, "big", 0.0)
    assert alone.message() == big and len(batcher) == 0
    batcher.add(b"k", event(2), "small", 0.0)
    [one] = batcher.drain()
    assert isinstance(Decoder().decode(one.message()), VerdictEvent)


def test_linger_makes_batches_due_by_their_age():
    batcher = EnvelopeBatcher(linger_seconds=0.05)
    assert batcher.next_due() is None
    batcher.add(b"a", event(1), 1, now=10.0)
    batcher.add(b"b", event(2), 2, now=10.03)
    assert batcher.next_due() == pytest.approx(10.05)
    assert batcher.due(10.04) == []
    assert [b.key for b in batcher.due(10.05)] == [b"a"]
    assert [b.key for b in batcher.due(10.2)] == [b"b"] and batcher.next_due() is None


@pytest.mark.parametrize(
    "kwargs", [{"max_events": 0}, {"max_events": 1001}, {"max_bytes": (1 << 20) + 1}, {"linger_seconds": -1}]
)
def test_limits_outside_the_contract_are_refused(kwargs):
    with pytest.raises(ValueError):
        EnvelopeBatcher(**kwargs)


def test_replay_packs_object_lines_per_route_and_sends_the_rest_alone():
    already = envelope([event(9)])
    lines = [event(1), b"{not json", event(2, route="returns"), b"[1]", event(3), already]
    messages = list(replay_messages(lines, EnvelopeBatcher()))
    assert (None, b"{not json", 1) in messages and (None, b"[1]", 1) in messages
    assert (b"billing-faq", already, 1) in messages  # an envelope is not nested in another
    packed = {key: value for key, value, n in messages if n == 2}
    assert packed == {b"billing-faq": envelope([event(1), event(3)])}
    assert (b"returns", event(2, route="returns"), 1) in messages
    assert sum(n for _, _, n in messages) == len(lines)
    assert list(replay_messages(lines)) == [
        (k, line, 1) for k, line in zip([b"billing-faq", None, b"returns", None, b"billing-faq", b"billing-faq"], lines)
    ]


def test_lingering_batcher_hands_on_a_batch_once_its_linger_is_up_and_flushes_the_rest():
    sent = []
    lingering = LingeringBatcher(EnvelopeBatcher(linger_seconds=0.01), lambda batches, _: sent.extend(batches))
    try:
        lingering.add(b"a", event(1), 1)
        lingering.add(b"a", event(2), 2)
        deadline = time.monotonic() + 5
        while not sent and time.monotonic() < deadline:
            time.sleep(0.005)
        assert [(b.key, b.items) for b in sent] == [(b"a", [1, 2])]
        lingering.batcher.linger_seconds = 60
        lingering.add(b"b", event(3), 3)
        lingering.flush()
        assert [(b.key, b.items) for b in sent] == [(b"a", [1, 2]), (b"b", [3])]
    finally:
        lingering.close()
