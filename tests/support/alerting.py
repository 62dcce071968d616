"""A worker that notifies a real Alertmanager, for end-to-end alerting tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.processes import WorkerProcess
from services.api.auth import new_token
from services.app.broker import create_topics
from tests.support.peers import Alertmanager


@contextmanager
def worker_with_alertmanager(
    bootstrap: str, topic_prefix: str, tmp_path: Path, config: str
) -> Iterator[tuple[Alertmanager, WorkerProcess, str]]:
    """The topics, a real Alertmanager and `claimwatch worker --serve-api` (``config`` as its TOML) notifying it:
    (alertmanager, worker, an API token the worker accepts)."""
    create_topics(bootstrap, [f"{topic_prefix}.verdicts", f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2)
    path = tmp_path / "claimwatch.toml"
    path.write_text(config)
    token, digest = new_token()
    with Alertmanager(tmp_path / "am") as am:
        env = {"CLAIMWATCH_NOTIFY__ALERTMANAGER_URL": am.url, "CLAIMWATCH_API__TOKEN_HASHES": f'["{digest}"]'}
        with WorkerProcess(
            bootstrap,
            f"chdb:{tmp_path / 'ch'}",
            topic_prefix,
            tmp_path / "worker.log",
            env=env,
            args=["--config", str(path)],
        ) as worker:
            yield am, worker, token


def silence(worker: WorkerProcess, token: str, matchers: list[str], comment: str) -> dict:
    """A 4-hour silence created through the API, as on-call would; its record."""
    response = httpx.post(
        worker.url + "/api/silences",
        json={"matchers": matchers, "by": "oncall", "comment": comment, "duration": "4h"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    return response.json()
