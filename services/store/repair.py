"""Repair the one non-atomic step: an INSERT into `events` and its materialized views.

ClickHouse commits the `events` part first, then each view's part separately. A process
killed between them leaves answers stored without their claim rows, minute aggregates or
keys (`event_keys`, where the idempotent writer looks for what it stored). So before a
worker that owns the store starts consuming, it re-derives the views for recently
ingested answers from `events`, the source of truth, using the views' own SELECTs:
missing keys and claim rows are inserted, and each touched minute bucket gets a correction
row (expected minus stored) where they differ. With the keys back, the writer skips the
redelivered answers instead of counting them twice. Running it twice changes nothing.

With several workers writing to one ClickHouse server, run `claimwatch repair` while
they are stopped: a concurrent insert could be mid-way and look like a gap.

Answers within a day of the raw TTL (services/store/retention.py) are left alone: TTL merges may
already have deleted some of their neighbours from `events`, and a bucket re-derived from the rest
would undercount the aggregates, which outlive the raw rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from services.store.backends import Store
from services.store.convert import ch_time
from services.store.rates import SUM_FIELDS
from services.store.retention import MAX_DAYS, RetentionKeeper, ttl_days

WEIGHT_TOLERANCE = 1e-6  # weighted sums added in another order differ in their last bits, not by a claim
SPAN_ANSWERS = 200_000  # answers whose buckets one comparison re-derives: bounds the store's memory for it

KEY = ("dim", "value", "route", "minute")
TTL_MARGIN = timedelta(days=1)
MAX_REPAIR_HORIZON = timedelta(days=MAX_DAYS)  # the longest retention: older answers are not stored
EPOCH = datetime(1970, 1, 2, tzinfo=UTC)  # before any event time


@dataclass(frozen=True)
class RepairReport:
    keys_rows: int
    claims_rows: int
    buckets_corrected: int

    @property
    def changed(self) -> bool:
        return any((self.keys_rows, self.claims_rows, self.buckets_corrected))


def _view_select(store: Store, view: str, source: str) -> str:
    """The view's SELECT with its source table swapped for `source` (a subquery)."""
    row = store.query(
        "SELECT as_select, currentDatabase() AS db FROM system.tables "
        "WHERE database = currentDatabase() AND name = {v:String}",
        {"v": view},
    )[0]
    table = f"FROM {row['db']}.events"
    if row["as_select"].count(table) != 1:
        raise RuntimeError(f"cannot locate the source of view {view}; run migrations first")
    return row["as_select"].replace(table, f"FROM ({source})")


def _insert_missing(store: Store, table: str, view: str, answers: str, params: dict) -> int:
    """Insert the rows ``view`` derives from those of ``answers`` whose event_id ``table`` lacks; how many answers."""
    missing = (
        f"SELECT * FROM ({answers}) WHERE event_id NOT IN "
        f"(SELECT event_id FROM {table} WHERE observed_at >= {{from:DateTime64(3)}})"
    )
    lacking = store.query(f"SELECT count() AS n FROM ({missing})", params)[0]["n"]
    if lacking:
        rows = _view_select(store, view, missing)
        columns = ", ".join(r["name"] for r in store.query(f"DESCRIBE TABLE ({rows})", params))
        store.command(f"INSERT INTO {table} ({columns}) {rows}", params)  # by name: a view may fill only some
    return lacking


def repair(store: Store, since: datetime, observed_from: datetime | None = None) -> RepairReport:
    """Re-derive the views for answers ingested since ``since`` (and observed since ``observed_from``). Only what
    is missing is added: a bucket that counts more than its stored answers lost raw rows (damage, expiry), which
    only ``rebuild`` settles, on an operator's word."""
    params = {"since": ch_time(since), "observed_from": ch_time(observed_from or EPOCH)}
    recent = (
        "SELECT * FROM events FINAL WHERE ingested_at >= {since:DateTime64(3)} "
        "AND observed_at >= {observed_from:DateTime64(3)}"
    )
    first = store.query(f"SELECT min(observed_at) AS m, count() AS n FROM ({recent})", params)[0]
    if not first["n"]:
        return RepairReport(0, 0, 0)
    params["from"] = first["m"]

    keys = _insert_missing(store, "event_keys", "event_keys_mv", recent, params)
    lacking = _insert_missing(
        store, "claims", "claims_mv", f"SELECT * FROM ({recent}) WHERE length(verdicts) > 0", params
    )
    corrections = 0
    for lo, hi in _minute_spans(store, recent, params, SPAN_ANSWERS):  # a bounded share of the answers at a time
        touched = (
            f"SELECT DISTINCT route, toStartOfMinute(observed_at) AS minute FROM ({recent}) "
            f"WHERE observed_at >= '{lo}' AND observed_at < '{hi}'"
        )
        found = [c for c in bucket_deltas(store, touched, params) if all(c[f] >= -WEIGHT_TOLERANCE for f in SUM_FIELDS)]
        if found:
            store.insert("rate_minute", found)
        corrections += len(found)
    return RepairReport(keys, lacking, corrections)


def _minute_spans(store: Store, answers: str, params: dict, per_span: int) -> list[tuple[str, str]]:
    """Consecutive [from, to) spans of whole minutes of ``answers``' observed_at, each of about ``per_span`` answers
    (a minute holding more is a span alone), as the store writes times."""
    minutes = store.query(
        f"SELECT toString(toStartOfMinute(observed_at)) AS minute, count() AS n FROM ({answers}) "
        "GROUP BY minute ORDER BY minute",
        params,
    )
    spans, start, held = [], None, 0
    for row in minutes:
        if start is not None and held + row["n"] > per_span:
            spans.append((start, row["minute"]))
            start, held = None, 0
        start = start if start is not None else row["minute"]
        held += row["n"]
    if start is not None:
        spans.append((start, "2299-12-31 00:00:00"))
    return spans


def bucket_deltas(store: Store, touched: str, params: dict) -> list[dict]:
    """For each minute bucket of ``touched`` (route, minute) whose aggregates differ from what the stored answers
    derive: the row that, added, makes them agree. Compared in the store: only the rows that differ come back (a
    restart after a large backfill touches about a million buckets, which as Python rows took 20 GB)."""
    in_buckets = f"SELECT * FROM events FINAL WHERE (route, toStartOfMinute(observed_at)) IN ({touched})"
    sums = ", ".join(f"sum({c}) AS {c}" for c in SUM_FIELDS)
    expected = (
        f"SELECT dim, value, route, minute, {sums} FROM ({_view_select(store, 'rate_minute_mv', in_buckets)}) "
        "GROUP BY dim, value, route, minute"
    )
    stored = (
        f"SELECT dim, value, route, minute, {sums} FROM rate_minute WHERE (route, minute) IN ({touched}) "
        "GROUP BY dim, value, route, minute"
    )
    deltas = ", ".join(f"e.{c} - s.{c} AS {c}" for c in SUM_FIELDS)  # a side without the bucket reads 0
    differ = " OR ".join(
        f"abs(e.{c} - s.{c}) > {WEIGHT_TOLERANCE}" for c in SUM_FIELDS
    )  # counts are whole; weights not
    return store.query(
        f"SELECT dim, value, route, toString(minute) AS minute, {deltas} FROM ({expected}) AS e "
        f"FULL OUTER JOIN ({stored}) AS s USING (dim, value, route, minute) WHERE {differ}",
        params,
    )


def repair_recent(store: Store, now: datetime, horizon: timedelta = timedelta(hours=1)) -> RepairReport:
    raw_days = ttl_days(RetentionKeeper(store).ttls().get("events"))
    return repair(store, now - horizon, None if raw_days is None else now - timedelta(days=raw_days) + TTL_MARGIN)
