"""VerdictProducer against the real embedded broker (Tansu), read back with aiokafka,
and stored through the real chDB engine."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.app.broker import EmbeddedBroker, create_topics
from services.client.producer import (
    AsyncVerdictProducer,
    DeliveryError,
    EventPreparer,
    ProducerError,
    VerdictProducer,
    build_event,
)
from services.contract.decode import ContractError, Decoder, Rejection, validate_event
from services.store.backends import ChdbStore
from services.store.migrate import migrate
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter
from tests.support.envelopes import events_of
from tests.support.topics import read_topic
from tests.support.waiting import wait_until

PARTITIONS = 4
ROUTES = ["billing-faq", "parcel-status", "returns", "plans/annual", "search:v2"]
VERDICT_CYCLE = ["supported", "supported", "unsupported", "contradicted", "supported", "overreach"]
T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = ChdbStore(tmp_path_factory.mktemp("producer-store"))
    migrate(s)
    RetentionKeeper(s).apply(KEEP_EVERYTHING)  # fixed event times must not age past a TTL
    yield s
    s.close()


@pytest.fixture
def topic(broker, request):
    name = "verdicts." + request.node.name.replace("[", ".").replace("]", "")[:80]
    create_topics(broker.bootstrap, [name], PARTITIONS)
    return name


def make_event(i: int, *, with_id: bool = True) -> dict:
    event = {
        "trace_id": f"tr-{i:06d}",
        "observed_at": (T0 + timedelta(seconds=i)).isoformat(),
        "route": ROUTES[i % len(ROUTES)],
        "answer": {"action": "served"},
        "claims": [
            {"claim_id": f"c{k}", "text": f"claim {k} of answer {i}", "verdict": VERDICT_CYCLE[(i + k) % 6]}
            for k in range(3)
        ],
    }
    if with_id:
        event["event_id"] = f"ev-{i:06d}"
    return event


def read_back(bootstrap: str, topic: str) -> list:
    return read_topic(bootstrap, topic, PARTITIONS)


def stored_claims(store, event_ids: list[str]) -> dict:
    return store.query(
        "SELECT count() AS events, sum(length(verdicts)) AS claims FROM events FINAL "
        "WHERE event_id IN {ids:Array(String)}",
        {"ids": event_ids},
    )[0]


# --- checks that need no broker -------------------------------------------------


def test_preparer_sends_exactly_the_bytes_it_checked():
    out = EventPreparer(new_id=lambda: "generated-1").prepare(make_event(7, with_id=False))
    doc = orjson.loads(out.value)
    assert out.event_id == doc["event_id"] == "generated-1"
    assert doc["schema"] == "claimwatch.verdict/v1"
    assert out.key == b"returns" and out.route == "returns"
    assert not isinstance(Decoder().decode(out.value), Rejection)


def test_preparer_takes_a_verdict_event_and_aware_datetimes():
    event = validate_event({"schema": "claimwatch.verdict/v1", **make_event(1)})
    assert orjson.loads(EventPreparer().prepare(event).value)["event_id"] == "ev-000001"
    aware = {**make_event(2), "observed_at": T0}
    assert orjson.loads(EventPreparer().prepare(aware).value)["observed_at"] == "2026-11-21T09:00:00+00:00"


@pytest.mark.parametrize(
    "change, rule, path",
    [
        ({"claims": [{"verdict": "maybe"}]}, "unknown_verdict", "claims[0].verdict"),
        ({"route": "billing faq"}, "bad_route", "route"),
        ({"observed_at": "2026-11-21T09:00:00"}, "timestamp_without_offset", "observed_at"),
        ({"observed_at": datetime(2026, 11, 21, 9)}, "timestamp_without_offset", "observed_at"),
        ({"claims": [{"verdict": "supported", "score": 1.5}]}, "out_of_range", "claims[0].score"),
        ({"attributes": {f"k{i}": "v" for i in range(33)}}, "attributes.too_many", "attributes"),
        ({"answer": {"text": "x" * (1 << 20)}}, "too_large", "$"),
        ({"claims": [{"verdict": "supported", "text": {1, 2}}]}, "not_json", "$"),
    ],
)
def test_preparer_refuses_with_the_dlq_rule_and_path(change, rule, path):
    with pytest.raises(ContractError) as caught:
        EventPreparer().prepare({**make_event(3), **change})
    assert caught.value.rejection.rule == rule
    assert caught.value.rejection.problems[0].path == path


def test_missing_route_is_refused_naming_the_field():
    event = make_event(4)
    del event["route"]
    with pytest.raises(ContractError) as caught:
        EventPreparer().prepare(event)
    assert (caught.value.rejection.rule, caught.value.rejection.problems[0].path) == ("missing_field", "route")


def test_build_event_checks_and_fills_ids():
    event = build_event(route="billing-faq", trace_id="tr-1", observed_at=T0, claims=[{"verdict": "entailed"}])
    assert event["schema"] == "claimwatch.verdict/v1" and len(event["event_id"]) == 36
    with pytest.raises(ContractError):
        build_event(route="billing-faq", trace_id="tr-1", observed_at=datetime(2026, 1, 1), claims=[])


# --- against the broker ---------------------------------------------------------


def test_ten_thousand_events_are_all_received(broker, topic, store):
    events = [make_event(i) for i in range(10_000)]
    progress = []
    # A long envelope linger: batches close only when full (1000 events) or on flush, whatever the machine's load.
    with VerdictProducer(broker.bootstrap, topic, linger_ms=10, envelope_linger_ms=60_000) as producer:
        report = producer.send_many(events, progress=progress.append)
    assert (report.sent, report.delivered, report.failed, report.refused) == (10_000, 10_000, 0, [])
    assert progress[-1] == 10_000 and len(progress) == 10

    messages = read_back(broker.bootstrap, topic)
    assert len(messages) == 10  # 2000 events per route: two full envelopes each
    ids = [e["event_id"] for m in messages for e in events_of(m.value)]
    assert len(ids) == 10_000 and set(ids) == {e["event_id"] for e in events}
    assert all(m.key == e["route"].encode() for m in messages for e in events_of(m.value))
    # One route's events share one partition.
    partitions = {}
    for m in messages:
        partitions.setdefault(m.key, set()).add(m.partition)
    assert all(len(p) == 1 for p in partitions.values())

    decoded = [event for m in messages for _, event in Decoder().decode_message(m.value)]
    EventWriter(store).write(decoded)
    assert stored_claims(store, ids) == {"events": 10_000, "claims": 30_000}


def test_freezing_the_broker_mid_send_loses_and_duplicates_nothing(broker, topic, store):
    sent_ids = []
    # A short request timeout makes the client time out and retry while the broker is
    # frozen: exactly the case where a non-idempotent producer writes duplicates.
    with VerdictProducer(broker.bootstrap, topic, linger_ms=5, request_timeout_ms=1500) as producer:
        started = time.monotonic()
        for i in range(20_000, 30_000):
            sent_ids.append(producer.send(make_event(i)))
            if i == 23_000:
                # Mid-send: once a delivery shows the producer id was fetched. kafka-python takes a timed-out
                # producer id request as fatal, so a freeze before it would fail every send (see the docs page).
                wait_until(lambda: producer.delivered, 60, "a first delivery before the freeze")
                broker.freeze()
                threading.Timer(4.0, broker.thaw).start()
        producer.flush()
        elapsed = time.monotonic() - started
        retry_rate = sum(
            v for group in producer.client_metrics().values() for k, v in group.items() if k == "record-retry-rate"
        )
        assert (producer.delivered, producer.failed) == (10_000, 0)
    assert elapsed >= 4.0, "the broker was not frozen during the send"
    assert retry_rate > 0, "the client never retried, so the test proved nothing"

    messages = read_back(broker.bootstrap, topic)
    ids = [e["event_id"] for m in messages for e in events_of(m.value)]
    duplicates = {k: n for k, n in Counter(ids).items() if n > 1}
    assert duplicates == {}
    assert len(ids) == 10_000 and set(ids) == set(sent_ids)

    EventWriter(store).write([event for m in messages for _, event in Decoder().decode_message(m.value)])
    assert stored_claims(store, sent_ids) == {"events": 10_000, "claims": 30_000}


def test_refused_events_are_never_sent(broker, topic):
    deliveries = []
    with VerdictProducer(broker.bootstrap, topic, on_delivery=deliveries.append) as producer:
        with pytest.raises(ContractError) as caught:
            producer.send({**make_event(1), "claims": [{"verdict": "maybe"}]})
        assert str(caught.value) == "claims[0].verdict: unknown verdict 'maybe'"
        report = producer.send_many([make_event(2), {**make_event(3), "route": ""}, make_event(4), "not an event"])
    assert report.sent == report.delivered == 2
    assert [(i, r.rule, r.problems[0].path) for i, r in report.refused] == [
        (1, "bad_route", "route"),
        (3, "not_object", "$"),
    ]
    assert sorted(d.event_id for d in deliveries) == ["ev-000002", "ev-000004"]
    assert all(d.ok and d.offset is not None and d.partition is not None for d in deliveries)
    assert len([e for m in read_back(broker.bootstrap, topic) for e in events_of(m.value)]) == 2


def test_close_flushes_what_is_still_lingering(broker, topic):
    producer = VerdictProducer(broker.bootstrap, topic, linger_ms=60_000)
    ids = [producer.send(make_event(i, with_id=False)) for i in range(100)]
    assert producer.delivered == 0
    producer.close()
    assert producer.delivered == 100
    received = [e for m in read_back(broker.bootstrap, topic) for e in events_of(m.value)]
    assert sorted(r["event_id"] for r in received) == sorted(ids)
    assert all(r["schema"] == "claimwatch.verdict/v1" for r in received)
    with pytest.raises(ProducerError):
        producer.send(make_event(1))


def test_failed_deliveries_reach_the_callback(broker, topic):
    deliveries = []
    producer = VerdictProducer(
        broker.bootstrap,
        topic,
        linger_ms=0,
        request_timeout_ms=500,
        delivery_timeout_ms=1500,
        on_delivery=deliveries.append,
    )
    producer.send(make_event(0))
    producer.flush()  # the producer id is fetched now, not while the broker is frozen
    broker.freeze()
    try:
        # One event, so one batch: kafka-python does not expire further batches that
        # wait for a new producer id after the first one expired (see the docs page).
        producer.send(make_event(1))
        producer.flush(timeout=30)
    finally:
        broker.thaw()
        producer.close(timeout=5)
    assert (producer.delivered, producer.failed) == (1, 1)
    assert [(d.event_id, d.ok) for d in deliveries] == [("ev-000000", True), ("ev-000001", False)]
    assert deliveries[0].offset is not None and deliveries[1].error is not None


def test_async_producer_sends_checks_and_reports(broker, topic):
    async def run():
        async with AsyncVerdictProducer(broker.bootstrap, topic, linger_ms=5) as producer:
            futures = [await producer.send(make_event(i)) for i in range(500)]
            deliveries = await asyncio.gather(*futures)
            with pytest.raises(ContractError):
                await producer.send({**make_event(1), "observed_at": "yesterday"})
            report = await producer.send_many(make_event(i) for i in range(500, 700))
            single = await producer.send_and_wait(make_event(700))
        return deliveries, report, single

    deliveries, report, single = asyncio.run(run())
    assert all(d.ok for d in deliveries) and single.ok
    assert (report.sent, report.delivered) == (200, 200)
    ids = {e["event_id"] for m in read_back(broker.bootstrap, topic) for e in events_of(m.value)}
    assert ids == {f"ev-{i:06d}" for i in range(701)}


def test_async_failed_delivery_raises(broker, topic):
    async def run():
        producer = await AsyncVerdictProducer(
            broker.bootstrap, topic, linger_ms=0, request_timeout_ms=500, delivery_timeout_ms=1500
        ).start()
        await producer.send_and_wait(make_event(0))
        broker.freeze()
        try:
            future = await producer.send(make_event(1))
            with pytest.raises(DeliveryError) as caught:
                await asyncio.wait_for(future, 30)
            return caught.value.delivery
        finally:
            broker.thaw()
            await producer.close(timeout=5)

    delivery = asyncio.run(run())
    assert delivery.event_id == "ev-000001" and not delivery.ok


def test_events_of_a_route_travel_in_envelopes_within_the_limits(broker, topic):
    events = [{**make_event(i), "answer": {"action": "served", "text": "x" * 1000}} for i in range(600)]
    with VerdictProducer(
        broker.bootstrap, topic, envelope_max_events=50, envelope_max_bytes=32 * 1024, envelope_linger_ms=60_000
    ) as producer:
        report = producer.send_many(events)
    assert (report.sent, report.delivered) == (600, 600)
    messages = read_back(broker.bootstrap, topic)
    assert all(len(m.value) <= 32 * 1024 for m in messages) and len(messages) <= 40
    held = [events_of(m.value) for m in messages]
    assert all(len(h) <= 50 for h in held) and sum(map(len, held)) == 600
    assert all({e["route"].encode() for e in h} == {m.key} for m, h in zip(messages, held))
    assert sum(orjson.loads(m.value)["schema"] == "claimwatch.verdicts/v1" for m in messages) >= 25


def test_no_batch_sends_one_event_per_message(broker, topic):
    with VerdictProducer(broker.bootstrap, topic, envelopes=False) as producer:
        report = producer.send_many(make_event(i) for i in range(50))
    assert report.delivered == 50
    messages = read_back(broker.bootstrap, topic)
    assert len(messages) == 50 and all(orjson.loads(m.value)["schema"] == "claimwatch.verdict/v1" for m in messages)


def test_a_lingering_envelope_goes_without_a_flush_and_reports_each_event(broker, topic):
    deliveries = []
    producer = VerdictProducer(
        broker.bootstrap, topic, linger_ms=0, envelope_linger_ms=500, on_delivery=deliveries.append
    )
    try:
        ids = [producer.send({**make_event(i), "route": "billing-faq"}) for i in range(3)]
        assert producer.delivered == 0  # still lingering
        deadline = time.monotonic() + 20
        while producer.delivered < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert producer.delivered == 3
        assert sorted(d.event_id for d in deliveries) == sorted(ids) and len({d.offset for d in deliveries}) == 1
    finally:
        producer.close()
    [message] = read_back(broker.bootstrap, topic)
    assert [e["event_id"] for e in events_of(message.value)] == ids
