"""`claimwatch config show`: every setting in force and where it came from, as `git config --show-origin`."""

from __future__ import annotations

import json
import re

import click

from services.app.cli.base import SETTINGS_LAYERS, main, print_json, service_options
from services.app.cli.tables import Column, output_option, print_table
from services.app.settings import Settings, in_force, settings_from

SOURCES = (
    "default, file (--config or CLAIMWATCH_CONFIG), env (CLAIMWATCH_*), flag, or stack (a running `claimwatch up`)"
)
_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


def shown(name: str, value: object) -> object:
    """A value as printed: secrets and URL passwords masked."""
    if name.endswith("secret") and value:
        return "********"
    if isinstance(value, str):
        return _PASSWORD.sub(r"\1********@", value)
    return value


def as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def settings_in_force(settings: Settings, layers: list) -> list[dict]:
    loaded = settings_from(layers)
    rows = []
    for name, value, source in in_force(settings, layers):
        if name == "api.url" and settings.api.url != loaded.api.url:
            source = "stack"  # the URL a `claimwatch up` in this folder records (var/stack.json)
        rows.append({"setting": name, "value": shown(name, value), "source": source})
    return rows


@main.group()
def config() -> None:
    """The settings in force."""


@config.command("show")
@output_option
@service_options
def config_show(settings: Settings, output: str) -> None:
    """Every setting in force with its value and where it came from: default, file, env, flag or stack.

    Precedence, lowest first: defaults, the --config file, CLAIMWATCH_* variables (nested with __), then flags.
    """
    rows = settings_in_force(settings, click.get_current_context().meta[SETTINGS_LAYERS])
    if output == "json":
        print_json(rows)
        return
    columns = [
        Column("SETTING", lambda r: r["setting"], kind="id"),
        Column("SOURCE", lambda r: r["source"], note=SOURCES),
        Column("VALUE", lambda r: as_text(r["value"]), kind="name", lines=3),
    ]
    print_table(columns, rows, output)
