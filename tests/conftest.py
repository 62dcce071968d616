"""Shared fixtures. Real components only: the Tansu broker, the chDB engine, worker processes."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tests.support.lanes import LEFT_OUT_OF_FAST, NeedsReader

# Nothing may download at run time; the embedding model ships in a package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

OUTPUT_DIR = Path(__file__).resolve().parent.parent / "test-output"


def pytest_addoption(parser):
    parser.addoption(
        "--fast",
        action="store_true",
        help=f"`make test-fast`: leave out tests marked {', '.join(LEFT_OUT_OF_FAST)} (tests/support/lanes.py)",
    )


def pytest_collection_modifyitems(config, items):
    """Mark each test with what it needs beyond this process; with --fast, leave those and the slow ones out."""
    reader = NeedsReader()
    for item in items:
        info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the fixtures an item uses
        for marker in sorted(reader.of_test(info.name2fixturedefs if info else {}, getattr(item, "module", None))):
            item.add_marker(marker)
    if config.getoption("fast"):
        left_out = {item for item in items if any(item.get_closest_marker(m) for m in LEFT_OUT_OF_FAST)}
        config.hook.pytest_deselected(items=[item for item in items if item in left_out])
        items[:] = [item for item in items if item not in left_out]


@pytest.fixture(scope="session")
def store_templates(tmp_path_factory):
    """Migrated stores to copy, made once per test process (tests/support/stores.py)."""
    from tests.support.stores import StoreTemplates

    return StoreTemplates(tmp_path_factory.mktemp("store-templates"))


@pytest.fixture
def store(tmp_path, store_templates):
    """A fresh, migrated embedded ClickHouse of its own (chDB allows one open directory per process).

    Without TTLs: fixtures carry fixed event times, which a wall-clock TTL would delete as they age
    (tests/unit/store/test_retention.py tests the TTLs on stores of its own)."""
    from services.store.retention import KEEP_EVERYTHING

    s = store_templates.fresh(tmp_path / "clickhouse", KEEP_EVERYTHING)
    yield s
    s.close()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    from services.app.broker import EmbeddedBroker

    b = EmbeddedBroker(log_path=tmp_path_factory.mktemp("broker") / "tansu.log").start()
    yield b
    b.stop()


@pytest.fixture
def topic_prefix() -> str:
    """Fresh topics (and consumer group) per test."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def output_dir() -> Path:
    OUTPUT_DIR.mkdir(exist_ok=True)
    return OUTPUT_DIR


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path_factory, monkeypatch):
    """Each test keeps API tokens (hosts.toml, token-hashes) in a folder of its own, never the user's: the CLI's
    in-process API keeps one there, as `claimwatch up` does."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


@pytest.fixture(autouse=True)
def reap_workers():
    """A failed test must not leave worker processes running (they hold CPU and chDB locks)."""
    yield
    from bench.processes import LIVE

    for worker in list(LIVE):
        worker.kill()
        LIVE.discard(worker)
