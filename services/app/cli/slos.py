"""`claimwatch slo list` and `slo show NAME`: each SLO's error budget, burn windows and burn alerts, as GET /api/slos
gives them; one SLO with what spends its budget."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import click

from services.alerts.explain.figures import figure
from services.alerts.oncall.slos import budget_text, spent_text
from services.app.cli.base import Abort, console, main, out, print_json, reach, service_options
from services.app.cli.tables import Column, labelled, output_option, print_labelled, print_table, terminal_width
from services.app.openslo import OpenSloError, as_toml, read_documents, slo_settings
from services.app.settings import Settings
from services.core.command import cli_command
from services.core.files import write_atomically
from services.core.numbers import pct, plural, utc_minute

MISSING = "—"


def burn_text(rate: float | None) -> str:
    return figure(rate, "burn", missing=MISSING)


def burn(s: dict, window: str) -> str:
    found = next((b for b in s["burns"] if b["window"] == window), None)
    return MISSING if found is None else burn_text(found["rate"])


def alerts_text(s: dict) -> str:
    return ", ".join(f"{a['severity']} {a['state']}" for a in s["alerts"]) or "none"


SLO_COLUMNS = [
    Column("SLO", lambda s: s["name"], kind="id"),
    Column("ROUTES", lambda s: s["routes"], kind="key"),
    Column("OBJECTIVE", lambda s: f"{pct(s['objective'])} {s['sli']} / {s['window']}", 3, "text"),
    Column("BUDGET", lambda s: budget_text(s["budget_remaining"]), kind="text"),
    Column("1H", lambda s: burn(s, "1h"), kind="num", note="the burn rate over the last hour (6H, 3D: 6 hours, 3 "
           "days); 1x spends the budget exactly over the SLO's window, — too little to tell"),
    Column("6H", lambda s: burn(s, "6h"), 1, "num"),
    Column("3D", lambda s: burn(s, "3d"), 2, "num"),
    Column("ALERTS", alerts_text, kind="text"),
    Column("TEAM", lambda s: s["team"], 2, "key"),
]  # fmt: skip


@main.group("slo")
def slo_group() -> None:
    """Objectives on hallucinated claims: error budgets, burn rates, burn alerts ([[slo]] in the config file)."""


@slo_group.command("list")
@output_option
@service_options
def slo_list(settings: Settings, output: str) -> None:
    """Every SLO: its budget left over the window, its burn rates and open burn alerts."""
    found = reach(settings, "/api/slos")
    if output == "json":
        print_json(found)
        return
    print_table(SLO_COLUMNS, found, output, empty="no SLOs are set: add an [[slo]] to the config file")
    if found:
        console.print(
            f"one in full: {cli_command()} slo show {found[0]['name']}", markup=False, highlight=False, soft_wrap=True
        )  # a command stays on one line, to paste whole


def slo_fields(s: dict) -> list[tuple[str, str | list[str]]]:
    spent_line = spent_text(s["budget_spent"], s["budget_spent_interval"])
    burns = [
        f"{b['window']:>3}  {burn_text(b['rate'])}" + (f"  ({b['reason']})" if b["reason"] else "") for b in s["burns"]
    ]
    fields: list[tuple[str, str | list[str]]] = [
        ("slo", f"{s['name']}: {pct(s['objective'])} of {s['sli']} good over {s['window']}"),
        ("routes", s["routes"]),
        ("team", s["team"]),
        ("at", utc_minute(s["at"]) if s["at"] else "no traffic yet"),
        ("budget", spent_line),
        ("left", budget_text(s["budget_remaining"])),
        ("burn", burns or ["no burn windows yet"]),
        ("alerts", [f"{a['alert_id']} {a['severity']} {a['state']}" for a in s["alerts"]] or "none open"),
    ]
    if s.get("description"):
        fields.insert(1, ("about", s["description"]))
    spenders = [
        f"{pct(x['budget_spent']) if x['budget_spent'] is not None else MISSING}  "
        + (f"{x['issue_id']} {x['name']}" if x["issue_id"] else x["name"])
        for x in s.get("spenders", [])
    ]
    if spenders:
        fields.append(("spent by", spenders))  # each issue's share of the whole budget, most first
    return fields


@slo_group.command("show")
@click.argument("name")
@output_option
@service_options
def slo_show(settings: Settings, name: str, output: str) -> None:
    """One SLO: its budget, each burn window (or why it cannot tell), its alerts, and the issues spending it."""
    found = reach(settings, f"/api/slos/{quote(name, safe='')}")
    if output == "json":
        print_json(found)
        return
    print_labelled(labelled(slo_fields(found), terminal_width()))
    top = next((x for x in found["spenders"] if x["issue_id"]), None)
    if top is not None:
        out.print()
        console.print(
            f"the issue spending most: {cli_command()} issues show {top['issue_id']}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@slo_group.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--append",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="add the SLOs to this config file (else they are printed, to add by hand)",
)
def slo_import(path: Path, config: Path | None) -> None:
    """OpenSLO v1 documents (kind: SLO, with a ratioMetric of type claimwatch) as [[slo]] tables for the config
    file; anything claimwatch cannot honour is refused, saying what to change."""
    try:
        found = slo_settings(read_documents(path.read_text(encoding="utf-8")))
    except (OpenSloError, UnicodeDecodeError) as exc:
        raise Abort(f"{path}: {exc}") from None
    text = as_toml(found)
    if config is None:
        out.print(text, markup=False, highlight=False, soft_wrap=True, end="")
        return
    before = config.read_text(encoding="utf-8") if config.exists() else ""
    write_atomically(config, (before + ("\n" if before and not before.endswith("\n") else "") + "\n" + text).encode())
    console.print(
        f"added {plural(len(found), 'SLO')} to {config}: {', '.join(s.name for s in found)}; restart the worker "
        "to evaluate them",
        markup=False,
        highlight=False,
    )
