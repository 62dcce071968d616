"""Real claimwatch processes for integration tests: started, polled, stopped or killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from services.app.broker import free_port


def send_all(bootstrap: str, topic: str, sims) -> None:
    """Produce simulated messages (SimEvent.raw, keyed by route) and wait until they are acknowledged."""
    from services.client.produce import raw_producer

    producer = raw_producer(bootstrap)
    for sim in sims:
        producer.send(topic, key=sim.key, value=sim.raw)
    producer.flush()
    producer.close()


LIVE: set[WorkerProcess] = set()  # reaped after every test by tests/conftest.py, even when it fails


def get_json(base_url: str, path: str, **params: Any) -> Any:
    """The JSON of a 200 answer; None for any other answer or when nothing answers (yet)."""
    try:
        # None, not {}: httpx replaces a query written in the path with the params, even with none
        response = httpx.get(base_url + path, params=params or None, timeout=30)
    except httpx.TransportError:
        return None
    return response.json() if response.status_code == 200 else None


class WorkerProcess:
    """`claimwatch worker --serve-api` as a subprocess owning its chDB directory."""

    def __init__(
        self,
        bootstrap: str,
        clickhouse: str,
        topic_prefix: str,
        log_path: Path,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ):
        self.bootstrap, self.clickhouse, self.topic_prefix = bootstrap, clickhouse, topic_prefix
        self.log_path = log_path
        self.port = free_port()
        self.env = env or {}
        self.args = args or []
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> WorkerProcess:
        env = {
            **os.environ,
            "CLAIMWATCH_API__PORT": str(self.port),
            "CLAIMWATCH_API__HOST": "127.0.0.1",
            "CLAIMWATCH_API__URL": self.url,
            "PYTHONUNBUFFERED": "1",
            # Tests and benches send fixed event times, which a wall-clock TTL would expire as they age,
            # and the live ingest window would refuse once older than the raw rows are kept.
            "CLAIMWATCH_RETENTION__RAW_DAYS": "3650",
            "CLAIMWATCH_RETENTION__AGGREGATE_DAYS": "3650",
            "CLAIMWATCH_INGEST__BACKFILL": "true",
            # tests poll the API anonymously from one address, faster than any reader should
            "CLAIMWATCH_API__ANONYMOUS_READS_PER_MINUTE": "100000",
            **self.env,
        }
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.app.cli",
                "-v",
                "worker",
                "--serve-api",
                "--kafka",
                self.bootstrap,
                "--clickhouse",
                self.clickhouse,
                "--topic-prefix",
                self.topic_prefix,
                *self.args,
            ],
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
        LIVE.add(self)
        self.wait_for(lambda: self.get("/healthz") is not None, timeout, "worker API to come up")
        return self

    def get(self, path: str, **params: Any) -> Any:
        return get_json(self.url, path, **params)

    def get_text(self, path: str) -> str:
        return httpx.get(self.url + path, timeout=30).text

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"worker exited with {self.proc.returncode} while waiting for {what}; log: {self.log_path}"
                )
            value = predicate()
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; log: {self.log_path}")

    def stop(self, timeout: float = 90) -> int:
        """Graceful stop (SIGINT, like Ctrl-C)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise AssertionError(f"worker did not stop within {timeout}s; log: {self.log_path}") from exc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.stop(30)
            except AssertionError:
                pass
