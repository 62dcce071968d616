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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from clustering.issue import REGRESSED
from services.alerts.notify import Dispatcher
from tests.support.triage_world import T0, an_issue, hourly, members, triage_world

SECRET = "s3cret-shared-with-the-bridge"


class Receiver:
    """A real HTTP server: answers 503 to the first ``failures`` posts, then 200; keeps every post."""

    def __init__(self, failures: int):
        self.failures, self.posts, self.changed = failures, [], threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.changed:
                    receiver.posts.append((dict(self.headers), body))
                    ok = len(receiver.posts) > receiver.failures
                    receiver.changed.notify_all()
                self.send_response(200 if ok else 503)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/claimwatch"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 30) -> list:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.posts) >= count, timeout), self.posts
            return list(self.posts)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Sending:
    """The alert notifier's queue and retries (services/alerts/notify.Dispatcher) on an event loop of its own."""

    def __init__(self):
        self.dispatcher = Dispatcher(None, None, "http://127.0.0.1:8080", timedelta(minutes=1))
        self.loop = asyncio.new_event_loop()
        self.task = self.loop.create_task(self.dispatcher.run())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def send(self, items) -> None:
        self.loop.call_soon_threadsafe(self.dispatcher.enqueue, items)

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
    r = Receiver(failures=2)
    yield r
    r.close()


@pytest.fixture()
def sending():
    s = Sending()
    yield s
    s.close()


def signed(headers: dict, body: bytes) -> bool:
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers.get("X-Claimwatch-Signature", ""), expected)


def test_events_arrive_signed_and_are_retried_until_the_target_answers(tmp_path, receiver, sending):
    settings = {"triage": {"webhook_url": receiver.url, "webhook_secret": SECRET, "default_team": "platform"},
                "owners": [{"route": "billing-*", "team": "payments"}]}
    with triage_world(tmp_path, **settings) as (components, clock):
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
        posts = receiver.wait_for(5)  # the first event twice refused, then each event once
        # the failing target got the very same signed event until it answered
        assert posts[0] == posts[1] == posts[2]
        events = [json.loads(body) for _, body in posts[2:]]
        assert [e["event"] for e in events] == ["created", "assigned", "resolved"]
        assert all(signed(headers, body) for headers, body in posts)
        assert not any(hmac.compare_digest(h["X-Claimwatch-Signature"], "sha256=" + hmac.new(
            b"another-secret-entirely", b, hashlib.sha256).hexdigest()) for h, b in posts)
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
        components.repos.issues.save([replace(record, state=REGRESSED, history=(
            *record.history, {"at": clock.now.isoformat(), "event": "regressed", "versions": {"model": "gen-2"}}))])
        sending.send(triage.tick(clock.at(T0 + timedelta(hours=1))))
        later = [json.loads(body) for _, body in receiver.wait_for(7)[5:]]
        by_event = {e["event"]: e for e in later}
        assert sorted(by_event) == ["escalating", "regressed"]
        assert by_event["escalating"]["issue"]["issue_id"] == "iss-b" and by_event["escalating"]["team"] == "platform"
        regressed = by_event["regressed"]
        assert regressed["reopen_ticket"] is True and regressed["ticket_url"] == "https://tickets.example/PAY-7"
        assert "https://tickets.example/PAY-7 was closed with it: reopen it" in regressed["text"]
        assert triage.tick(clock.at(T0 + timedelta(hours=1, minutes=1))) == []  # each event is sent once
