"""Numbered SQL migrations (``migrations/NNN_name.sql``), applied once each, in order, on start.

001_baseline is the schema of 0.1.0 in one piece; later migrations go on top of it. A store holding a migration
this version does not ship (one made before the baseline, or by a newer claimwatch) is refused, not guessed at.
"""

from __future__ import annotations

import re
from importlib import resources

from services.core.errors import StoreError
from services.store.backends import Store

_STATEMENT_END = re.compile(r";\s*$", re.MULTILINE)


def _migrations() -> list[tuple[int, str, str]]:
    found = []
    for entry in resources.files("services.store").joinpath("migrations").iterdir():
        match = re.fullmatch(r"(\d{3})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match[1]), match[2], entry.read_text()))
    return sorted(found)


def statements(sql: str) -> list[str]:
    without_comments = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in _STATEMENT_END.split(without_comments) if s.strip()]


def unknown_schema(store: Store, strange: tuple[int, str]) -> StoreError:
    return StoreError(
        f"the store at {store.url} holds migration {strange[0]:03d}_{strange[1]}, "
        "which this claimwatch does not ship: it was made before the 0.1.0 schema baseline, or by a newer "
        "version, and cannot be upgraded. Start fresh: stop claimwatch, move the store's directory aside (or "
        "drop its database on a ClickHouse server), start again, and re-send the verdicts you need "
        "(`claimwatch produce FILE` sends a JSONL file of them)."
    )


def migrate(store: Store) -> list[int]:
    """Apply pending migrations; returns the versions applied now."""
    store.command(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version UInt32, name String, "
        "applied_at DateTime DEFAULT now()) ENGINE = ReplacingMergeTree ORDER BY version"
    )
    done = {(r["version"], r["name"]) for r in store.query("SELECT version, name FROM schema_migrations FINAL")}
    shipped = _migrations()
    if strange := sorted(done - {(version, name) for version, name, _ in shipped}):
        raise unknown_schema(store, strange[0])
    applied = []
    for version, name, sql in shipped:
        if (version, name) in done:
            continue
        for statement in statements(sql):
            store.command(statement)
        store.insert("schema_migrations", [{"version": version, "name": name}])
        applied.append(version)
    return applied
