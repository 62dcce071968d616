"""The leader's alert timer (services/alerts/evaluation/cycle.py): an evaluation's transition records and notifications
over the real chDB engine, the firing alert re-sent, and a store hiccup logged and skipped."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.alerts.evaluation.cycle import AlertCycle
from services.alerts.lifecycle.records import alert_repository
from services.alerts.lifecycle.silences import Silence
from services.alerts.notify.dispatch import Dispatcher
from services.app.compose import evaluator_for
from services.core.errors import StoreError
from services.core.metrics import Metrics
from services.store.dlq import DeadLetterRepository
from services.store.rates import RateRepository
from services.store.writer import EventWriter
from tests.support.regression_world import START, billing_regression, prompt_settings


async def inline(fn, *args):
    """A runner that runs on the calling thread (production passes the store's thread)."""
    return fn(*args)


def taken(dispatcher: Dispatcher) -> list:
    """What the dispatcher has queued, taken off its queues."""
    items = dispatcher.queued()
    for queue in dispatcher.receivers.values():
        queue.waiting.clear()
    return items


def dispatcher_for(metrics: Metrics, resend_every: timedelta) -> Dispatcher:
    return Dispatcher(
        "http://alertmanager.invalid",
        None,
        "http://claimwatch.invalid",
        resend_every,
        metrics,
        retry_initial_seconds=0.5,
        retry_max_seconds=30,
        attempt_timeout_seconds=10,
    )


@pytest.mark.slow
def test_alert_cycle_returns_transition_records_and_queues_notifications(store):
    start = START
    EventWriter(store).write(billing_regression())
    settings = prompt_settings()
    alerts, metrics = alert_repository(store), Metrics()
    dispatcher = dispatcher_for(metrics, timedelta(minutes=1))
    cycle = AlertCycle(
        evaluator_for(settings, RateRepository(store), DeadLetterRepository(store), alerts),
        alerts,
        dispatcher,
        metrics,
        inline,
    )

    async def ticks():
        records = await cycle.evaluate(start + timedelta(days=1))
        queued = len(dispatcher.queued())
        await cycle.resend(start + timedelta(days=1))
        return records, queued, len(dispatcher.queued())

    records, queued, after_resend = asyncio.run(ticks())
    assert records and all(key == b"billing-faq" for key, _ in records)
    values = [orjson.loads(v) for _, v in records]
    assert (
        values[-1]["state"] == "firing" and values[-1]["alert_id"] == next(iter(cycle.evaluator.open.values())).alert_id
    )
    assert queued >= 1 and after_resend == queued + 1  # the firing alert is re-sent to Alertmanager
    assert metrics.alert_transitions.labels("firing")._value.get() >= 1
    assert metrics.alerts.labels("firing")._value.get() == 1


def test_alert_cycle_survives_a_store_hiccup():
    async def down(fn, *args):
        raise StoreError("Connection refused")

    class Unused:
        open: dict = {}
        last_minute = None

    metrics = Metrics()
    dispatcher = dispatcher_for(metrics, timedelta(minutes=1))
    cycle = AlertCycle(Unused(), Unused(), dispatcher, metrics, down)
    assert asyncio.run(cycle.evaluate(datetime(2026, 11, 21, tzinfo=UTC))) == []
    asyncio.run(cycle.resend(datetime(2026, 11, 21, tzinfo=UTC)))  # nothing read yet: logged and skipped
    assert dispatcher.queued() == []


class FlakyStore:
    """The store's thread as a runner that answers, then stalls (never returns) or fails, on demand."""

    def __init__(self):
        self.mode = "up"

    async def __call__(self, fn, *args):
        if self.mode == "stalled":
            await asyncio.Event().wait()
        if self.mode == "down":
            raise StoreError("Connection refused")
        return fn(*args)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stalled", "down"])
def test_a_firing_page_is_re_sent_while_the_store_stalls_or_fails(store, mode):
    """Alertmanager resolves what is not re-sent before its endsAt: a busy or broken store must not end the page.
    The resend waits one interval for the store, then goes out with the silences and explanation last read."""
    EventWriter(store).write(billing_regression())
    alerts, metrics, runner = alert_repository(store), Metrics(), FlakyStore()
    now = START + timedelta(days=1)
    alerts.save_silence(Silence.create(["route=hr-policy"], now, duration="4h", created_by="oncall", comment="rollout"))
    dispatcher = dispatcher_for(metrics, timedelta(seconds=0.2))
    cycle = AlertCycle(
        evaluator_for(prompt_settings(), RateRepository(store), DeadLetterRepository(store), alerts),
        alerts,
        dispatcher,
        metrics,
        runner,
    )

    async def ticks():
        await cycle.evaluate(now)
        taken(dispatcher)
        runner.mode = mode
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(cycle.resend(now + timedelta(seconds=30)), 10)  # fails, not hangs, if it waits
        return asyncio.get_running_loop().time() - started, taken(dispatcher)

    waited, sent = asyncio.run(ticks())
    assert waited < 2  # one resend interval (0.2 s), not for as long as the store is stuck
    [payload] = [p for item in sent for p in item.body]
    assert payload["labels"]["route"] == "billing-faq"
    assert datetime.fromisoformat(payload["endsAt"]) > now + timedelta(seconds=30)  # still firing in Alertmanager
    assert cycle.silences and cycle.silences[0].matchers  # the silence read at the evaluation is still in force


class Gate:
    """A store runner that holds the first call ``hold(fn)`` picks until ``release`` is set; others run inline."""

    def __init__(self, hold):
        self.hold, self.held, self.release = hold, asyncio.Event(), asyncio.Event()

    async def __call__(self, fn, *args):
        if not self.held.is_set() and self.hold(fn):
            self.held.set()
            await self.release.wait()
        return fn(*args)


def explaining_cycle(store, runner) -> tuple[AlertCycle, Dispatcher]:
    """A cycle that explains its alerts, over the billing-faq regression, its store work through ``runner``."""
    from services.alerts.explain.explainer import AlertExplainer
    from services.app.compose import Repositories

    EventWriter(store).write(billing_regression())
    repos, metrics = Repositories.on(store), Metrics()
    dispatcher = dispatcher_for(metrics, timedelta(minutes=1))
    return AlertCycle(
        evaluator_for(prompt_settings(), repos.rates, repos.dead_letters, repos.alerts),
        repos.alerts,
        dispatcher,
        metrics,
        runner,
        explainer=AlertExplainer(repos.issues, repos.rates),
    ), dispatcher


@pytest.mark.slow
def test_an_alert_that_fires_during_a_resend_is_re_sent_with_its_explanation(store):
    """A resend reads the store (silences, explanations) for the alerts firing when it began. An alert that fires
    while it waits is explained by its own evaluation; the resend must send that explanation, not an alert
    without one (Alertmanager keeps the annotations of the latest send)."""
    gate = Gate(lambda fn: True)  # the resend's first read waits until the evaluation below has fired the alert
    cycle, dispatcher = explaining_cycle(store, gate)
    now = START + timedelta(days=1)

    async def ticks():
        resend = asyncio.ensure_future(cycle.resend(now))  # nothing is firing yet
        await gate.held.wait()
        await cycle.evaluate(now)  # billing-faq fires, explained
        taken(dispatcher)
        gate.release.set()
        await resend
        return [p for item in taken(dispatcher) for p in item.body]

    [payload] = asyncio.run(ticks())
    assert payload["labels"]["route"] == "billing-faq"
    assert "failing claims more than expected" in payload["annotations"]["explanation"]


@pytest.mark.slow
def test_a_resend_does_not_page_an_alert_before_its_evaluation_has_announced_it(store):
    """The evaluator's open alerts change before the evaluation has explained and queued its notifications. A
    resend in between must leave the new alert to that notification: sent first without its explanation, it is
    what Alertmanager shows until the evaluation's page arrives (seen under load with a 2 s resend interval)."""
    gate = Gate(lambda fn: fn.__name__ == "explain_all")  # the evaluation's explanations wait for the resend
    cycle, dispatcher = explaining_cycle(store, gate)
    now = START + timedelta(days=1)

    async def ticks():
        evaluation = asyncio.ensure_future(cycle.evaluate(now))
        await gate.held.wait()  # billing-faq is open and firing, its notification not yet queued
        assert any(a.recorded_state == "firing" for a in cycle.evaluator.open.values())
        await cycle.resend(now)
        resent = len(dispatcher.queued())
        gate.release.set()
        await evaluation
        return resent, [p for item in taken(dispatcher) for p in item.body]

    resent, payloads = asyncio.run(ticks())
    assert resent == 0
    firing = [p for p in payloads if p["labels"]["route"] == "billing-faq"]
    assert firing and all("failing claims more than expected" in p["annotations"]["explanation"] for p in firing)


@pytest.mark.slow
def test_each_tick_reports_how_far_the_evaluated_minutes_are_behind_the_wall_clock(store):
    """claimwatch_evaluator_lag_seconds: the wall clock minus the end of the newest minute evaluated. A tick whose
    evaluation fails still reports it, so an evaluator that keeps failing is seen falling behind."""
    EventWriter(store).write(billing_regression())  # minutes START .. START+259
    alerts, metrics, runner = alert_repository(store), Metrics(), FlakyStore()
    cycle = AlertCycle(
        evaluator_for(prompt_settings(), RateRepository(store), DeadLetterRepository(store), alerts),
        alerts,
        dispatcher_for(metrics, timedelta(minutes=1)),
        metrics,
        runner,
    )
    lag = metrics.evaluator_lag._value.get
    now = START + timedelta(minutes=260, seconds=30)

    asyncio.run(cycle.evaluate(now))
    assert cycle.evaluator.last_minute == START + timedelta(minutes=259)  # the newest, ending at START+260
    assert lag() == 30
    runner.mode = "down"
    asyncio.run(cycle.evaluate(now + timedelta(minutes=10)))
    assert lag() == 630
    runner.mode = "up"  # the route stays silent: the evaluator follows the wall clock, less its grace of 2 minutes
    asyncio.run(cycle.evaluate(now + timedelta(minutes=10)))
    assert lag() == 90
