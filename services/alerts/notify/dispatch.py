"""Notification: dedup -> silence -> render -> log -> send, with retries that never block ingestion.

``plan`` and ``resend`` decide what to send (pure: services/alerts/notify/plan.py; payloads.py renders it). Each
receiver has its own bounded queue drained by a task of its own (services/alerts/notify/receivers.py), so a slow or
failing receiver delays only its own notifications; the notification log (services/store/notifications.py) keeps
what is to be sent, and what was sent to whom, across restarts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.inhibition import INHIBIT_RULES, InhibitRule
from services.alerts.notify.plan import NotificationPlanner
from services.alerts.notify.receivers import RECEIVERS, Outgoing, ReceiverQueue
from services.core.backoff import Backoff
from services.core.clock import utcnow
from services.core.threads import Run
from services.store.notifications import DELIVERED, DROPPED, FAILED, NotificationLog

if TYPE_CHECKING:
    from services.core.metrics import Metrics

log = logging.getLogger(__name__)
RELOAD_WITHIN = timedelta(days=1)  # a notification logged longer ago than this is not sent after a restart


async def _inline(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


class Dispatcher(NotificationPlanner):
    """Decides what to send (pure `plan` and `resend`: NotificationPlanner) and sends it (`run`): one queue per
    receiver, each drained apart from the others, every attempt bounded by ``attempt_timeout_seconds``.

    With an ``nflog`` (the notification log, services/store/notifications.py; called through ``run``, a thread of
    its own) a notification is logged before it is queued and settled after a 2xx or when given up; the first
    ``enqueue`` (the leader's) reloads what a previous process left pending. A crash between a 2xx and its
    settling sends it again.
    """

    def __init__(
        self,
        alertmanager_url: str | None,
        webhook_url: str | None,
        external_url: str,
        resend_every: timedelta,
        metrics: Metrics | None = None,
        max_queue: int = 1000,
        max_attempts: int = 8,
        owner_labels: Callable[[Alert], Mapping[str, str]] = lambda alert: {},
        *,
        inhibit_rules: Sequence[InhibitRule] = INHIBIT_RULES,
        retry_initial_seconds: float,
        retry_max_seconds: float,
        attempt_timeout_seconds: float,
        nflog: NotificationLog | None = None,
        run: Run = _inline,
        clock: Callable[[], datetime] = utcnow,
    ):
        super().__init__(alertmanager_url, webhook_url, external_url, resend_every, owner_labels, inhibit_rules)
        self.metrics = metrics
        self.max_attempts = max_attempts
        self.retry_seconds = (retry_initial_seconds, retry_max_seconds)  # the backoff between attempts (notify.retry_*)
        self.attempt_timeout = attempt_timeout_seconds  # notify.attempt_timeout_seconds
        self.nflog, self.nflog_run, self.clock = nflog, run, clock  # nflog_run: the log's calls, on its thread
        self.receivers = {name: ReceiverQueue(name, max_queue) for name in RECEIVERS}
        self.recovered = nflog is None
        self._recovering: asyncio.Lock | None = None
        self._background: set[asyncio.Task[None]] = set()
        if metrics is not None:
            for name, queue in self.receivers.items():
                self._watch(metrics, name, queue)

    def _watch(self, metrics: Metrics, name: str, queue: ReceiverQueue) -> None:
        """Report ``queue``'s depth, oldest wait and failing time at every scrape."""
        metrics.notify_depth.labels(name).set_function(lambda: queue.depth)
        metrics.notify_oldest.labels(name).set_function(lambda: queue.oldest_seconds(self.clock()))
        metrics.notify_failing.labels(name).set_function(lambda: queue.failing_seconds(self.clock()))

    # -- queues ------------------------------------------------------------------
    def queued(self) -> list[Outgoing]:
        """Every notification not sent yet (the one being sent first), receiver by receiver."""
        return [item for queue in self.receivers.values() for item in queue.items()]

    async def enqueue(self, items: Iterable[Outgoing]) -> None:
        """Queue each item on its receiver's queue. A resend never waits for the store; a notification with a key
        is logged first, once: one the log holds already is not queued again."""
        items = list(items)
        for item in items:
            if item.key is None:
                self._put(item, self.clock())
        keyed = [i for i in items if i.key is not None]
        if self.nflog is not None:
            await self._recover()
            keyed = await self._record(keyed) if keyed else []
        for item in keyed:
            self._put(item, self.clock())

    def _put(self, item: Outgoing, since: datetime) -> None:
        if item.target not in self.receivers:
            raise ValueError(f"unknown notification receiver {item.target!r}; one of {', '.join(RECEIVERS)}")
        for shed in self.receivers[item.target].put(item, since):
            if shed.item.key is not None:
                log.warning("%s queue full: dropped %s (logged %s)", item.target, shed.item.key, shed.since.isoformat())
                task = asyncio.ensure_future(self._settle(shed.item, DROPPED, 0, "shed from a full queue"))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    async def unlogged(self, keys: Iterable[str]) -> set[str]:
        """The keys among ``keys`` the notification log does not hold (none without a log)."""
        keys = set(keys)
        if self.nflog is None or not keys:
            return set()
        logged: set[str] = await self.nflog_run(self.nflog.logged, keys)
        return keys - logged

    async def _record(self, items: list[Outgoing]) -> list[Outgoing]:
        nflog = self.nflog
        if nflog is None:  # no log to record them in: each is sent
            return items
        try:
            recorded: list[Outgoing] = await self.nflog_run(nflog.record, items, self.clock())
            return recorded
        except Exception as exc:  # the store is down: send anyway, from memory
            log.warning("could not log %d notifications (%s); sending them unlogged", len(items), exc)
            return items

    async def _recover(self) -> None:
        """Once, at the leader's first notification: queue what the log holds undelivered (a crash, a kill)."""
        nflog = self.nflog
        if self.recovered or nflog is None:  # without a log there is nothing to recover
            return
        self._recovering = self._recovering or asyncio.Lock()
        async with self._recovering:
            if self.recovered:
                return
            try:
                rows = await self.nflog_run(nflog.pending, self.clock() - RELOAD_WITHIN)
            except Exception as exc:
                log.warning("could not read the notification log (%s); trying again at the next notification", exc)
                return
            rows = [
                r for r in rows if r["receiver"] in self.receivers and not self.receivers[r["receiver"]].holds(r["key"])
            ]
            for r in rows:
                headers = {"Content-Type": "application/json", **r["headers"]}
                self._put(Outgoing(r["receiver"], r["url"], r["body"], headers, r["key"]), r["created_at"])
            self.recovered = True
            log.info("notification log: %d undelivered notifications reloaded", len(rows))

    # -- delivery ----------------------------------------------------------------
    async def run(self) -> None:
        """Drain every receiver's queue, each in a task of its own."""
        async with httpx.AsyncClient(timeout=self.attempt_timeout) as client:
            await asyncio.gather(*(self._drain(client, queue) for queue in self.receivers.values()))

    async def _drain(self, client: httpx.AsyncClient, queue: ReceiverQueue) -> None:
        while True:
            queued = await queue.next()
            try:
                await self._deliver(client, queue, queued.item)
            except Exception:  # a bug here must not stop this receiver's notifications for good
                log.exception("could not deliver %s notification %s", queue.name, queued.item.key)
            finally:
                queue.done()

    async def _attempt(self, client: httpx.AsyncClient, item: Outgoing) -> str | None:
        """One attempt, bounded by the attempt timeout; None on a 2xx, else what went wrong."""
        content = {"content": item.body} if isinstance(item.body, bytes) else {"json": item.body}
        try:
            response = await asyncio.wait_for(
                client.post(item.url, headers=dict(item.headers), **content), self.attempt_timeout
            )
        except TimeoutError:
            return f"no answer within {self.attempt_timeout:g} s"
        except httpx.HTTPError as exc:
            return repr(exc)
        return None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}: {response.text[:200]}"

    async def _deliver(self, client: httpx.AsyncClient, queue: ReceiverQueue, item: Outgoing) -> None:
        backoff = Backoff(*self.retry_seconds)
        for attempt in range(1, self.max_attempts + 1):
            problem = await self._attempt(client, item)
            if problem is None:
                if queue.succeeded():
                    await self._store_health(queue)
                if self.metrics is not None:
                    self.metrics.notify_sent.labels(queue.name).inc()
                await self._settle(item, DELIVERED, attempt, "")
                return
            if queue.failed(self.clock(), problem):
                await self._store_health(queue)
            if self.metrics is not None:
                self.metrics.notify_failures.labels(item.target).inc()
            log.warning(
                "%s notification to %s failed (%s), attempt %d/%d",
                item.target,
                item.url,
                problem,
                attempt,
                self.max_attempts,
            )
            if attempt < self.max_attempts:
                await asyncio.sleep(backoff.next_delay())
        log.error("giving up on %s notification to %s after %d attempts", item.target, item.url, self.max_attempts)
        assert problem is not None  # an attempt without one returned above
        await self._settle(item, FAILED, self.max_attempts, problem)

    async def _settle(self, item: Outgoing, state: str, attempts: int, error: str) -> None:
        if self.nflog is None or item.key is None:
            return
        try:
            await self.nflog_run(self.nflog.settle, item, state, attempts, error, self.clock())
        except Exception as exc:  # it stays pending in the log: a restart sends it again
            log.warning("could not log the %s notification %s as %s (%s)", item.target, item.key, state, exc)

    async def _store_health(self, queue: ReceiverQueue) -> None:
        """A run of failures began or ended: what the ops page shows, from any process."""
        if self.nflog is None:
            return
        try:
            await self.nflog_run(
                self.nflog.set_failing, queue.name, queue.failing_since, queue.last_error, self.clock()
            )
        except Exception as exc:
            log.warning("could not store the %s receiver's state (%s)", queue.name, exc)
