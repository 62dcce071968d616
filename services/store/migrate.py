"""Numbered SQL migrations (``migrations/NNN_name.sql``), applied once each, in order, on start."""

from __future__ import annotations

import re
from importlib import resources

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


def migrate(store: Store) -> list[int]:
    """Apply pending migrations; returns the versions applied now."""
    store.command(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version UInt32, name String, "
        "applied_at DateTime DEFAULT now()) ENGINE = ReplacingMergeTree ORDER BY version"
    )
    done = {r["version"] for r in store.query("SELECT version FROM schema_migrations")}
    applied = []
    for version, name, sql in _migrations():
        if version in done:
            continue
        for statement in statements(sql):
            store.command(statement)
        store.insert("schema_migrations", [{"version": version, "name": name}])
        applied.append(version)
    return applied
