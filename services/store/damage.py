"""Damage to the store's files, found before a worker consumes, and the operator's way back.

A part whose files are missing or corrupt is detached by ClickHouse as ``broken-on-start`` when the store opens,
and the store then serves the rest as if nothing happened: answers gone from ``events`` while the minute
aggregates and the writer's keys still count them. Repairing from there would lower the rates, and a replay
would store nothing (the keys say "already stored"). So a worker refuses to start on a damaged store
(``find_damage``: the parts detached as broken; CHECK TABLE on the tables ingest writes too, where an operator asks
for it, since it reads every byte), and ``rebuild``, run by
`claimwatch repair --damaged` with the workers stopped, makes everything derived agree with the answers the
store holds and drops the broken parts; a replay of the source then restores exactly what was lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from services.store.backends import Store, sql_literal
from services.store.convert import ch_time
from services.store.rates import SUM_FIELDS
from services.store.repair import EPOCH, TTL_MARGIN, bucket_deltas, repair
from services.store.retention import RetentionKeeper, ttl_days

_NAME = re.compile(r"[A-Za-z0-9_-]+")
CHECKED_TABLES = ("events", "event_keys", "claims", "rate_minute", "dlq")  # what ingest writes and rates read


@dataclass(frozen=True)
class DamagedPart:
    table: str
    part: str
    problem: str  # why it is damaged, in ClickHouse's words
    rows: int | None = None  # when the part's own row count is still readable

    def __str__(self) -> str:
        rows = "" if self.rows is None else f", {self.rows:,} rows"
        return f"{self.table} part {self.part} ({self.problem}{rows})"


def find_damage(store: Store, check: bool = True) -> list[DamagedPart]:
    """Parts ClickHouse detached as broken, and (``check``) active parts of CHECKED_TABLES that fail CHECK TABLE."""
    found = [
        DamagedPart(r["table"], r["name"], f"detached as {r['reason']}", _rows(r["path"]))
        for r in store.query(
            "SELECT table, name, reason, path FROM system.detached_parts "
            "WHERE database = currentDatabase() AND reason LIKE '%broken%' ORDER BY table, name"
        )
    ]
    if check:
        tables = {r["name"] for r in store.query("SELECT name FROM system.tables WHERE database = currentDatabase()")}
        for table in (t for t in CHECKED_TABLES if t in tables):
            for row in store.query(f"CHECK TABLE {table} SETTINGS check_query_single_value_result = 0"):
                if not row.get("is_passed", 1):
                    found.append(
                        DamagedPart(table, row.get("part_path", ""), row.get("message") or "failed CHECK TABLE")
                    )
    return found


def _rows(path: str) -> int | None:
    """A detached part's row count, from its count.txt where this process can read it (the embedded store)."""
    try:
        return int(Path(path, "count.txt").read_text().strip())
    except (OSError, ValueError):
        return None


def damage_message(damage: list[DamagedPart], store_url: str) -> str:
    parts = "; ".join(map(str, damage[:5])) + (f"; and {len(damage) - 5} more" if len(damage) > 5 else "")
    return (
        f"the store at {store_url} is damaged: {parts}. Its rates would be wrong and a replay would be skipped as "
        f"duplicates, so the worker does not start. With every worker stopped, run `claimwatch repair --damaged "
        f"--clickhouse {store_url}`: it makes the keys, claims and minute aggregates agree with the answers the "
        "store still holds and prints the span to replay from the source; or restore the store from a backup"
    )


@dataclass
class RebuildReport:
    keys_removed: int = 0
    claims_removed: int = 0
    keys_restored: int = 0
    claims_restored: int = 0
    answers_lost: int = 0  # counted in the aggregates, no longer stored: replay them
    buckets_lowered: int = 0
    buckets_raised: int = 0
    lost_routes: list[str] = field(default_factory=list)
    lost_from: str | None = None  # the first and last minute of the answers lost
    lost_until: str | None = None
    parts_dropped: list[str] = field(default_factory=list)
    kept_from: str = ""  # the span rebuilt: raw rows older than this have expired by retention


def rebuild(store: Store, now: datetime, damage: list[DamagedPart]) -> RebuildReport:
    """Make what derives from ``events`` (keys, claim rows, minute aggregates) agree with the answers stored, over
    the span whose raw rows retention keeps; then drop the broken parts in ``damage``. Workers must be stopped."""
    for part in damage:  # an active part that fails CHECK TABLE cannot be read: set it aside like a broken one
        if not part.problem.startswith("detached as"):
            store.command(f"ALTER TABLE {_checked(part.table)} DETACH PART '{_checked(part.part)}'")
    days = ttl_days(RetentionKeeper(store).ttls().get("events"))
    kept_from = EPOCH if days is None else now - timedelta(days=days) + TTL_MARGIN
    params = {"from": ch_time(kept_from)}
    report = RebuildReport(kept_from=ch_time(kept_from))
    since = f"toDateTime64({sql_literal(ch_time(kept_from).encode())}, 3, 'UTC')"  # a mutation takes no parameters
    for table, attr in (("event_keys", "keys_removed"), ("claims", "claims_removed")):
        orphans = (
            f"observed_at >= {since} AND event_id NOT IN (SELECT event_id FROM events WHERE observed_at >= {since})"
        )
        setattr(report, attr, store.query(f"SELECT count() AS n FROM {table} WHERE {orphans}")[0]["n"])
        if getattr(report, attr):
            store.command(f"DELETE FROM {table} WHERE {orphans}")
    restored = repair(store, EPOCH, kept_from)  # keys and claim rows of stored answers that lost theirs
    report.keys_restored, report.claims_restored = restored.keys_rows, restored.claims_rows

    touched = (
        "SELECT DISTINCT route, minute FROM rate_minute WHERE minute >= {from:DateTime64(3)} UNION DISTINCT "
        "SELECT DISTINCT route, toDateTime(toStartOfMinute(observed_at)) FROM events "
        "WHERE observed_at >= {from:DateTime64(3)}"
    )
    deltas = bucket_deltas(store, f"SELECT route, minute FROM ({touched})", params)
    if deltas:
        store.insert("rate_minute", deltas)
    lost = [d for d in deltas if d["dim"] == "" and d["events"] < 0]
    report.answers_lost = -sum(d["events"] for d in lost)
    report.buckets_lowered = sum(1 for d in deltas if any(d[f] < 0 for f in SUM_FIELDS))
    report.buckets_raised = len(deltas) - report.buckets_lowered
    report.lost_routes = sorted({d["route"] for d in lost})
    if lost:
        report.lost_from, report.lost_until = min(d["minute"] for d in lost), max(d["minute"] for d in lost)
    for part in damage:
        store.command(
            f"ALTER TABLE {_checked(part.table)} DROP DETACHED PART '{_checked(part.part)}' "
            "SETTINGS allow_drop_detached = 1"
        )
        report.parts_dropped.append(f"{part.table} {part.part}")
    return report


def _checked(name: str) -> str:
    """A table or part name as ClickHouse makes them, safe to write into a statement."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"unexpected table or part name {name!r}")
    return name
