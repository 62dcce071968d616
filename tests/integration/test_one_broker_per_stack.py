"""One broker per stack: a SIGKILLed `claimwatch up` takes its embedded broker with it, and an `up` whose broker
port is taken refuses to start and says by what, instead of talking to somebody else's broker (H8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from services.app.broker import BrokerError, EmbeddedBroker, free_port, port_free
from tests.support.waiting import wait_until


def up_env(tmp_path, broker_port: int) -> dict[str, str]:
    api_port = free_port()
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "CLAIMWATCH_API__PORT": str(api_port),
        "CLAIMWATCH_API__URL": f"http://127.0.0.1:{api_port}",
        "CLAIMWATCH_EMBEDDED_BROKER": f"127.0.0.1:{broker_port}",
        "CLAIMWATCH_CLICKHOUSE": f"chdb:{tmp_path / 'ch'}",
    }


def test_a_sigkilled_up_leaves_no_broker_behind(tmp_path):
    broker_port = free_port()
    log = open(tmp_path / "up.log", "ab")
    up = subprocess.Popen(
        [sys.executable, "-m", "services.app.cli", "up"],
        cwd=tmp_path,
        env=up_env(tmp_path, broker_port),
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        wait_until(lambda: not port_free("127.0.0.1", broker_port), 60, "the embedded broker to listen")
        up.send_signal(signal.SIGKILL)
        up.wait(10)
        wait_until(lambda: port_free("127.0.0.1", broker_port), 10, "the orphaned broker to go")
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)


def test_up_refuses_a_taken_broker_port_and_names_its_holder(tmp_path):
    with EmbeddedBroker() as orphan:
        with pytest.raises(BrokerError, match=rf"port {orphan.port} is already taken by pid {orphan.pid}: .*tansu"):
            EmbeddedBroker(port=orphan.port).start()
        result = subprocess.run(
            [sys.executable, "-m", "services.app.cli", "up"],
            cwd=tmp_path,
            env=up_env(tmp_path, orphan.port),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode != 0
        said = " ".join((result.stdout + result.stderr).split())
        assert f"port {orphan.port} is in use by pid {orphan.pid}" in said, said
        assert "set CLAIMWATCH_EMBEDDED_BROKER (host:port) to a free port" in said, said
