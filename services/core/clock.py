"""The one wall clock. Code that needs "now" takes it as an argument; entry points call this."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
