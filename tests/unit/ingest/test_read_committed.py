"""The worker reads committed records only (issue 51). Faust's aiokafka driver asks for read_uncommitted unless the
app itself runs in transactions, so an aborted producer transaction's records would be stored on Apache Kafka.

The embedded broker (Tansu) ignores isolation, so no broker here can show an aborted record being skipped; this
tests the boundary instead: the Kafka consumer the worker's app builds carries read_committed, the level aiokafka
passes to its fetcher and sends in every fetch request (docs/security.md says what is and is not proven)."""

from __future__ import annotations

import asyncio

from services.app.settings import load_settings
from streams.app import create_app


def test_the_workers_kafka_consumer_asks_for_committed_records_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Faust's scratch folder
    settings = load_settings(None, {"CLAIMWATCH_KAFKA": "127.0.0.1:1"}, {})

    async def built() -> str:
        app, _ = create_app(settings)
        consumer = app.consumer._new_consumer_thread()._create_worker_consumer(app.transport)  # made, not started
        return consumer._isolation_level

    assert asyncio.run(built()) == "read_committed"
