"""A private embedded store for one backtest: the live schema, minus what a backtest never reads."""

from __future__ import annotations

from pathlib import Path

from services.store.backends import ChdbStore, Store
from services.store.migrate import migrate
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import INSERT_SETTINGS

UNUSED_VIEWS = ("claims_mv",)  # per-claim rows: the evaluator reads minute buckets only


def private_store(workdir: Path) -> ChdbStore:
    store = ChdbStore(workdir / "clickhouse")
    migrate(store)
    RetentionKeeper(store).apply(KEEP_EVERYTHING)  # a file of old events must not expire mid-run
    for view in UNUSED_VIEWS:
        store.command(f"DROP VIEW IF EXISTS {view}")
    return store


def insert_event_rows(store: Store, rows: list[dict]) -> None:
    """Insert ``events`` rows (the ``rate_minute`` view fills the minute buckets), as the live writer does."""
    if rows:
        store.insert("events", rows, INSERT_SETTINGS)
