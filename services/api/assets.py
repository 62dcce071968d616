"""Static files under content-versioned URLs, so browsers keep them for a year and still see every change.

Pages link ``Assets.url(name)``: ``/static/<name>?v=<hash of its content>``. A request carrying the current hash
may be cached as immutable; any other (no hash, or one from before the file changed) is cached briefly and then
revalidated with its ETag and Last-Modified.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qs

from fastapi.staticfiles import StaticFiles

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "public, max-age=300"


def cache_control(asked: str | None, current: str) -> str:
    return IMMUTABLE if asked == current else REVALIDATE


class Assets(StaticFiles):
    """The files of ``directory``, and the ``elsewhere`` ones (name: path) served as if they were in it."""

    def __init__(self, directory: Path, elsewhere: Mapping[str, Path] | None = None):
        super().__init__(directory=directory)
        self.elsewhere = dict(elsewhere or {})
        self._hashes: dict[str, tuple[tuple[int, int], str]] = {}  # path: ((mtime, size), hash)

    def version(self, name: str) -> str:
        """A hash of the file's content."""
        path, found = self.lookup_path(name)
        if found is None:
            raise FileNotFoundError(f"no static file {name!r}")
        return self._hash(path, found)

    def url(self, name: str, content_of: str | None = None) -> str:
        """The URL pages link; ``content_of`` names the file an asset that is not a file is derived from."""
        return f"/static/{name}?v={self.version(content_of or name)}"

    def lookup_path(self, path: str) -> tuple[str, os.stat_result | None]:
        if path in self.elsewhere:
            return str(self.elsewhere[path]), os.stat(self.elsewhere[path])
        return super().lookup_path(path)

    def file_response(self, full_path, stat_result, scope, status_code: int = 200):
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = cache_control(asked_version(scope), self._hash(str(full_path), stat_result))
        return response

    def _hash(self, path: str, found: os.stat_result) -> str:
        """Recomputed only when the file's modification time or size changes."""
        stamp = (found.st_mtime_ns, found.st_size)
        known = self._hashes.get(path)
        if known is None or known[0] != stamp:
            known = (stamp, hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16])
            self._hashes[path] = known
        return known[1]


def asked_version(scope) -> str | None:
    return parse_qs(scope.get("query_string", b"").decode("latin-1")).get("v", [None])[-1]
