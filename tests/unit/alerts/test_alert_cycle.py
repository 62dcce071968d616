"""The leader's alert timer (services/alerts/cycle.py): an evaluation's transition records and notifications over
the real chDB engine, the firing alert re-sent, and a store hiccup logged and skipped."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import orjson

from services.alerts.cycle import AlertCycle
from services.alerts.notify import Dispatcher
from services.alerts.records import alert_repository
from services.app.compose import evaluator_for
from services.core.metrics import Metrics
from services.core.errors import StoreError
from services.store.rates import RateRepository
from services.store.writer import EventWriter
from tests.support.regression_world import START, billing_regression, prompt_settings


async def inline(fn, *args):
    """A runner that runs on the calling thread (production passes the store's thread)."""
    return fn(*args)


def test_alert_cycle_returns_transition_records_and_queues_notifications(store):
    start = START
    EventWriter(store).write(billing_regression())
    settings = prompt_settings()
    alerts, metrics = alert_repository(store), Metrics()
    dispatcher = Dispatcher("http://alertmanager.invalid", None, "http://claimwatch.invalid", timedelta(minutes=1), metrics,
                            retry_initial_seconds=0.5, retry_max_seconds=30)
    cycle = AlertCycle(evaluator_for(settings, RateRepository(store), alerts), alerts, dispatcher, metrics, inline)

    async def ticks():
        records = await cycle.evaluate(start + timedelta(days=1))
        queued = dispatcher.queue.qsize()
        await cycle.resend(start + timedelta(days=1))
        return records, queued, dispatcher.queue.qsize()

    records, queued, after_resend = asyncio.run(ticks())
    assert records and all(key == b"billing-faq" for key, _ in records)
    values = [orjson.loads(v) for _, v in records]
    assert values[-1]["state"] == "firing" and values[-1]["alert_id"] == next(iter(cycle.evaluator.open.values())).alert_id
    assert queued >= 1 and after_resend == queued + 1  # the firing alert is re-sent to Alertmanager
    assert metrics.alert_transitions.labels("firing")._value.get() >= 1
    assert metrics.alerts.labels("firing")._value.get() == 1


def test_alert_cycle_survives_a_store_hiccup():
    async def down(fn, *args):
        raise StoreError("Connection refused")

    class Unused:
        open: dict = {}

    metrics = Metrics()
    cycle = AlertCycle(Unused(), Unused(), None, metrics, down)
    assert asyncio.run(cycle.evaluate(datetime(2026, 11, 21, tzinfo=timezone.utc))) == []
    asyncio.run(cycle.resend(datetime(2026, 11, 21, tzinfo=timezone.utc)))  # logged and skipped
