"""The `claimwatch` that printed commands start with: the bare name only when the shell's PATH finds this very
script."""

from __future__ import annotations

import subprocess

import pytest

from services.core.command import cli_command, cli_path


@pytest.fixture
def venv(tmp_path):
    """A checkout with a virtualenv's bin/: its python and its claimwatch script."""
    bin_dir = tmp_path / "checkout" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "claimwatch"
    script.write_text("#!/bin/sh\nprintf 'ran %s\\n' \"$*\"\n")
    script.chmod(0o755)
    return tmp_path / "checkout", str(bin_dir / "python")


def test_an_activated_venv_gives_the_bare_name(venv):
    checkout, python = venv
    found = str(checkout / ".venv" / "bin" / "claimwatch")
    assert cli_path(python, cwd=str(checkout), which=lambda name: found) == "claimwatch"


def test_without_it_on_the_path_the_script_is_named_relative_to_the_checkout(venv):
    checkout, python = venv
    assert cli_path(python, cwd=str(checkout), which=lambda name: None) == ".venv/bin/claimwatch"
    assert cli_path(python, cwd=str(checkout / ".venv" / "bin"), which=lambda name: None) == "./claimwatch"


def test_another_claimwatch_on_the_path_does_not_count(venv, tmp_path):
    checkout, python = venv
    other = tmp_path / "elsewhere" / "claimwatch"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    assert cli_path(python, cwd=str(checkout), which=lambda name: str(other)) == ".venv/bin/claimwatch"


def test_from_outside_the_checkout_or_for_any_directory_the_path_is_absolute(venv, tmp_path):
    checkout, python = venv
    script = str(checkout / ".venv" / "bin" / "claimwatch")
    assert cli_path(python, cwd=str(tmp_path / "elsewhere"), which=lambda name: None) == script
    assert cli_path(python, cwd=None, which=lambda name: None) == script  # a service's readers are anywhere


def test_an_interpreter_without_the_script_falls_back_to_the_bare_name(tmp_path):
    assert cli_path(str(tmp_path / "python"), cwd=str(tmp_path), which=lambda name: None) == "claimwatch"


def test_the_command_runs_when_pasted_into_a_shell_from_that_directory(venv, tmp_path):
    checkout, python = venv
    spaced = tmp_path / "my checkout"
    checkout.rename(spaced)
    python = str(spaced / ".venv" / "bin" / "python")
    for cwd in (spaced, tmp_path):
        command = cli_command(executable=python, cwd=str(cwd), which=lambda name: None)
        out = subprocess.run(
            ["sh", "-c", f"{command} promote propose iss-1"],
            cwd=cwd,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin"},
        )
        assert out.stdout == "ran promote propose iss-1\n", (command, out.stderr)
