"""`claimwatch storage`: what each table costs on disk, per claim, and how long it is kept."""

from __future__ import annotations

from services.app.cli.base import main, print_json, reach, service_options
from services.app.cli.tables import Column, output_option, print_table
from services.app.settings import Settings
from services.core.command import cli_command


def size(n: int | None) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB, 20.3 MiB."""
    if n is None:
        return "—"
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"


def main_codec(codecs: dict[str, int]) -> str:
    """The codec holding most of a table's bytes, with its share: "ZSTD(3) 92%"."""
    if not codecs:
        return "—"
    name, nbytes = max(codecs.items(), key=lambda item: item[1])
    total = sum(codecs.values())
    return name if nbytes == total else f"{name} {min(100 * nbytes // total, 99)}%"  # a rest is never shown as 100%


def kept(row: dict) -> str:
    return "forever" if row.get("ttl") is None else f"{row['ttl_days']} d" if row.get("ttl_days") else row["ttl"]


STORAGE_COLUMNS = [
    Column("TABLE", lambda r: r["table"], kind="key"),
    Column("ROWS", lambda r: f"{r['rows']:,}", kind="num"),
    Column("COMPRESSED", lambda r: size(r["compressed_bytes"]), kind="num"),
    Column("B/CLAIM", lambda r: "—" if r["bytes_per_claim"] is None else f"{r['bytes_per_claim']:,.1f}", 1, "num"),
    Column("KEPT", kept, 1, "text"),
    Column("UNCOMPRESSED", lambda r: size(r["uncompressed_bytes"]), 2, "num"),
    Column(
        "RATIO",
        lambda r: f"{r['uncompressed_bytes'] / r['compressed_bytes']:.1f}x" if r["compressed_bytes"] else "—",
        3,
        "num",
    ),
    Column("ON DISK", lambda r: size(r["disk_bytes"]), 4, "num"),
    Column("CODEC", lambda r: main_codec(r.get("codecs") or {}), 3, "text"),
]


@main.command()
@output_option
@service_options
def storage(settings: Settings, output: str) -> None:
    """Rows, compressed and uncompressed bytes and bytes per claim per table, with how long each is kept.

    Bytes per claim is a table's compressed bytes divided by the claims stored. KEPT is the TTL in
    force on event time (settings: retention.raw_days, retention.aggregate_days). CODEC is the codec of most
    of its bytes: inserts write LZ4, merges ZSTD, so recent data costs more until it is merged.
    -o json prints the API's JSON.
    """
    data = reach(settings, "/api/storage", {})
    if output == "json":
        print_json(data)
        return
    rows = data["tables"] + [{"table": "total", **data["total"], "ttl": "", "ttl_days": None}]
    print_table(
        STORAGE_COLUMNS,
        rows,
        output,
        title=f"Storage: {data['claims']:,} claims stored",
        empty=f"no tables: run a worker or `{cli_command()} up` once to create them",
    )
