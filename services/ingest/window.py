"""Which event times live ingest stores: the window an event's ``observed_at`` must lie in.

Outside it, an acked event would be lost or would mislead: older than the store keeps it, a TTL merge deletes
it within seconds of its insert; far ahead of the clock, it moves the event-time watermark that every window
ends at. So such an event is dead-lettered under a rule of its own, whose reason names the bound and the fix.
The store's own range (services/ingest/records.py) always applies; the age and skew bounds apply to live ingest
only: ``claimwatch backtest`` replays history of any age, on event time.

The clock is an argument (``now``), never read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from services.contract.model import VerdictEvent
from services.contract.rejection import Problem, Rejection
from services.ingest.records import STORABLE_FROM, STORABLE_UNTIL, store_range_problem

TOO_OLD = "observed_at.too_old"
TOO_FAR_AHEAD = "observed_at.too_far_ahead"


@dataclass(frozen=True)
class EventTimeWindow:
    """``raw_days`` and ``aggregate_days``: how long the store keeps raw rows and minute aggregates (None: for
    good). Without ``backfill`` an event may be as old as raw rows are kept; with it, as old as the minute
    aggregates are (an older one would expire on arrival and count in no rate). ``max_future_skew``: how far
    ahead of ``now`` an event may be (producers' clocks drift)."""

    raw_days: int | None = None
    aggregate_days: int | None = None
    backfill: bool = False
    max_future_skew: timedelta = timedelta(minutes=5)

    @property
    def max_age_days(self) -> int | None:
        """How old an event may be, in days (None: any age): as long as what it would be stored in is kept."""
        return self.aggregate_days if self.backfill else self.raw_days

    def problem(self, observed_at: datetime, now: datetime) -> Problem | None:
        """Why an event at ``observed_at`` is not stored at ``now``, or None."""
        unstorable = store_range_problem(observed_at)
        if unstorable is not None:
            return unstorable
        days = self.max_age_days
        if days is not None and observed_at < now - timedelta(days=days):
            return Problem(TOO_OLD, "observed_at", self._too_old(observed_at, days))
        if observed_at > now + self.max_future_skew:
            ahead = timedelta(seconds=int((observed_at - now).total_seconds()))
            return Problem(
                TOO_FAR_AHEAD,
                "observed_at",
                f"{observed_at.isoformat()} is {ahead} ahead of the worker's clock; at most "
                f"{self.max_future_skew.total_seconds():.0f} s is accepted (ingest.max_future_skew_seconds): "
                "fix the producer's clock or the UTC offset it sends",
            )
        return None

    def _too_old(self, observed_at: datetime, days: int) -> str:
        if self.backfill:
            return (
                f"{observed_at.isoformat()} is more than {days} days old, the time minute aggregates are kept "
                "(retention.aggregate_days), so it would count in no rate: raise retention.aggregate_days to "
                "backfill it"
            )
        return (
            f"{observed_at.isoformat()} is more than {days} days old, the time raw events are kept "
            "(retention.raw_days), and live ingest takes recent events only: to load history, turn on "
            "ingest.backfill (CLAIMWATCH_INGEST__BACKFILL=true) and send it again, or replay it with "
            "`claimwatch backtest`"
        )

    def bounds(self, now: datetime) -> tuple[datetime, datetime]:
        """The earliest and the latest event time stored at ``now``, both included: what ``problem`` admits, as
        two comparisons a batch's events can be held to before any of them needs its reason."""
        days = self.max_age_days
        earliest = STORABLE_FROM if days is None else max(STORABLE_FROM, now - timedelta(days=days))
        return earliest, min(now + self.max_future_skew, STORABLE_UNTIL - timedelta(microseconds=1))

    def admits(self, observed_at: datetime, now: datetime) -> bool:
        return self.problem(observed_at, now) is None

    def check(self, event: VerdictEvent, now: datetime) -> Rejection | None:
        """A valid event's rejection when its time lies outside the window (its minute is then its arrival's)."""
        problem = self.problem(event.observed_at, now)
        return None if problem is None else Rejection((problem,), event_id=event.event_id, route=event.route)
