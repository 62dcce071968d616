"""The tests' store templates (tests/support/stores.py): a copy is a migrated store of its own, and what it stores no
other copy, nor the template, sees."""

from __future__ import annotations

from pathlib import Path

from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.store.backends import ChdbStore
from services.store.migrate import migrate
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter
from tests.support.paths import FIXTURES
from tests.support.stores import StoreTemplates


def examples() -> list[VerdictEvent]:
    decoded = map(Decoder().decode, (FIXTURES / "contract_examples.jsonl").read_bytes().splitlines())
    return [e for e in decoded if isinstance(e, VerdictEvent)]


def answers(path: Path) -> int:
    store = ChdbStore(path)
    try:
        return store.query("SELECT count() AS n FROM events")[0]["n"]
    finally:
        store.close()


def test_a_copy_is_a_migrated_store_of_its_own(tmp_path: Path, store_templates: StoreTemplates) -> None:
    first = store_templates.fresh(tmp_path / "first", KEEP_EVERYTHING)
    try:
        assert migrate(first) == []  # nothing left to apply
        assert RetentionKeeper(first).apply(KEEP_EVERYTHING) == []  # its TTLs came with it
        stored = EventWriter(first).write(examples()).inserted
    finally:
        first.close()
    second = store_templates.copy(tmp_path / "second", KEEP_EVERYTHING)
    assert stored > 0 and answers(tmp_path / "first") == stored
    assert answers(second) == answers(store_templates.template(KEEP_EVERYTHING)) == 0
