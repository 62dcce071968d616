"""Pages never wait behind tickets (issue 49, finding 4): each receiver has its own queue, delivered concurrently,
every attempt bounded; queue depth, oldest age and how long a receiver has been failing are metrics. Against real
HTTP receivers (tests/support/receiver.py), one of which hangs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import orjson

from services.alerts.lifecycle.alert import Alert
from services.alerts.notify.dispatch import Dispatcher
from services.alerts.notify.receivers import Outgoing
from services.core.metrics import Metrics
from tests.support.receiver import Receiver
from tests.support.waiting import wait_until

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
URL = "https://claimwatch.example"
FIRING = Alert(
    alert_id="a-1",
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


def tickets(url: str, n: int) -> list[Outgoing]:
    """``n`` issue webhook events, as services/triage/webhook.py renders them (signed bytes)."""
    return [
        Outgoing(
            "issue_webhook",
            url,
            orjson.dumps({"event": "assigned", "n": i}),
            {"Content-Type": "application/json"},
            key=f"issue/{i}",
        )
        for i in range(n)
    ]


def sample(metrics: Metrics, name: str, receiver: str) -> float:
    return metrics.registry.get_sample_value(name, {"receiver": receiver})


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_a_hanging_ticket_webhook_does_not_hold_back_a_page():
    """18 `issues assign` events to a ticket webhook that does not answer, then an alert: Alertmanager gets the
    alert at once, while the first ticket is still waiting for its answer (one shared queue held it for 45 min)."""
    metrics = Metrics()
    with Receiver(hold=True) as hook, Receiver() as am:
        d = Dispatcher(
            am.url,
            None,
            URL,
            timedelta(minutes=1),
            metrics,
            retry_initial_seconds=0.1,
            retry_max_seconds=0.2,
            attempt_timeout_seconds=60,
        )

        async def scenario() -> tuple[list, int, dict]:
            sending = asyncio.create_task(d.run())
            await d.enqueue(tickets(hook.url, 18))
            await asyncio.to_thread(hook.wait_until, lambda posts: len(posts) == 1, 10)  # the first one hangs
            await d.enqueue(d.plan(None, FIRING, [], NOW))
            pages = await asyncio.to_thread(am.wait_until, lambda posts: posts, 5)
            await asyncio.to_thread(
                wait_until,
                lambda: sample(metrics, "claimwatch_notifications_sent_total", "alertmanager") == 1,
                5,
                "the page counted as sent",
            )
            hanging = len(hook.posts)
            seen = {
                (name, receiver): sample(metrics, f"claimwatch_notification_{name}", receiver)
                for name in ("queue_depth", "queue_oldest_seconds", "failing_seconds")
                for receiver in ("issue_webhook", "alertmanager")
            }
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            return pages, hanging, seen

        pages, hanging, seen = asyncio.run(scenario())
    [(path, _, body)] = pages
    assert path == "/api/v2/alerts" and orjson.loads(body)[0]["labels"]["route"] == "billing-faq"
    assert hanging == 1  # the ticket webhook is still on its first event
    assert seen["queue_depth", "issue_webhook"] == 18  # the one being sent counts
    assert seen["queue_depth", "alertmanager"] == 0
    assert seen["queue_oldest_seconds", "issue_webhook"] > 0 and seen["queue_oldest_seconds", "alertmanager"] == 0
    assert seen["failing_seconds", "issue_webhook"] == 0  # not failed yet: still waiting for its answer


def test_each_attempt_is_bounded_and_a_failing_receiver_shows_how_long_it_has_failed():
    """A receiver that does not answer fails each attempt after ``notify.attempt_timeout_seconds`` and is tried
    again; how long it has been failing is a metric (a rule pages at 10 min), back to 0 once it answers."""
    metrics, clock = Metrics(), Clock(NOW)
    with Receiver(hold=True) as hook:
        d = Dispatcher(
            None,
            None,
            URL,
            timedelta(minutes=1),
            metrics,
            retry_initial_seconds=0.05,
            retry_max_seconds=0.1,
            attempt_timeout_seconds=0.3,
            max_attempts=100,
            clock=clock,
        )

        async def scenario() -> dict[str, float]:
            sending = asyncio.create_task(d.run())
            await d.enqueue(tickets(hook.url, 1))
            await asyncio.to_thread(hook.wait_until, lambda posts: len(posts) >= 2, 5)  # the first attempt timed out
            clock.now = NOW + timedelta(minutes=11)
            seen = {
                name: sample(metrics, f"claimwatch_notification_{name}", "issue_webhook")
                for name in ("failing_seconds", "queue_oldest_seconds", "queue_depth")
            }
            seen["failures"] = metrics.registry.get_sample_value(
                "claimwatch_notification_failures_total", {"target": "issue_webhook"}
            )
            hook.release()
            await asyncio.to_thread(
                wait_until,
                lambda: sample(metrics, "claimwatch_notifications_sent_total", "issue_webhook") == 1,
                5,
                "the event delivered",
            )
            seen["failing_after"] = sample(metrics, "claimwatch_notification_failing_seconds", "issue_webhook")
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            return seen

        seen = asyncio.run(scenario())
    assert seen["failing_seconds"] == 660 and seen["queue_oldest_seconds"] == 660 and seen["queue_depth"] == 1
    assert seen["failures"] >= 1
    assert seen["failing_after"] == 0
    assert sample(metrics, "claimwatch_notification_queue_depth", "issue_webhook") == 0


def test_a_resend_replaces_the_one_still_queued():
    """Alertmanager's periodic resends are not logged, and only the newest is worth sending after an outage."""
    d = Dispatcher(
        "http://am.invalid",
        None,
        URL,
        timedelta(minutes=1),
        retry_initial_seconds=0.1,
        retry_max_seconds=0.2,
        attempt_timeout_seconds=10,
    )

    async def scenario() -> list[Outgoing]:
        await d.enqueue(d.plan(None, FIRING, [], NOW))
        for minute in range(1, 4):
            await d.enqueue(d.resend([FIRING], [], NOW + timedelta(minutes=minute)))
        return d.queued()

    first, resend = asyncio.run(scenario())
    assert first.key == "alert/a-1/firing" and resend.key is None
    assert resend.body[0]["endsAt"] > first.body[0]["endsAt"]  # the newest resend's
