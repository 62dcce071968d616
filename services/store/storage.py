"""What the store costs on disk: rows and bytes per table (system.parts), the TTLs in force (system.tables).

Rows are physical rows in active parts: a duplicate that a Replacing/Aggregating merge has not
collapsed yet counts until it is merged (the writer keeps duplicates out of ``events`` and ``claims``).
Bytes per claim divides a table's compressed bytes by the rows of ``claims``, one row per claim stored.
A table's codecs are its compressed bytes by the codec of their parts: inserts write LZ4, merges ZSTD
(services/store/clickhouse-compression.xml), so a store that has not merged yet is larger per claim.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal, TypedDict

from services.store.backends import Store
from services.store.retention import RetentionKeeper, ttl_days

CLAIMS_TABLE = "claims"
Summed = Literal["rows", "compressed_bytes", "uncompressed_bytes", "disk_bytes"]
SUMMED: tuple[Summed, ...] = ("rows", "compressed_bytes", "uncompressed_bytes", "disk_bytes")


class TableUsage(TypedDict):
    table: str
    rows: int
    compressed_bytes: int
    uncompressed_bytes: int
    disk_bytes: int
    bytes_per_claim: float | None
    ttl: str | None
    ttl_days: int | None
    codecs: dict[str, int]


def _per_claim(nbytes: int, claims: int) -> float | None:
    return round(nbytes / claims, 1) if claims else None


class StorageRepository:
    def __init__(self, store: Store):
        self.store = store

    def report(self) -> dict:
        """``claims`` stored, one entry per MergeTree table (largest first) and the ``total``."""
        parts: dict[str, Counter[str]] = {}
        codecs: dict[str, dict[str, int]] = {}
        for r in self.store.query(  # one read of system.parts, by table and codec
            "SELECT table, default_compression_codec AS codec, sum(rows) AS rows, "
            "sum(data_compressed_bytes) AS compressed, sum(data_uncompressed_bytes) AS uncompressed, "
            "sum(bytes_on_disk) AS disk FROM system.parts WHERE active AND database = currentDatabase() "
            "GROUP BY table, codec ORDER BY table, compressed DESC, codec"
        ):
            parts.setdefault(r["table"], Counter()).update(
                {key: int(r[key]) for key in ("rows", "compressed", "uncompressed", "disk")}
            )
            codecs.setdefault(r["table"], {})[r["codec"]] = int(r["compressed"])
        ttls = RetentionKeeper(self.store).ttls()
        claims = int(parts.get(CLAIMS_TABLE, Counter()).get("rows", 0))
        tables: list[TableUsage] = []
        for name, ttl in ttls.items():
            p = parts.get(name, Counter())
            compressed = int(p.get("compressed", 0))
            tables.append(
                {
                    "table": name,
                    "rows": int(p.get("rows", 0)),
                    "compressed_bytes": compressed,
                    "uncompressed_bytes": int(p.get("uncompressed", 0)),
                    "disk_bytes": int(p.get("disk", 0)),
                    "bytes_per_claim": _per_claim(compressed, claims),
                    "ttl": ttl,
                    "ttl_days": ttl_days(ttl),
                    "codecs": codecs.get(name, {}),
                }
            )
        tables.sort(key=lambda t: (-t["compressed_bytes"], t["table"]))
        sums: dict[str, int] = {key: sum(t[key] for t in tables) for key in SUMMED}
        total: dict[str, object] = {
            **sums,
            "bytes_per_claim": _per_claim(sums["compressed_bytes"], claims),
            "codecs": dict(sum((Counter(t["codecs"]) for t in tables), Counter[str]()).most_common()),
        }
        return {"claims": claims, "tables": tables, "total": total}

    def compact(self, tables: list[str] | None = None) -> None:
        """Merge every part now (and drop expired rows), as background merges eventually would."""
        for name in tables or list(RetentionKeeper(self.store).ttls()):
            self.store.command(f"OPTIMIZE TABLE {name} FINAL")
