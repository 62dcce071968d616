"""Fresh migrated embedded stores for tests, copied from templates that each test process migrates once.

Migrating a store runs the whole schema's DDL (about a second on a loaded 2-core machine); copying a migrated, closed
store's directory takes milliseconds. A copy is a store of its own: chDB keeps a store's tables, data and metadata
under its directory (the table links in data/ are relative), so what a test writes in one copy no other copy, nor
the template, sees. Templates are made through services.store.migrate like any store, so they follow the
migrations. chDB opens one directory per process: a template is made, and closed, when it is first asked for, as
the store that asks for it would have been opened then.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from services.store.backends import ChdbStore
from services.store.migrate import migrate
from services.store.retention import Retention, RetentionKeeper


class StoreTemplates:
    """One migrated store per retention, made under ``root`` on first use; ``copy`` and ``fresh`` hand out copies."""

    def __init__(self, root: Path):
        self.root = root
        self._templates: dict[Retention | None, Path] = {}

    def template(self, retention: Retention | None = None) -> Path:
        """The closed template directory: migrated, and with ``retention``'s TTLs when given (else the schema's)."""
        if retention not in self._templates:
            path = self.root / f"template-{len(self._templates)}"
            shutil.rmtree(path, ignore_errors=True)  # a template that failed half made
            store = ChdbStore(path)
            try:
                migrate(store)
                if retention is not None:
                    RetentionKeeper(store).apply(retention)
            finally:
                store.close()
            self._templates[retention] = path
        return self._templates[retention]

    def copy(self, path: Path, retention: Retention | None = None) -> Path:
        """A migrated store's directory at ``path`` (which must not exist), for ChdbStore or a ``chdb:`` setting."""
        shutil.copytree(self.template(retention), path, symlinks=True)
        return path

    def fresh(self, path: Path, retention: Retention | None = None) -> ChdbStore:
        """A migrated store of its own at ``path``, open."""
        return ChdbStore(self.copy(path, retention))
