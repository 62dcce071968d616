"""Shared fixtures. Real components only: the Tansu broker, the chDB engine, worker processes."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

# Nothing may download at run time; the embedding model ships in a package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

OUTPUT_DIR = Path(__file__).resolve().parent.parent / "test-output"


@pytest.fixture
def store(tmp_path):
    """A fresh, migrated embedded ClickHouse (chDB allows one open directory per process).

    Without TTLs: fixtures carry fixed event times, which a wall-clock TTL would delete as they age
    (tests/unit/store/test_retention.py tests the TTLs on stores of its own)."""
    from services.store.backends import ChdbStore
    from services.store.migrate import migrate
    from services.store.retention import KEEP_EVERYTHING, RetentionKeeper

    s = ChdbStore(tmp_path / "clickhouse")
    migrate(s)
    RetentionKeeper(s).apply(KEEP_EVERYTHING)
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
