"""The notification log (issue 49, finding 7): what is to be sent survives a crash, over the real chDB engine and
real HTTP receivers. A dispatcher dropped before delivering ("a crash") leaves its notifications pending in the
log; a new dispatcher on the same store sends each once, and what was delivered is not sent again."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.alerts.evaluation.cycle import AlertCycle
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.alerts.notify.dispatch import Dispatcher
from services.alerts.notify.receivers import Outgoing
from services.app.compose import evaluator_for
from services.core.metrics import Metrics
from services.store.dlq import DeadLetterRepository
from services.store.notifications import NotificationLog
from services.store.rates import RateRepository
from services.store.writer import EventWriter
from services.triage.webhook import IssueWebhook
from tests.support.receiver import Receiver
from tests.support.regression_world import START, billing_regression, prompt_settings

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
URL = "https://claimwatch.example"


def firing(alert_id: str) -> Alert:
    return Alert(
        alert_id=alert_id,
        route="billing-faq",
        kind="hallucination_rate_rise",
        severity="warning",
        labels={},
        window=30,
        pending_since=NOW,
        starts_at=NOW,
        rate=0.2,
        baseline=0.1,
        delta=0.1,
        claims=1000,
    )


def dispatcher(store, am: str | None, hook: str | None) -> Dispatcher:
    return Dispatcher(
        am,
        hook,
        URL,
        timedelta(minutes=1),
        Metrics(),
        retry_initial_seconds=0.05,
        retry_max_seconds=0.1,
        attempt_timeout_seconds=2,
        nflog=NotificationLog(store),
    )


def ticket(url: str) -> Outgoing:
    """An issue webhook event as triage renders it: signed bytes, with their headers."""
    entry = {"event": "assigned", "at": NOW.isoformat(), "by": "lee", "assignee": "sam"}
    issue = {
        "issue_id": "iss-a",
        "name": "dates invented",
        "owner": "sam",
        "team": "payments",
        "runbook_url": f"{URL}/issues/iss-a",
    }
    return IssueWebhook(url, "s3cret").outgoing(entry, issue)


async def sending(d: Dispatcher, until) -> None:
    """Run ``d`` until ``until()`` (blocking, polled on a thread) returns, then stop it."""
    task = asyncio.create_task(d.run())
    try:
        await asyncio.to_thread(until)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.slow
def test_what_was_not_delivered_before_a_crash_is_delivered_once_by_the_next_dispatcher(store):
    with Receiver() as am, Receiver(failures=10**9) as hook, Receiver(failures=10**9) as tickets:

        async def first_life() -> None:
            d = dispatcher(store, am.url, hook.url)
            await d.enqueue(d.plan(None, firing("a-1"), [], NOW))  # to Alertmanager (up) and the webhook (down)
            await d.enqueue([ticket(tickets.url)])  # the ticket system is down too
            await sending(
                d,
                lambda: (
                    hook.wait_until(lambda posts: len(posts) >= 2, 10)
                    and tickets.wait_until(lambda posts: len(posts) >= 2, 10)
                    and wait_for_state(store, "alertmanager", "alert/a-1/firing", "delivered")
                ),
            )

        asyncio.run(first_life())  # the crash: the dispatcher is dropped, its queues with it
        assert len(am.accepted) == 1 and hook.accepted == [] and tickets.accepted == []
        hook.failures = tickets.failures = 0

        async def second_life() -> list[Outgoing]:
            d = dispatcher(store, am.url, hook.url)
            await d.enqueue([])  # the leader's first notification reloads the log
            reloaded = d.queued()
            await d.enqueue(d.plan(None, firing("a-1"), [], NOW))  # an evaluation that re-derives it: logged already
            assert d.queued() == reloaded
            await sending(
                d,
                lambda: (
                    hook.wait_until(lambda posts: hook.accepted, 10)
                    and tickets.wait_until(lambda posts: tickets.accepted, 10)
                    and wait_for_state(store, "issue_webhook", ticket(tickets.url).key, "delivered")
                ),
            )
            return reloaded

        reloaded = asyncio.run(second_life())
        assert sorted((o.target, o.key) for o in reloaded) == [
            ("issue_webhook", ticket(tickets.url).key),
            ("webhook", "alert/a-1/firing"),
        ]
        assert len(am.accepted) == 1  # delivered before the crash: not sent again
        [(_, _, body)] = hook.accepted
        assert orjson.loads(body)["alert"]["alert_id"] == "a-1" and orjson.loads(body)["reason"] == "new firing"
        [(_, headers, signed)] = tickets.accepted
        original = ticket(tickets.url)
        assert signed == original.body  # the very bytes that were signed
        assert headers["X-Claimwatch-Signature"] == original.headers["X-Claimwatch-Signature"]

        async def third_life() -> list[Outgoing]:
            d = dispatcher(store, am.url, hook.url)
            await d.enqueue([])
            return d.queued()

        assert asyncio.run(third_life()) == []  # a restart with nothing pending sends nothing again
    log = NotificationLog(store)
    assert [e["state"] for e in log.entries("webhook")] == ["delivered"]
    assert [(e["state"], e["attempts"]) for e in log.entries("alertmanager")] == [("delivered", 1)]


def wait_for_state(store, receiver: str, key: str, state: str) -> bool:
    from tests.support.waiting import wait_until

    return wait_until(
        lambda: any(e["key"] == key and e["state"] == state for e in NotificationLog(store).entries(receiver)),
        10,
        f"{receiver} {key} {state}",
    )


@pytest.mark.slow
def test_a_transition_recorded_but_never_logged_is_sent_after_a_restart(store):
    """A kill after the evaluator's checkpoint and before the notification was logged: the evaluator resumes past
    the transition, so only the log can tell that it was never sent. The next leader's first evaluation sends it;
    the one after that reloads it from the log (still pending) instead of planning it a second time."""
    EventWriter(store).write(billing_regression())
    now = START + timedelta(minutes=300)  # the regression fires about minute 205: within the hours a start looks back
    alerts = alert_repository(store)

    def cycle(d: Dispatcher) -> AlertCycle:
        return AlertCycle(
            evaluator_for(prompt_settings(), RateRepository(store), DeadLetterRepository(store), alerts),
            alerts,
            d,
            Metrics(),
            inline,
        )

    async def life(d: Dispatcher) -> list[Outgoing]:
        await cycle(d).evaluate(now)
        return d.queued()

    unlogged = Dispatcher(
        None,
        "http://hook.invalid",
        URL,
        timedelta(minutes=1),
        retry_initial_seconds=0.1,
        retry_max_seconds=0.2,
        attempt_timeout_seconds=10,
    )  # queued in memory only, then the process dies
    [lost] = [o for o in asyncio.run(life(unlogged)) if o.key.endswith("/firing")]
    [sent] = asyncio.run(life(dispatcher(store, None, "http://hook.invalid")))
    assert (sent.target, sent.key) == ("webhook", lost.key) and sent.body["reason"] == "new firing"
    # Logged now, and still pending (this life did not deliver it either): the next reloads it, once, and does
    # not plan it again.
    [reloaded] = asyncio.run(life(dispatcher(store, None, "http://hook.invalid")))
    assert reloaded.key == lost.key and orjson.loads(reloaded.body)["reason"] == "new firing"


async def inline(fn, *args):
    return fn(*args)
