"""A real small filesystem (tmpfs) that a test can fill up, as a store's disk fills in production."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_filesystem(path: Path, megabytes: int) -> Iterator[Path]:
    """A tmpfs of ``megabytes`` mounted at ``path`` for the test (root is needed, as `make test` runs)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:  # never a skip: the full-disk tests need a real filesystem that fills
        raise AssertionError(f"cannot mount a tmpfs at {path} ({mounted.stderr.strip()}); run the tests as root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


@contextlib.contextmanager
def filled(path: Path, leave_bytes: int) -> Iterator[Path]:
    """Fill the filesystem under ``path`` until ``leave_bytes`` are free; the space returns on exit."""
    filler = path / "filler"
    with open(filler, "wb") as f:
        left = free_bytes(path) - leave_bytes
        while left > 0:
            left -= f.write(b"\0" * min(left, 1 << 20))
    try:
        yield filler
    finally:
        filler.unlink(missing_ok=True)
