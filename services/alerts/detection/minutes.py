"""Event-time minutes as the detectors count them: whole minutes since the epoch."""

from __future__ import annotations

from datetime import UTC, datetime


def minute_number(now: datetime) -> int:
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise ValueError(f"now must be a timezone-aware datetime, got {now!r}")
    return int(now.timestamp() // 60)


def minute_start(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, tz=UTC)
