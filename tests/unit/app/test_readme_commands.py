"""The README's commands table lists every command of the real CLI: each top-level command, and each
subcommand of a group whose row lists subcommands (``alerts list|show|...``)."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import click

from services.app.cli import main

README = Path(__file__).resolve().parents[3] / "README.md"


def table_rows(readme: str) -> dict[str, set[str]]:
    """Each command the table names -> the subcommands its rows list (``\\|``-separated, after the name)."""
    listed: dict[str, set[str]] = defaultdict(set)
    for spec in re.findall(r"^\| `claimwatch ([^`]+)` \|", readme, re.M):
        name, *rest = spec.split()
        names_subcommands = rest and re.fullmatch(r"[a-z][a-z-]*(\\\|[a-z][a-z-]*)*", rest[0])  # not FILE, --flag, [...]
        listed[name] |= set(rest[0].split("\\|")) if names_subcommands else set()
    return listed


def missing(readme: str) -> list[str]:
    listed = table_rows(readme)
    gaps = [name for name in main.commands if name not in listed]
    for name, command in main.commands.items():
        if isinstance(command, click.Group) and listed.get(name):  # its rows list subcommands: all of them
            gaps += [f"{name} {sub}" for sub in command.commands if sub not in listed[name]]
    return gaps


def test_every_command_of_the_cli_is_in_the_readme_table():
    assert missing(README.read_text()) == []


def test_a_command_left_out_of_the_table_is_found():
    readme = README.read_text()
    assert missing(readme.replace("| `claimwatch trace TRACE_ID` |", "| `trace TRACE_ID` |")) == ["trace"]
    assert missing(readme.replace("`claimwatch issues list\\|show\\|resolve\\|merge`",
                                  "`claimwatch issues list\\|show\\|merge`")) == ["issues resolve"]
