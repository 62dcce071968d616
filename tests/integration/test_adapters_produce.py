"""`claimwatch produce --from judge-card` (a subprocess) against the real embedded broker (Tansu):
the judge card exactly as the judge emits it (no id, no time) reaches the topic, and a consumer
reads back the same deterministic event ids `claimwatch convert` gives."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from services.app.broker import EmbeddedBroker, create_topics
from services.contract.decode import validate_event
from services.contract.model import ENVELOPE_SCHEMA
from tests.support.envelopes import events_of
from tests.support.topics import read_topic

PARTITIONS = 2
CARDS = [
    {
        "claims": [{"text": "The refund arrives the same day.", "label": "unsupported", "evidence_phrase": None}],
        "hallucination_rate": 1.0,
        "decision_basis": "retrieved policy pol-17",
    },
    {
        "claims": [{"text": "The refund arrives the same day.", "label": "unsupported", "evidence_phrase": None}],
        "hallucination_rate": 1.0,
        "decision_basis": "retrieved policy pol-17",
    },
    {
        "claims": [
            {
                "text": "A 5% fee is deducted.",
                "label": "supported",
                "evidence_phrase": "A processing fee of 5% applies.",
            }
        ],
        "hallucination_rate": 0.0,
        "decision_basis": "retrieved policy pol-17",
    },
]


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as b:
        yield b


def claimwatch(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "services.app.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


def test_produce_from_judge_card_sends_the_ids_convert_gives(broker, tmp_path):
    cards = tmp_path / "cards.jsonl"
    cards.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in CARDS))
    create_topics(broker.bootstrap, ["adapters.verdicts"], PARTITIONS)
    converted = claimwatch("convert", "--from", "judge-card", str(cards), "--route", "billing-faq")
    ids = [orjson.loads(line)["event_id"] for line in converted.stdout.splitlines()]
    assert len(set(ids)) == 3

    sent = claimwatch(
        "produce",
        "--from",
        "judge-card",
        str(cards),
        "--route",
        "billing-faq",
        "--observed-at",
        "2026-11-21T09:14:03Z",
        "--kafka",
        broker.bootstrap,
        "--topic-prefix",
        "adapters",
    )
    assert "sent 3 events to adapters.verdicts" in " ".join(sent.stderr.split())
    messages = read_topic(broker.bootstrap, "adapters.verdicts", PARTITIONS)
    # One route: batch envelopes, one unless the loaded machine paused the producer past its 20 ms linger.
    assert all(orjson.loads(m.value)["schema"] == ENVELOPE_SCHEMA for m in messages)
    events = [e for m in messages for e in events_of(m.value)]
    assert sorted(e["event_id"] for e in events) == sorted(ids)
    assert {e["observed_at"] for e in events} == {"2026-11-21T09:14:03Z"}
    assert {m.key for m in messages} == {b"billing-faq"}
    for event in events:
        validate_event(event)

    # Without --observed-at: the same ids again (re-sent, the store counts them once), and a warning.
    again = claimwatch(
        "produce",
        "--from",
        "judge-card",
        str(cards),
        "--route",
        "billing-faq",
        "--kafka",
        broker.bootstrap,
        "--topic-prefix",
        "adapters",
    )
    assert "warning: 3 records carry no time" in " ".join(again.stderr.split())
    events = [e for m in read_topic(broker.bootstrap, "adapters.verdicts", PARTITIONS) for e in events_of(m.value)]
    assert sorted(e["event_id"] for e in events) == sorted(ids + ids)


@pytest.mark.parametrize("options, messages", [((), 3), (("--no-batch",), 5)], ids=["batched", "no-batch"])
def test_produce_replay_batches_per_route_unless_told_not_to(broker, tmp_path, options, messages):
    topic_prefix = f"replay{len(options)}"
    lines = [
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": f"r{i}",
                "trace_id": f"t{i}",
                "observed_at": "2026-11-21T09:14:03Z",
                "route": route,
                "claims": [],
            }
        )
        for i, route in enumerate(["billing-faq", "returns", "billing-faq", "returns"])
    ]
    path = tmp_path / "replay.jsonl"
    path.write_bytes(b"\n".join(lines[:2] + [b"{not json"] + lines[2:]) + b"\n")
    create_topics(broker.bootstrap, [f"{topic_prefix}.verdicts"], PARTITIONS)
    sent = claimwatch("produce", str(path), *options, "--kafka", broker.bootstrap, "--topic-prefix", topic_prefix)
    assert f"sent 5 lines in {messages} messages" in " ".join(sent.stderr.split())
    received = read_topic(broker.bootstrap, f"{topic_prefix}.verdicts", PARTITIONS)
    if options:
        assert sorted(m.value for m in received) == sorted(lines + [b"{not json"])
        return
    by_key = {m.key: m.value for m in received}  # the bad line goes alone, the rest in one envelope per route
    assert by_key[None] == b"{not json"
    assert [e["event_id"] for e in events_of(by_key[b"billing-faq"])] == ["r0", "r2"]
    assert [e["event_id"] for e in events_of(by_key[b"returns"])] == ["r1", "r3"]
