"""One queue per notification receiver, so that a slow or failing receiver delays only its own notifications.

Plain state, no I/O: the Dispatcher (services/alerts/notify/dispatch.py) sends from these queues, one task each.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

ALERTMANAGER, WEBHOOK, ISSUE_WEBHOOK = "alertmanager", "webhook", "issue_webhook"  # the `receiver` label values
RECEIVERS = (ALERTMANAGER, WEBHOOK, ISSUE_WEBHOOK)  # an Outgoing's target names its receiver


@dataclass(frozen=True)
class Outgoing:
    target: str  # the receiver: "alertmanager", "webhook" or "issue_webhook" (RECEIVERS)
    url: str
    body: object  # sent as JSON; bytes are sent as they are (a signed body)
    headers: Mapping[str, str] = field(default_factory=dict)
    # What it tells (alert/<alert_id>/<state>, issue/<delivery>): logged and sent once per receiver. None: a
    # periodic resend, neither logged nor worth sending behind a newer one.
    key: str | None = None


FAILING_ALARM = timedelta(minutes=10)  # a receiver failing this long shows as down on the ops page (and pages)


@dataclass(frozen=True)
class Queued:
    item: Outgoing
    since: datetime  # when it was logged (or queued, when it is not logged)


class ReceiverQueue:
    """A receiver's notifications, sent in order, and its current run of failed attempts."""

    def __init__(self, name: str, max_queue: int):
        self.name, self.max_queue = name, max_queue
        self.waiting: deque[Queued] = deque()
        self.sending: Queued | None = None
        self.failing_since: datetime | None = None
        self.last_error = ""
        self._ready = asyncio.Event()

    def put(self, item: Outgoing, since: datetime) -> list[Queued]:
        """Queue ``item``; returns what it pushes out: a queued resend it supersedes (``key`` None: only the newest
        resend is worth sending), and the oldest when the queue is full (bounded: shed rather than grow)."""
        out = []
        if item.key is None:
            out = [q for q in self.waiting if q.item.key is None]
            self.waiting = deque(q for q in self.waiting if q.item.key is not None)
        if len(self.waiting) >= self.max_queue:
            out.append(self.waiting.popleft())
        self.waiting.append(Queued(item, since))
        self._ready.set()
        return out

    def holds(self, key: str) -> bool:
        return any(q.item.key == key for q in (*self.waiting, *([self.sending] if self.sending else [])))

    async def next(self) -> Queued:
        """The oldest queued notification, once there is one; it counts as queued until ``done``."""
        while not self.waiting:
            self._ready.clear()
            await self._ready.wait()
        self.sending = self.waiting.popleft()
        return self.sending

    def done(self) -> None:
        self.sending = None

    def items(self) -> list[Outgoing]:
        return [q.item for q in (*([self.sending] if self.sending else []), *self.waiting)]

    @property
    def depth(self) -> int:
        return len(self.waiting) + (self.sending is not None)

    def oldest_seconds(self, now: datetime) -> float:
        first = self.sending or (self.waiting[0] if self.waiting else None)
        return max(0.0, (now - first.since).total_seconds()) if first else 0.0

    def failed(self, now: datetime, problem: str) -> bool:
        """An attempt failed; True when it starts a run of failures."""
        started = self.failing_since is None
        if started:
            self.failing_since = now
        self.last_error = problem
        return started

    def succeeded(self) -> bool:
        """An attempt succeeded; True when it ends a run of failures."""
        ended = self.failing_since is not None
        self.failing_since, self.last_error = None, ""
        return ended

    def failing_seconds(self, now: datetime) -> float:
        return max(0.0, (now - self.failing_since).total_seconds()) if self.failing_since else 0.0


def receiver_status(
    found: dict[str, dict[str, Any]], configured: dict[str, bool], now: datetime
) -> list[dict[str, Any]]:
    """Each receiver as the ops page shows it, from the notification log's ``receivers`` (services/store/
    notifications.py): ``state`` (off: not configured; ok; failing; down: failing FAILING_ALARM or longer), the
    notifications ``waiting`` and the age of the oldest, and since when and why it fails."""
    out = []
    for name in RECEIVERS:
        seen = found.get(name, {})
        since, oldest = seen.get("failing_since"), seen.get("oldest")
        failing = max(0.0, (now - since).total_seconds()) if since else 0.0
        state = (
            "off"
            if not configured.get(name)
            else "ok"
            if since is None
            else "down"
            if failing >= FAILING_ALARM.total_seconds()
            else "failing"
        )
        out.append(
            {
                "receiver": name,
                "state": state,
                "waiting": seen.get("waiting", 0),
                "oldest_seconds": max(0.0, (now - oldest).total_seconds()) if oldest else None,
                "failing_since": since,
                "failing_seconds": failing,
                "last_error": seen.get("last_error", ""),
            }
        )
    return out
