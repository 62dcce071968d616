"""The dashboard says when ingest falls behind: against the real embedded broker, a backlog on the verdicts topic that
no worker has read puts a banner on every page and the figure in GET /api/ingest; once the worker's group has
committed up to the log end, neither warns. A broker that never answers costs a page about a second and a note,
never an error."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import OffsetAndMetadata
from fastapi.testclient import TestClient
from kafka import KafkaProducer

from services.api.app import create_api
from services.app.broker import create_topics
from services.app.compose import build
from services.app.processes import ingest_lag_watch
from services.app.settings import Settings

THRESHOLD, BACKLOG = 10, 12
PAGES = ("/", "/alerts", "/issues", "/eval")


def app_over(settings: Settings, store) -> TestClient:
    return TestClient(create_api(build(settings, store), ingest_lag=ingest_lag_watch(settings)))


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(count):  # one batch each: Tansu reports a log end as its last batch's first offset + 1
            producer.send(topic, b'{"not": "read"}', partition=i % 2).get(timeout=10)
    finally:
        producer.close()


async def commit_log_end(bootstrap: str, group: str, topic: str) -> None:
    """The group caught up, as a worker that has ingested everything leaves it."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(parts)
        ends = await consumer.end_offsets(parts)
        await consumer.commit({tp: OffsetAndMetadata(ends[tp], "") for tp in parts})
    finally:
        await consumer.stop()


@pytest.fixture
def settings(broker, topic_prefix) -> Settings:
    s = Settings(kafka=broker.bootstrap, topic_prefix=topic_prefix, ingest={"lag_warning_messages": THRESHOLD})
    create_topics(s.bootstrap, [s.verdicts_topic], 2)
    return s


def test_a_backlog_shows_a_banner_until_the_group_catches_up(settings, store):
    produce(settings.bootstrap, settings.verdicts_topic, BACKLOG)
    behind = app_over(settings, store)
    for path in PAGES:
        page = behind.get(path)
        assert page.status_code == 200, path
        assert 'id="ingest-lag"' in page.text and f"at least {BACKLOG} messages behind" in page.text, path
    assert behind.get("/api/ingest").json() == {
        "messages_behind": BACKLOG,
        "threshold": THRESHOLD,
        "behind": True,
        "error": None,
    }
    assert behind.get("/readyz").json() == {"ready": True}  # lag warns; it does not make the API unready

    asyncio.run(commit_log_end(settings.bootstrap, settings.consumer_group, settings.verdicts_topic))
    caught_up = app_over(settings, store)
    assert all('id="ingest-lag"' not in caught_up.get(path).text for path in PAGES)
    assert caught_up.get("/api/ingest").json()["messages_behind"] == 0


def test_a_backlog_under_the_threshold_shows_no_banner(settings, store):
    produce(settings.bootstrap, settings.verdicts_topic, THRESHOLD)
    client = app_over(settings, store)
    assert 'id="ingest-lag"' not in client.get("/").text
    assert client.get("/api/ingest").json()["messages_behind"] == THRESHOLD


def test_a_broker_that_never_answers_costs_a_page_a_note_not_an_error(store):
    with socket.socket() as silent:  # accepts connections (the kernel does) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        settings = Settings(kafka=f"127.0.0.1:{silent.getsockname()[1]}")
        client = app_over(settings, store)
        started = time.monotonic()
        page = client.get("/")
        assert time.monotonic() - started < 5
        assert page.status_code == 200 and "Cannot read ingest lag" in page.text
        assert "did not answer within 1 s" in client.get("/api/ingest").json()["error"]
