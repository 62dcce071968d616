"""Files replaced whole: a reader sees the old content or the new, never half of it."""
from __future__ import annotations

from pathlib import Path


def write_atomically(path: Path, content: bytes) -> None:
    """Write ``content`` beside ``path`` and rename it into place (OSError propagates)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(content)
    tmp.replace(path)
