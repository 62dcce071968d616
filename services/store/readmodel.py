"""What the store's own reports return (dead letters, storage), defined once (services/core/readmodel.py)."""

from __future__ import annotations

from pydantic import Field

from services.core.readmodel import Read


class DlqSampleRead(Read):
    reason: str
    source: str = Field(description="topic/partition/offset, then events[i] for an event of a batch envelope")
    size: int
    envelope_index: int | None = Field(description="the event's index in its batch envelope; null: the whole message")


class DlqReasonRead(Read):
    reason: str = Field(description="the contract rule that was broken")
    count: int
    samples: list[DlqSampleRead]


class StorageTableRead(Read):
    table: str
    rows: int = Field(description="rows in active parts (duplicates count until a merge collapses them)")
    compressed_bytes: int
    uncompressed_bytes: int
    disk_bytes: int = Field(description="on disk, with marks, indexes and checksums")
    bytes_per_claim: float | None = Field(description="compressed bytes ÷ claims stored; null with no claims")
    ttl: str | None = Field(description="the TTL in force; null: kept until deleted")
    ttl_days: int | None
    codecs: dict[str, int] = Field(
        description="compressed bytes by the codec of their parts, most first: inserts write LZ4, merges ZSTD"
    )


class StorageTotalRead(Read):
    rows: int
    compressed_bytes: int
    uncompressed_bytes: int
    disk_bytes: int
    bytes_per_claim: float | None
    codecs: dict[str, int]


class StorageReportRead(Read):
    claims: int = Field(description="claims stored (rows of the claims table)")
    tables: list[StorageTableRead] = Field(description="largest (compressed) first")
    total: StorageTotalRead
