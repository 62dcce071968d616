"""Files replaced whole: a reader sees the old content or the new, never half of it; and the records in which a
running process says where it is."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson


def write_atomically(path: Path, content: bytes) -> None:
    """Write ``content`` beside ``path`` and rename it into place (OSError propagates)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(content)
    tmp.replace(path)


class ProcessRecord:
    """A small JSON file in which a running process says where it is (its pid with ``fields``), for other
    processes to find while it runs: `claimwatch up` (./var/stack.json) and the demo (its traffic control)."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, pid: int, **fields: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, orjson.dumps({**fields, "pid": pid}))

    def forget(self, pid: int) -> None:
        """Remove the record if ``pid`` wrote it (a later process's record stays)."""
        if (self.read(alive_only=False) or {}).get("pid") == pid:
            self.path.unlink(missing_ok=True)

    def read(self, alive_only: bool = True) -> dict[str, Any] | None:
        """The record, or None: none written, unreadable, or (``alive_only``) its process has gone."""
        try:
            record = orjson.loads(self.path.read_bytes())
            if alive_only:
                os.kill(int(record["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            return None
        return record if isinstance(record, dict) else None
