"""The docs and the CLI agree. docs/cli.md's commands table lists every command of the real CLI: each top-level
command, and each subcommand of a group whose row lists subcommands (``alerts list|show|...``). And every
``claimwatch ...`` command that README.md or docs/*.md shows is a real command with real options."""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from itertools import takewhile

import click
import pytest

from services.app.cli import main
from tests.support.paths import ROOT

CLI_TABLE = ROOT / "docs" / "cli.md"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def table_rows(readme: str) -> dict[str, set[str]]:
    """Each command the table names -> the subcommands its rows list (``\\|``-separated, after the name)."""
    listed: dict[str, set[str]] = defaultdict(set)
    for spec in re.findall(r"^\| `claimwatch ([^`]+)` \|", readme, re.M):
        name, *rest = spec.split()
        names_subcommands = rest and re.fullmatch(
            r"[a-z][a-z-]*(\\\|[a-z][a-z-]*)*", rest[0]
        )  # not FILE, --flag, [...]
        listed[name] |= set(rest[0].split("\\|")) if names_subcommands else set()
    return listed


def missing(readme: str) -> list[str]:
    listed = table_rows(readme)
    gaps = [name for name in main.commands if name not in listed]
    for name, command in main.commands.items():
        if isinstance(command, click.Group) and listed.get(name):  # its rows list subcommands: all of them
            gaps += [f"{name} {sub}" for sub in command.commands if sub not in listed[name]]
    return gaps


def test_every_command_of_the_cli_is_in_the_commands_table():
    assert missing(CLI_TABLE.read_text()) == []


def test_a_command_left_out_of_the_table_is_found():
    table = CLI_TABLE.read_text()
    assert missing(table.replace("| `claimwatch trace TRACE_ID` |", "| `trace TRACE_ID` |")) == ["trace"]
    assert missing(
        table.replace("`claimwatch issues list\\|show\\|resolve\\|merge`", "`claimwatch issues list\\|show\\|merge`")
    ) == ["issues resolve"]


# Shell code blocks (untagged or bash/sh/shell/console) and inline code; `.venv/bin/claimwatch` counts too.
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SHELL = {"", "bash", "sh", "shell", "console"}
INLINE = re.compile(r"`([^`]+)`")
INVOCATION = re.compile(r"\s*(?:\$\s+)?(?:\S*/)?claimwatch\s+(.+)", re.S)
PLACEHOLDER = re.compile(r"[A-Z<]|\.\.\.|…")  # ALERT_ID, FILE.jsonl, <route>, ...: not a subcommand name
END = {"|", ">", ">>", "2>", "&&", ";"}  # a pipe or redirection ends the command


def shown(text: str) -> list[str]:
    """What follows `claimwatch ` in each shell line of a code block and in each inline code span."""
    found = [
        m[1]
        for tag, block in FENCE.findall(text)
        if tag in SHELL
        for line in block.splitlines()
        if (m := INVOCATION.match(line))
    ]
    prose = FENCE.sub("", text)
    return found + [m[1] for span in INLINE.findall(prose) if (m := INVOCATION.match(" ".join(span.split())))]


def options(command: click.Command) -> set[str]:
    return {"--help"} | {name for p in command.params for name in (*p.opts, *p.secondary_opts) if name.startswith("-")}


def unknown(invocation: str) -> list[str]:
    """The subcommands and options of one shown invocation that the CLI does not have."""
    try:
        words = shlex.split(invocation, comments=True)
    except ValueError:  # an apostrophe in prose after the command
        words = invocation.split("#")[0].split()
    commands, path, found = [main], "claimwatch", []
    naming = True  # until a placeholder stands where a subcommand would
    for word in takewhile(lambda w: w not in END, words):
        alternatives = [w for w in re.split(r"\\?\|", word.strip("[]")) if w]  # `list\|show`, `[--out FILE]`
        if not alternatives:
            continue
        if alternatives[0].startswith("-"):
            found += [
                f"{path} {name}"
                for name in (a.split("=")[0] for a in alternatives)
                if not any(name in options(c) for c in commands)
            ]
        elif naming and all(isinstance(c, click.Group) for c in commands):
            if PLACEHOLDER.match(alternatives[0]):
                naming = False
                continue
            subs = {name: sub for c in commands for name, sub in c.commands.items()}
            found += [f"{path} {name}" for name in alternatives if name not in subs]
            commands = [subs[name] for name in alternatives if name in subs]
            if not commands:
                return found
            path += " " + "|".join(name for name in alternatives if name in subs)
    return found


def problems(text: str) -> list[str]:
    return [problem for invocation in shown(text) for problem in unknown(invocation)]


@pytest.mark.parametrize("doc", DOCS, ids=[doc.name for doc in DOCS])
def test_every_command_the_docs_show_is_real(doc):
    assert problems(doc.read_text()) == []


def test_a_made_up_command_or_option_is_found():
    planted = (
        "Run `claimwatch nosuch` first, then `claimwatch alerts show ALERT_ID` and\n"
        "`claimwatch runbook ISSUE [--markdown]`.\n\n"
        "| `claimwatch issues list\\|nosuch` | a row |\n\n"
        "```bash\n.venv/bin/claimwatch alerts list --nosuch   # a flag that isn't\n"
        "claimwatch rates -o json | jq .   # real\n```\n"
    )
    assert sorted(problems(planted)) == [
        "claimwatch alerts list --nosuch",
        "claimwatch issues nosuch",
        "claimwatch nosuch",
    ]
