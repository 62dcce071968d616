"""`claimwatch alerts rules`: each alert kind's severity, whether it pages, the thresholds in force and the
false alarms and delay the benches measured (services/alerts/oncall/rules.py)."""

from __future__ import annotations

from rich.text import Text

from services.app.cli.alerts import alerts, labelled
from services.app.cli.base import out, print_json, reach, service_options
from services.app.cli.tables import Column, output_option, print_table, terminal_width
from services.app.cli.tables import _plain as plain
from services.app.settings import Settings

NOT_MEASURED = "not measured"  # a figure no bench wrote: never guessed


def _false_alarms(r: dict) -> str:
    """Measured false alarms per route per 90 days, beside the rate the rule promises when it states one."""
    x, promised = r.get("false_alarms_per_route_per_90_days"), r.get("promised_false_alarms_per_route_per_90d")
    measured = NOT_MEASURED if x is None else f"{x:.3g}"
    return measured if promised is None else f"{measured} (promised {promised:g})"


def _by_volume(r: dict) -> str:
    volumes = r.get("false_alarms_by_volume") or {}
    return "; ".join(f"{volume}: {x:.3g}" for volume, x in volumes.items())


def _delays(r: dict) -> str:
    delays = r.get("median_delay_minutes")
    if not delays:
        return NOT_MEASURED
    return "; ".join(
        f"{condition}: {m:g} min" if isinstance(m, (int, float)) else f"{condition}: {m}"
        for condition, m in delays.items()
    )


RULE_COLUMNS = [
    Column("KIND", lambda r: r["kind"], kind="key"),
    Column("SEVERITY", lambda r: "/".join(r["severities"])),
    Column("PAGES", lambda r: "yes" if r["pages"] else "no"),
    Column("FALSE ALARMS", _false_alarms, kind="name", lines=2, min_width=10),
    Column("MEDIAN DELAY", _delays, kind="name", lines=4, min_width=14),
    Column("MEASURED", lambda r: r.get("measured_on") or "—", 2),
    Column("BY", lambda r: r.get("measured_by") or "—", 3, "name", lines=3, min_width=16),
]


def _measured(r: dict) -> str:
    """Where the figures come from, and the figures: "not measured" when a bench wrote none."""
    by, on, note = r.get("measured_by"), r.get("measured_on"), r.get("note")
    if r.get("false_alarms_per_route_per_90_days") is None and not r.get("median_delay_minutes"):
        said = NOT_MEASURED + (f" yet ({by} measures it)" if by else "")
    else:
        said = (
            f"by {by or 'an unnamed command'}"
            + (f" on {on}" if on else "")
            + f": false alarms per route per 90 days {_false_alarms(r)}"
            + (f", by volume {_by_volume(r)}" if r.get("false_alarms_by_volume") else "")
            + f"; median delay {_delays(r)}"
        )
    return said + (f"; {note}" if note else "")


def rule_fields(r: dict) -> list[tuple[str, str | list[str]]]:
    """One rule's text under the table: meaning, severity, every threshold with its setting, the inhibition rules
    it takes part in, where the figures come from."""
    thresholds = [t["text"] + (f" ({t['setting']})" if t.get("setting") else "") for t in r["thresholds"]]
    return [
        ("means", r["meaning"]),
        ("severity", f"{r['severity']}; {'pages' if r['pages'] else 'does not page'}"),
        ("thresholds", thresholds),
        ("inhibition", [f"{i['text']} ({i['setting']})" for i in r.get("inhibition") or ()]),
        ("measured", _measured(r)),
    ]


@alerts.command("rules")
@output_option
@service_options
def alerts_rules(settings: Settings, output: str) -> None:
    """Each alert kind: severity, whether it pages, thresholds in force and the benches' false alarms and delay."""
    data = reach(settings, "/api/alerts/rules", {})
    if output == "json":
        print_json(data)
        return
    width = terminal_width()
    print_table(
        RULE_COLUMNS,
        data,
        output,
        title="False alarms per route per 90 days, median delay to fire (benches)",
        empty="no alert rules",
        width=width,
    )
    for rule in data:
        out.print()
        out.print(Text(plain(rule["kind"]), style="bold"), soft_wrap=True)
        for line in labelled(rule_fields(rule), width - 2, label_width=12):
            label = line[:12].rstrip()
            out.print(Text.assemble("  ", (label, "bold"), line[len(label) :]), soft_wrap=True)
