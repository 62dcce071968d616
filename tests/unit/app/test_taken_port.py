"""`make demo` on a taken port said only "`claimwatch up` exited with 0 while waiting ...", after the failed start had
already moved var/ aside. A taken port now fails at once, naming who holds it and the setting that moves it."""

from __future__ import annotations

import os
import socket

import pytest
from click.testing import CliRunner

from services.app.broker import free_port
from services.app.cli import main


@pytest.fixture
def held_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", ["demo", "up"])
def test_a_taken_api_port_fails_at_once_naming_its_holder_and_nothing_moves(command, held_port, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "var" / "clickhouse").mkdir(parents=True)
    env = {
        "CLAIMWATCH_API__PORT": str(held_port),
        "CLAIMWATCH_EMBEDDED_BROKER": f"127.0.0.1:{free_port()}",
        "CLAIMWATCH_CLICKHOUSE": f"chdb:{tmp_path / 'var' / 'clickhouse'}",
    }
    result = CliRunner(env=env).invoke(main, [command])
    said = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert f"port {held_port} is in use by pid {os.getpid()}" in said
    assert "set CLAIMWATCH_API__PORT to a free port, or stop that process" in said
    assert sorted(p.name for p in (tmp_path / "var").iterdir()) == ["clickhouse"]  # nothing moved aside


def test_a_taken_broker_port_names_its_setting(held_port, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"CLAIMWATCH_API__PORT": str(free_port()), "CLAIMWATCH_EMBEDDED_BROKER": f"127.0.0.1:{held_port}"}
    result = CliRunner(env=env).invoke(main, ["up"])
    assert result.exit_code == 1 and f"port {held_port} is in use" in result.output
    assert "CLAIMWATCH_EMBEDDED_BROKER" in result.output


def test_the_cli_run_beside_a_running_stack_reaches_it_on_the_port_it_was_moved_to(tmp_path, monkeypatch):
    """With the stack moved by one setting (CLAIMWATCH_API__PORT), the CLI run from the same folder without that
    setting drove whatever owned 8080. `claimwatch up` records its API in ./var/stack.json while it runs."""
    import os

    from services.app.cli.base import STACK_RECORD, with_local_stack
    from services.app.settings import load_settings

    monkeypatch.chdir(tmp_path)
    plain = load_settings(environ={})
    assert with_local_stack(plain).api.url == "http://127.0.0.1:8080"  # nothing running here
    STACK_RECORD.write(os.getpid(), url="http://127.0.0.1:18480")
    assert with_local_stack(plain).api.url == "http://127.0.0.1:18480"
    named = load_settings(environ={"CLAIMWATCH_API__PORT": "9000"})
    assert with_local_stack(named).api.url == "http://127.0.0.1:9000"  # a setting the user gave wins
    STACK_RECORD.forget(os.getpid())
    assert not (tmp_path / "var" / "stack.json").exists()
    STACK_RECORD.write(2**22 + 12345, url="http://127.0.0.1:18480")  # no such process: a stack that died
    assert with_local_stack(plain).api.url == "http://127.0.0.1:8080"
