"""One narrow store interface, two back ends running the same ClickHouse SQL.

``ChdbStore`` is the embedded engine (data under a directory, one process per
directory). ``HttpStore`` talks to a ClickHouse server through clickhouse-connect.
Both take ``{name:Type}`` query parameters, formatted by clickhouse-connect's own
binding code, and both read results as JSONEachRow so rows look the same. Writes go in as
JSON lines too (``insert_lines``: JSONEachRow unless told another JSON format), which both engines parse natively.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

import orjson
from clickhouse_connect import common as ch_common
from clickhouse_connect.driver.binding import format_bind_value

from services.core.errors import StoreError, StoreRefused

# Dict parameters bind as ClickHouse Map literals, not JSON, on both back ends.
ch_common.set_setting("dict_parameter_format", "map")

Row = dict[str, Any]
# The part codecs (merged parts in ZSTD); the embedded store reads it, a server mounts it (docker-compose.yml).
COMPRESSION_CONFIG = Path(__file__).with_name("clickhouse-compression.xml")


class Store(Protocol):
    url: str

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None: ...
    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]: ...
    def insert(self, table: str, rows: Iterable[Row], settings: Mapping[str, Any] | None = None) -> int: ...
    def insert_lines(
        self, table: str, lines: bytes, settings: Mapping[str, Any] | None = None, fmt: str = "JSONEachRow"
    ) -> int: ...
    def stream_lines(
        self, table: str, lines: bytes, settings: Mapping[str, Any] | None = None, fmt: str = "JSONEachRow"
    ) -> int: ...
    def close(self) -> None: ...


def _escaped(text: str) -> str:
    """clickhouse-connect's escape_str (a backslash before \\ ' ` tab and newline), by str.replace: it escapes a
    character at a time in Python, which for the writer's thousands of event ids a batch cost more GIL time than
    encoding the batch did. The backslash goes first, so the others' backslashes are not doubled."""
    return (
        text.replace("\\", "\\\\").replace("'", "\\'").replace("`", "\\`").replace("\t", "\\\t").replace("\n", "\\\n")
    )


def bind_value(value: Any) -> str:
    """A query parameter's text, as clickhouse-connect's format_bind_value gives it."""
    if isinstance(value, list) and all(type(v) is str for v in value):
        return "[" + ", ".join(["'" + _escaped(v) + "'" for v in value]) + "]"
    return format_bind_value(value, None, True)


def sql_literal(data: bytes) -> str:
    """UTF-8 text as a ClickHouse string literal (its two special characters escaped)."""
    return "'" + data.decode().replace("\\", "\\\\").replace("'", "\\'") + "'"


# Queries may carry a batch's keys inline (services/store/writer.py): larger than ClickHouse's 256 KiB default.
MAX_QUERY_BYTES = 64 << 20


def _bind(params: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: bind_value(v) for k, v in (params or {}).items()}


def _json_lines(rows: Iterable[Row]) -> bytes:
    return b"\n".join(orjson.dumps(r) for r in rows)


def _parse_rows(data: bytes) -> list[Row]:
    return [orjson.loads(line) for line in data.splitlines() if line]


# ClickHouse's error codes for a statement refused for its data: parse and type errors, values out of range, broken
# constraints, sizes over a limit. Every other error (connection, timeout, memory, disk, too many parts) is the
# store's state, which passes.
REFUSED_CODES = frozenset(
    {
        6,
        26,
        27,
        32,
        38,
        41,
        53,
        69,
        70,
        72,
        117,
        128,
        131,
        190,
        321,
        349,
        469,
    }
)
_CODE = re.compile(r"Code: (\d+)\.")
REMEDIES = {  # what to do next, for the store's states an operator fixes
    243: "the disk under the store is full: free space there or move the store; writes are retried",
    241: "the store ran out of memory: give it more, or lower ingest.max_batch_bytes; writes are retried",
}


def store_error(exc: BaseException) -> StoreError:
    """The engine's error as StoreError, or StoreRefused for a statement refused for its data; with the remedy for
    the states an operator fixes."""
    message = str(exc).strip()
    found = _CODE.search(message)
    code = int(found[1]) if found else None
    if code in REMEDIES:
        message = f"{REMEDIES[code]} ({message})"
    return (StoreRefused if code in REFUSED_CODES else StoreError)(message)


def _checked_name(table: str) -> str:
    if not table.isidentifier():
        raise StoreError(f"bad table name {table!r}")
    return table


def _settings_clause(settings: Mapping[str, Any] | None) -> str:
    if not settings:
        return ""
    parts = []
    for key, value in settings.items():
        if not key.isidentifier():
            raise StoreError(f"bad setting name {key!r}")
        parts.append(f"{key}={format_bind_value(value, None, False)}")
    return " SETTINGS " + ", ".join(parts)


# chDB's allocator (jemalloc, read from JE_MALLOC_CONF when the library loads). Its own build keeps an arena per
# CPU and freed pages for 5 s: the pages of one large insert linger while the next is under way. One arena and
# 1 s cut the worker's peak RSS draining a backlog by 40-75 MiB at the same speed (docs/performance.md). An
# operator's own JE_MALLOC_CONF wins.
CHDB_ALLOCATOR = "percpu_arena:disabled,narenas:1,dirty_decay_ms:1000"
# Its build purges only as it allocates (no background thread), so while the worker is large (10,000 routes' evaluator
# beside a backlog's writes) the kept pages took it past 2 GB (bench/routes.py). Above this RSS they are given back
# after a statement (`SYSTEM JEMALLOC PURGE`, ~0.1 s), at most once a second; below it, writes keep their speed.
PURGE_ABOVE_BYTES = 1280 << 20


class AllocatorPurge:
    """When to give chDB's kept pages back: the process is above ``limit`` bytes resident and ``every`` seconds
    have passed since the last purge."""

    def __init__(
        self,
        limit: int,
        resident: Callable[[], int | None],
        clock: Callable[[], float] = time.monotonic,
        every: float = 1.0,
    ):
        self.limit, self.resident, self.clock, self.every = limit, resident, clock, every
        self.last: float | None = None
        self.purges = 0

    def due(self) -> bool:
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            return False
        size = self.resident()
        if size is None or size <= self.limit:
            return False
        self.last, self.purges = now, self.purges + 1
        return True


def resident_bytes() -> int | None:
    """This process's RSS (Linux's /proc/self/statm); None where there is none."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class ChdbStore:
    """Embedded ClickHouse (chDB). Two connections to one engine, each serialised by its own lock: one for
    inserts and commands, one for queries, so a dashboard's reads never wait for an ingest INSERT to finish
    (both see the same data: the engine is shared)."""

    def __init__(self, path: str | Path, purge_above: int = PURGE_ABOVE_BYTES):
        os.environ.setdefault("JE_MALLOC_CONF", CHDB_ALLOCATOR)  # before chDB loads; no effect once loaded
        import chdb.session

        self.path = Path(path)
        self.url = public_url(f"chdb:{self.path}")
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            # An explicit config file: otherwise chDB would also read a config.xml from the working directory.
            options = f"max_query_size={MAX_QUERY_BYTES}&config-file={COMPRESSION_CONFIG}"
            self._writes = chdb.session.Session(f"{self.path}?{options}")
            self._reads = chdb.session.Session(f"{self.path}?{options}")
        except Exception as exc:  # chdb raises a bare RuntimeError
            raise StoreError(
                f"cannot open the embedded store at {self.path}: {exc}. "
                "Another claimwatch process may own it: stop it, reach it through its API (--api), "
                "or use a ClickHouse server (--clickhouse http://...)."
            ) from exc
        self._write_lock, self._read_lock = threading.Lock(), threading.Lock()
        self.purge = AllocatorPurge(purge_above, resident_bytes)

    def _run(self, session, lock: threading.Lock, sql: str, fmt: str, params: Mapping[str, Any] | None) -> bytes:
        with lock:
            try:
                result = session.query(sql, fmt, params=_bind(params) if params else None)
            except Exception as exc:
                raise store_error(exc) from exc
        out = result.bytes() if result is not None else b""
        self._give_back_if_large()
        return out

    def _give_back_if_large(self) -> None:
        if self.purge.due():
            with self._write_lock:
                self._writes.query("SYSTEM JEMALLOC PURGE", "TabSeparated")

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._run(self._writes, self._write_lock, sql, "TabSeparated", params)

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        return _parse_rows(self._run(self._reads, self._read_lock, sql, "JSONEachRow", params))

    def insert(self, table: str, rows: Iterable[Row], settings: Mapping[str, Any] | None = None) -> int:
        return self.insert_lines(table, _json_lines(rows), settings)

    def insert_lines(
        self, table: str, lines: bytes, settings: Mapping[str, Any] | None = None, fmt: str = "JSONEachRow"
    ) -> int:
        """The rows inline in one INSERT statement, which raises whatever the engine refuses (a full disk too)."""
        if not lines:
            return 0
        sql = f"INSERT INTO {_checked_name(table)}{_settings_clause(settings)} FORMAT {fmt}\n"
        self._run(self._writes, self._write_lock, sql + lines.decode(), "TabSeparated", None)
        return lines.count(b"\n") + 1

    def stream_lines(
        self, table: str, lines: bytes, settings: Mapping[str, Any] | None = None, fmt: str = "JSONEachRow"
    ) -> int:
        """chDB's streaming insert: a third to half the time of ``insert_lines`` on the writer's batches, but its
        commit can fail unreported (a full disk: it returns as if stored and stores nothing). The caller checks
        what the store holds afterwards (services/store/writer.py)."""
        if not lines:
            return 0
        sql = f"INSERT INTO {_checked_name(table)}{_settings_clause(settings)}"
        with self._write_lock:
            try:
                inserter = self._writes.send_insert(sql, fmt)
                inserter.append(lines)
                inserter.finish()
            except Exception as exc:
                raise store_error(exc) from exc
        self._give_back_if_large()
        return lines.count(b"\n") + 1

    def close(self) -> None:
        with self._read_lock:
            self._reads.close()
        with self._write_lock:
            self._writes.close()


class HttpStore:
    """A ClickHouse server over HTTP(S), through clickhouse-connect."""

    def __init__(self, url: str):
        import clickhouse_connect

        parsed = urlparse(url)
        self.url = public_url(url)
        try:
            self._client = clickhouse_connect.get_client(
                host=parsed.hostname,
                port=parsed.port or (8443 if parsed.scheme == "https" else 8123),
                username=unquote(parsed.username or "default"),
                password=unquote(parsed.password or ""),
                database=parsed.path.lstrip("/") or "default",
                secure=parsed.scheme == "https",
                autogenerate_session_id=False,
                settings={"max_query_size": MAX_QUERY_BYTES},
            )
        except Exception as exc:
            raise StoreError(
                f"cannot reach ClickHouse at {self.url}: {exc}. Check --clickhouse and that the server is up."
            ) from exc

    def command(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        try:
            # command(), not raw_query(fmt=...): ClickHouse rejects a FORMAT clause on SYSTEM and other statements.
            self._client.command(sql, parameters=dict(params or {}))
        except Exception as exc:
            raise store_error(exc) from exc

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        try:
            return _parse_rows(self._client.raw_query(sql, parameters=dict(params or {}), fmt="JSONEachRow"))
        except Exception as exc:
            raise store_error(exc) from exc

    def insert(self, table: str, rows: Iterable[Row], settings: Mapping[str, Any] | None = None) -> int:
        return self.insert_lines(table, _json_lines(rows), settings)

    def insert_lines(
        self, table: str, lines: bytes, settings: Mapping[str, Any] | None = None, fmt: str = "JSONEachRow"
    ) -> int:
        if not lines:
            return 0
        try:
            self._client.raw_insert(_checked_name(table), insert_block=lines, settings=dict(settings or {}), fmt=fmt)
        except Exception as exc:
            raise store_error(exc) from exc
        return lines.count(b"\n") + 1

    stream_lines = insert_lines  # a server reports every failed insert

    def close(self) -> None:
        self._client.close()


def public_url(url: str) -> str:
    """Which store ``url`` names, as anyone may read it and compare it: a chdb path made absolute, a server's
    address without its credentials (what ``GET /api/about`` reports and the CLI compares with its own)."""
    if url.startswith("chdb:"):
        return f"chdb:{Path(url[len('chdb:') :] or './var/clickhouse').resolve()}"
    parsed = urlparse(url)
    return parsed._replace(netloc=f"{parsed.hostname}:{parsed.port}").geturl()


def open_store(url: str) -> Store:
    """``chdb:PATH`` or ``http(s)://user:pass@host:port/db``; migrations are applied by the caller."""
    if url.startswith("chdb:"):
        return ChdbStore(url[len("chdb:") :] or "./var/clickhouse")
    if url.startswith(("http://", "https://")):
        return HttpStore(url)
    raise StoreError(f"unknown store URL {url!r}: use chdb:PATH or http(s)://user:pass@host:port/db")


def ping(store: Store) -> None:
    """Readiness: the store answers a read. Raises StoreError when it does not."""
    store.query("SELECT 1 AS ok")
