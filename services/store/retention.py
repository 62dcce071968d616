"""Retention: ClickHouse TTLs on event time, set by the schema and brought in line with settings on start.

Raw rows (``events``, ``claims``, the writer's ``event_keys`` and the ``dlq`` record of each dead letter) are kept
``raw_days``;
per-minute aggregates (``rate_minute`` and its copy by time, ``rate_minute_by_time``) ``aggregate_days``; alerts,
issues and the eval set have no TTL.

TTLs run on event time (``observed_at``, ``minute``), not arrival time, so a backfill expires by when
its answers happened. What that means for data older than ``raw_days`` when it arrives: its events
and claims are stored, the materialized views add it to ``rate_minute`` (kept ``aggregate_days``),
and the raw rows are deleted at the next TTL merge (seconds to hours later). The idempotent writer
recognises a redelivered event only while its raw row is stored (or, for an identical batch, while
ClickHouse remembers the insert's dedup token), so re-sending such old events after their raw rows
are gone counts them again in ``rate_minute``: replay history older than ``raw_days`` once, or raise
``raw_days`` for the backfill.

ClickHouse deletes expired rows when it merges parts (``OPTIMIZE TABLE ... FINAL`` forces it), and a
changed TTL is materialised on existing parts by a background mutation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.store.backends import Store

# table -> its event-time column (a DateTime expression). New per-minute aggregate tables go in AGGREGATE_TABLES.
RAW_TABLES = {
    "events": "toDateTime(observed_at)",
    "claims": "toDateTime(observed_at)",
    "event_keys": "toDateTime(observed_at)",
    "dlq": "toDateTime(received_at)",
}
AGGREGATE_TABLES = {"rate_minute": "minute", "rate_minute_by_time": "minute"}
RETAINED_TABLES = {**RAW_TABLES, **AGGREGATE_TABLES}

# TTL expressions are DateTime, which ends in 2106: a longer TTL wraps into the past and expires everything.
MAX_DAYS = 3650

_TTL_CLAUSE = re.compile(r"\bTTL\s+(.+?)(?:\s+SETTINGS\s|$)")
_DAYS = re.compile(r"(?:toIntervalDay\((\d+)\)|INTERVAL\s+(\d+)\s+DAY)", re.IGNORECASE)


@dataclass(frozen=True)
class Retention:
    """Days to keep raw rows and minute aggregates; None keeps them forever (backtests' scratch stores)."""

    raw_days: int | None = 30
    aggregate_days: int | None = 400

    def __post_init__(self) -> None:
        for name in ("raw_days", "aggregate_days"):
            days = getattr(self, name)
            if days is not None and not 1 <= days <= MAX_DAYS:
                raise ValueError(f"{name} must be between 1 and {MAX_DAYS} days, got {days}")

    def days_for(self, table: str) -> int | None:
        return self.raw_days if table in RAW_TABLES else self.aggregate_days

    def ttl_for(self, table: str) -> str | None:
        """The TTL expression for ``table``, written as ClickHouse normalises it (so it reads back equal)."""
        days = self.days_for(table)
        return None if days is None else f"{RETAINED_TABLES[table]} + toIntervalDay({days})"


KEEP_EVERYTHING = Retention(None, None)


def ttl_of(engine_full: str) -> str | None:
    """The table TTL expression in a ``system.tables.engine_full`` text, or None when it has none."""
    found = _TTL_CLAUSE.search(engine_full or "")
    return found[1].strip() if found else None


def ttl_days(ttl: str | None) -> int | None:
    """Days of a TTL written as ``column + toIntervalDay(N)`` (or ``INTERVAL N DAY``); None without one."""
    found = _DAYS.search(ttl or "")
    return int(found[1] or found[2]) if found else None


class RetentionKeeper:
    """Reads the TTLs in force and changes only those that differ from a ``Retention``."""

    def __init__(self, store: Store):
        self.store = store

    def ttls(self) -> dict[str, str | None]:
        """Each MergeTree table's TTL expression (None: kept forever)."""
        rows = self.store.query(
            "SELECT name, engine_full FROM system.tables WHERE database = currentDatabase() "
            "AND engine LIKE '%MergeTree' ORDER BY name"
        )
        return {r["name"]: ttl_of(r["engine_full"]) for r in rows}

    def apply(self, retention: Retention) -> list[str]:
        """Bring each retained table's TTL in line with ``retention``; returns the tables changed."""
        in_force = self.ttls()
        changed = []
        for table, column in RETAINED_TABLES.items():
            if table not in in_force:
                continue  # not created (yet): migrations run first
            current, wanted = in_force[table], retention.days_for(table)
            if current is None and wanted is None:
                continue
            if current is not None and ttl_days(current) == wanted and column in current:
                continue
            if wanted is None:
                self.store.command(f"ALTER TABLE {table} REMOVE TTL")
            else:
                self.store.command(f"ALTER TABLE {table} MODIFY TTL {retention.ttl_for(table)}")
            changed.append(table)
        return changed
