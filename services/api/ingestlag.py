"""How far ingest is behind the broker's log, for the dashboard's banner and GET /api/ingest.

The worker may run in another process, so the figure comes from the broker: the consumer group's commits and the
log ends (services/ingest/offsets.py: unread). It is read at most once every ``ttl`` seconds, by one request at a
time (the others take the last figure at once), and a read gives up after ``timeout``: a page never waits longer,
and a broker that cannot be read is reported, never raised.

The figure is a lower bound: Tansu reports a log's end as its last batch's first offset + 1, short by the rest of
that batch (the worker's gauge corrects this from its own fetches; a reader outside the group cannot).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import Field

from services.core.readmodel import Read


@dataclass(frozen=True)
class IngestLag:
    messages: int | None  # messages the worker has yet to ingest; None when the broker could not be read
    threshold: int  # ingest.lag_warning_messages: pages warn beyond it
    error: str | None = None

    @property
    def behind(self) -> bool:
        return self.messages is not None and self.messages > self.threshold

    def read(self) -> IngestLagRead:
        return IngestLagRead(
            messages_behind=self.messages, threshold=self.threshold, behind=self.behind, error=self.error
        )

    def as_dict(self) -> dict:
        return self.read().as_dict()


class IngestLagRead(Read):
    messages_behind: int | None = Field(
        description="messages on the verdicts topic the worker has yet to ingest "
        "(at least this many); null when the broker could not be read"
    )
    threshold: int = Field(description="ingest.lag_warning_messages: beyond it, every page warns of stale figures")
    behind: bool
    error: str | None


class LagWatch:
    def __init__(
        self,
        read: Callable[[], Awaitable[int]],
        threshold: int,
        ttl: float = 5.0,
        timeout: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.read, self.threshold, self.ttl, self.timeout, self.clock = read, threshold, ttl, timeout, clock
        self._last: IngestLag | None = None
        self._read_at: float | None = None

    async def current(self) -> IngestLag | None:
        """The newest figure; None while the first read is still under way."""
        now = self.clock()
        if self._read_at is not None and now - self._read_at < self.ttl:
            return self._last
        self._read_at = now  # before awaiting: requests meanwhile take the last figure
        try:
            self._last = IngestLag(await asyncio.wait_for(self.read(), self.timeout), self.threshold)
        except TimeoutError:
            self._last = IngestLag(None, self.threshold, f"the broker did not answer within {self.timeout:g} s")
        except Exception as exc:  # a banner must never break a page
            self._last = IngestLag(None, self.threshold, f"{type(exc).__name__}: {exc}")
        return self._last
