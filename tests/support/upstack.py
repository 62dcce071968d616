"""`claimwatch up` as a subprocess, for tests that drive the whole stack over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.processes import get_json
from services.app.broker import free_port

STOP_WITHIN = 15.0


class Up:
    """`claimwatch up --kafka` in a directory of its own (store, var/, config home), API on a free port."""

    def __init__(self, workdir: Path, bootstrap: str, topic_prefix: str, env: dict[str, str]):
        self.workdir, self.bootstrap, self.topic_prefix, self.env = workdir, bootstrap, topic_prefix, env
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Up:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "XDG_CONFIG_HOME": str(self.workdir / "config"),
            "CLAIMWATCH_API__HOST": "127.0.0.1",
            "CLAIMWATCH_API__PORT": str(self.port),
            "CLAIMWATCH_API__URL": self.url,
            # the tests poll the API anonymously from one address, faster than any reader should
            "CLAIMWATCH_API__ANONYMOUS_READS_PER_MINUTE": "100000",
            **self.env,
        }
        log = open(self.workdir / "up.log", "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.app.cli",
                "-v",
                "up",
                "--kafka",
                self.bootstrap,
                "--clickhouse",
                f"chdb:{self.workdir / 'ch'}",
                "--topic-prefix",
                self.topic_prefix,
            ],
            cwd=self.workdir,
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        self.wait_for(lambda: self.get("/healthz") is not None, 120, "the API")
        return self

    def get(self, path: str, **params):
        return get_json(self.url, path, **params)

    def wait_for(self, predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"`claimwatch up` exited with {self.proc.returncode} waiting for {what}; "
                    f"see {self.workdir / 'up.log'}"
                )
            value = predicate()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; see {self.workdir / 'up.log'}")

    def terminate(self, sig: signal.Signals = signal.SIGTERM) -> float:
        """Send ``sig`` (SIGTERM, or SIGINT as Ctrl-C does); seconds until the process is gone (fails beyond
        STOP_WITHIN)."""
        return stop_within(self.proc, sig, self.workdir / "up.log")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def log(self) -> str:
        return (self.workdir / "up.log").read_text(errors="replace")


def stop_within(proc: subprocess.Popen, sig: signal.Signals, log: Path) -> float:
    """Signal a claimwatch process; seconds until it is gone. Fails (and kills it) beyond STOP_WITHIN."""
    started = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(STOP_WITHIN)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"still running {STOP_WITHIN}s after {sig.name}; see {log}") from None
    return time.monotonic() - started
