"""The issue webhook against a real HTTP server: created, assigned, escalating, resolved and regressed events arrive
signed with the shared secret (HMAC-SHA256 of the body), carrying the issue, its owner, its ticket and its runbook;
a target that fails gets the same signed event again until it answers; a linked issue's regression asks for its
ticket to be reopened."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from clustering.issue import REGRESSED
from services.alerts.notify.dispatch import Dispatcher
from services.core.clock import utcnow
from services.triage.service import TriageService
from services.triage.webhook import IssueWebhook
from tests.support.receiver import Receiver
from tests.support.triage_world import T0, Clock, an_issue, hourly, members, triage_world
from tests.support.waiting import wait_until

SECRET = "s3cret-shared-with-the-bridge"


class Sending:
    """The alert notifier's queue and retries (services/alerts/notify.Dispatcher) on an event loop of its own."""

    def __init__(self):
        self.dispatcher = Dispatcher(
            None,
            None,
            "http://127.0.0.1:8080",
            timedelta(minutes=1),
            retry_initial_seconds=0.5,
            retry_max_seconds=30,
            attempt_timeout_seconds=10,
        )
        self.loop = asyncio.new_event_loop()
        self.task = self.loop.create_task(self.dispatcher.run())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def send(self, items) -> None:
        asyncio.run_coroutine_threadsafe(self.dispatcher.enqueue(items), self.loop).result(10)

    def close(self):
        async def stop() -> None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture()
def receiver():
    with Receiver(failures=2) as r:
        yield r


@pytest.fixture()
def sending():
    s = Sending()
    yield s
    s.close()


def signed(headers: dict, body: bytes) -> bool:
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers.get("X-Claimwatch-Signature", ""), expected)


@pytest.mark.slow
def test_events_arrive_signed_and_are_retried_until_the_target_answers(tmp_path, store_templates, receiver, sending):
    settings = {
        "triage": {
            "webhook_url": receiver.url + "/hooks/claimwatch",
            "webhook_secret": SECRET,
            "default_team": "platform",
        },
        "owners": [{"route": "billing-*", "team": "payments"}],
    }
    with triage_world(tmp_path, store_templates, **settings) as (components, clock):
        triage = components.triage
        clock.at(T0 + timedelta(minutes=1))
        an_issue(components, "iss-a", history=({"at": clock.now.isoformat(), "event": "created"},))
        clock.at(T0 + timedelta(minutes=2))
        triage.assign("iss-a", "sam", "lee")
        clock.at(T0 + timedelta(minutes=3))
        triage.link("iss-a", "https://tickets.example/PAY-7", "sam")
        clock.at(T0 + timedelta(minutes=4))
        triage.resolve("iss-a", "sam")
        sending.send(triage.tick(clock.at(T0 + timedelta(minutes=5))))
        posts = [p[1:] for p in receiver.wait_until(lambda p: len(p) >= 5)]  # the first refused twice, then each once
        # the failing target got the very same signed event until it answered
        assert posts[0] == posts[1] == posts[2]
        events = [json.loads(body) for _, body in posts[2:]]
        assert [e["event"] for e in events] == ["created", "assigned", "resolved"]
        assert all(signed(headers, body) for headers, body in posts)
        assert not any(
            hmac.compare_digest(
                h["X-Claimwatch-Signature"],
                "sha256=" + hmac.new(b"another-secret-entirely", b, hashlib.sha256).hexdigest(),
            )
            for h, b in posts
        )
        assigned = events[1]
        assert assigned["by"] == "lee" and assigned["issue"]["assignee"] == "sam" and assigned["owner"] == "sam"
        assert assigned["text"] == "[ASSIGNED] issue iss-a (iss-a), owner sam: assigned to sam by lee"
        assert assigned["team"] == "payments" and assigned["runbook_url"] == "http://127.0.0.1:8080/issues/iss-a"
        assert assigned["ticket_url"] == "https://tickets.example/PAY-7" and not assigned["reopen_ticket"]

        # escalating (another issue) and the linked issue's regression, from the next tick
        an_issue(components, "iss-b", route="hr-policy")
        members(components, "iss-b", hourly(T0 - timedelta(hours=6), 6, 2) + hourly(T0, 1, 12))
        record = components.repos.issues.get("iss-a")
        clock.at(T0 + timedelta(minutes=30))
        components.repos.issues.save(
            [
                replace(
                    record,
                    state=REGRESSED,
                    history=(
                        *record.history,
                        {"at": clock.now.isoformat(), "event": "regressed", "versions": {"model": "gen-2"}},
                    ),
                )
            ]
        )
        sending.send(triage.tick(clock.at(T0 + timedelta(hours=1))))
        later = [json.loads(body) for _, _, body in receiver.wait_until(lambda p: len(p) >= 7)[5:]]
        by_event = {e["event"]: e for e in later}
        assert sorted(by_event) == ["escalating", "regressed"]
        assert by_event["escalating"]["issue"]["issue_id"] == "iss-b" and by_event["escalating"]["team"] == "platform"
        regressed = by_event["regressed"]
        assert regressed["reopen_ticket"] is True and regressed["ticket_url"] == "https://tickets.example/PAY-7"
        assert "https://tickets.example/PAY-7 was closed with it: reopen it" in regressed["text"]
        assert triage.tick(clock.at(T0 + timedelta(hours=1, minutes=1))) == []  # each event is sent once


def test_an_entry_saved_after_the_tick_that_would_have_sent_it_is_sent_by_the_next(tmp_path, store_templates):
    """A re-cluster's entries carry the time the run began, and it publishes minutes later."""
    unanswered = {"webhook_url": "http://127.0.0.1:9/hook"}
    with triage_world(tmp_path, store_templates, triage=unanswered) as (components, clock):
        triage = components.triage
        assert triage.tick(clock.at(T0 + timedelta(minutes=10))) == []
        an_issue(components, "iss-late", history=({"at": (T0 + timedelta(minutes=2)).isoformat(), "event": "created"},))
        (late,) = triage.tick(clock.at(T0 + timedelta(minutes=11)))
        assert (
            json.loads(late.body)["issue"]["issue_id"] == "iss-late" and late.headers["X-Claimwatch-Event"] == "created"
        )
        assert triage.tick(clock.at(T0 + timedelta(minutes=12))) == []


def test_an_event_made_before_a_restart_and_never_sent_is_sent_by_the_next_leader(tmp_path, store_templates):
    """`issues assign`, then the worker stops before its next tick: the next leader sends the assignment, and not
    what the previous one delivered (the notification log holds what was sent since it began)."""
    with (
        triage_world(tmp_path, store_templates, triage={"webhook_url": "http://127.0.0.1:9/hook"}) as (components, _),
        Receiver() as hook,
    ):
        clock, log = Clock(utcnow()), components.repos.notifications  # the log keeps a week of wall-clock time

        def leader() -> tuple[TriageService, Dispatcher]:
            webhook = IssueWebhook(hook.url, SECRET)
            return (
                TriageService(
                    components.repos.issues,
                    components.issues.summary,
                    webhook,
                    clock,
                    resume_from=lambda: log.first_logged("issue_webhook"),
                ),
                Dispatcher(
                    None,
                    None,
                    "http://127.0.0.1:8080",
                    timedelta(minutes=1),
                    retry_initial_seconds=0.1,
                    retry_max_seconds=0.2,
                    attempt_timeout_seconds=10,
                    nflog=log,
                    clock=clock,
                ),
            )

        async def tick(triage: TriageService, dispatcher: Dispatcher, deliver: bool) -> list[str]:
            await dispatcher.enqueue(triage.tick(clock.now))
            queued = [json.loads(o.body)["event"] for o in dispatcher.queued()]
            if deliver:
                sending = asyncio.create_task(dispatcher.run())
                await asyncio.to_thread(
                    lambda: wait_until(
                        lambda: all(e["state"] == "delivered" for e in log.entries("issue_webhook")), 10, "delivered"
                    )
                )
                sending.cancel()
                await asyncio.gather(sending, return_exceptions=True)
            return queued

        triage, dispatcher = leader()
        an_issue(
            components,
            "iss-a",
            history=({"at": clock.at(clock.now + timedelta(seconds=1)).isoformat(), "event": "created"},),
        )
        clock.at(clock.now + timedelta(minutes=1))
        assert asyncio.run(tick(triage, dispatcher, deliver=True)) == ["created"]
        clock.at(clock.now + timedelta(minutes=1))
        triage.assign("iss-a", "sam", "lee")  # and the process dies before its next tick

        clock.at(clock.now + timedelta(minutes=1))
        assert asyncio.run(tick(*leader(), deliver=True)) == ["assigned"]
        assert [json.loads(body)["event"] for _, _, body in hook.accepted] == ["created", "assigned"]
        assert asyncio.run(tick(*leader(), deliver=False)) == []  # a third start: nothing new, nothing again
