"""Real peers from Debian packages, started on loopback by the tests that need them."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import httpx

from services.app.broker import free_port


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:  # a missing component is a failure, never a skip
        raise AssertionError(f"{name} is not installed; `make test` installs it (apt-get install {name})")
    return path


class Peer:
    name = ""
    ready_path = "/-/ready"

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 30) -> Peer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / f"{self.name}.log", "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}; see {self.workdir}")
            try:
                if httpx.get(self.url + self.ready_path, timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{self.name} not ready after {timeout}s; see {self.workdir}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Alertmanager(Peer):
    name = "alertmanager"
    CONFIG = "route:\n  receiver: blackhole\n  group_wait: 1s\n  group_interval: 1s\nreceivers:\n  - name: blackhole\n"

    def command(self) -> list[str]:
        config = self.workdir / "alertmanager.yml"
        config.write_text(self.CONFIG)
        return [
            _binary("prometheus-alertmanager"),
            f"--config.file={config}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]

    def alerts(self) -> list[dict]:
        return httpx.get(self.url + "/api/v2/alerts", timeout=10).json()


class Prometheus(Peer):
    """Scrapes ``targets`` as the job ``job``, and evaluates the ``rule_files`` as often as it scrapes."""

    name = "prometheus"

    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        scrape_interval: str = "1s",
        job: str = "claimwatch",
        rule_files: list[Path] = (),
    ):
        super().__init__(workdir)
        self.targets, self.scrape_interval, self.job, self.rule_files = targets, scrape_interval, job, rule_files

    def command(self) -> list[str]:
        config = self.workdir / "prometheus.yml"
        targets = ", ".join(f"'{t}'" for t in self.targets)
        rules = ", ".join(f"'{r}'" for r in self.rule_files)
        config.write_text(
            f"global:\n  scrape_interval: {self.scrape_interval}\n"
            f"  evaluation_interval: {self.scrape_interval}\nrule_files: [{rules}]\nscrape_configs:\n"
            f"  - job_name: {self.job}\n    static_configs:\n      - targets: [{targets}]\n"
        )
        return [
            _binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]

    def query(self, promql: str) -> list[dict]:
        return self._get("/api/v1/query", query=promql)["result"]

    def rules(self) -> list[dict]:
        """Every alerting and recording rule loaded, with its health and state."""
        return [rule for group in self._get("/api/v1/rules")["groups"] for rule in group["rules"]]

    def alerts(self) -> list[dict]:
        """Active alerts, pending or firing."""
        return self._get("/api/v1/alerts")["alerts"]

    def _get(self, path: str, **params) -> dict:
        body = httpx.get(self.url + path, params=params, timeout=10).json()
        assert body["status"] == "success", body
        return body["data"]
