"""`claimwatch` commands. Alerts: list, show, ack, silence, and the backtest."""
from __future__ import annotations

import os
from pathlib import Path

import click

from services.app.cli.base import Abort, console, main, print_json, reach, service_options, pct
from services.app.cli.tables import Column, ago, output_option, print_table
from services.api.serialise import as_json as serialise
from services.core.clock import utcnow
from services.app.settings import Settings, SettingsError, load_settings


@main.group()
def alerts() -> None:
    """Drift alerts: list, show, ack, silence and unsilence."""


def alert_columns(now) -> list[Column]:
    return [
        Column("ALERT", lambda a: a["alert_id"], kind="id"),
        Column("ROUTE", lambda a: a["route"], kind="key"),
        Column("STATE", lambda a: a["state"]),
        Column("SEVERITY", lambda a: a["severity"], 2),
        Column("RATE", lambda a: pct(a["rate"]), 1, "num"),
        Column("BASELINE", lambda a: pct(a["baseline"]), 3, "num"),
        Column("DELTA", lambda a: f"+{100 * (a['delta'] or 0):.1f} pts", 2, "num"),
        Column("SINCE", lambda a: ago(a["starts_at"] or a["pending_since"], now), 1, "num"),
        Column("ACKED BY", lambda a: a["acked_by"] or "", 4, "name", lines=1, min_width=8),
        Column("SILENCED BY", lambda a: " ".join(a["silenced_by"]), 5, "id"),
    ]


@alerts.command("list")
@click.option("--route", default=None)
@click.option("--state", type=click.Choice(["pending", "firing", "resolved"]), default=None)
@output_option
@service_options
def alerts_list(settings: Settings, route: str | None, state: str | None, output: str) -> None:
    """Alerts, newest first (-o wide: every column; -o json: the API's JSON)."""
    params = {k: v for k, v in {"route": route, "state": state}.items() if v}
    data = reach(settings, "/api/alerts", params, lambda c: serialise(c.alerts.list(utcnow(), route, state)))
    if output == "json":
        print_json(data)
        return
    print_table(alert_columns(utcnow()), data, output, empty="no alerts")


@alerts.command("show")
@click.argument("alert_id")
@service_options
def alerts_show(settings: Settings, alert_id: str) -> None:
    """One alert with its intervals, suspect changes and transitions (JSON)."""
    print_json(reach(settings, f"/api/alerts/{alert_id}", {}, lambda c: serialise(c.alerts.show(alert_id, utcnow()))))


@alerts.command("ack")
@click.argument("alert_id")
@click.option("--by", required=True, help="Who acknowledges.")
@click.option("--note", default="", help="What you are doing about it.")
@service_options
def alerts_ack(settings: Settings, alert_id: str, by: str, note: str) -> None:
    """Acknowledge an alert (an unknown id is an error)."""
    data = reach(settings, f"/api/alerts/{alert_id}/ack", {}, lambda c: serialise(c.alerts.ack(alert_id, by, note, utcnow())),
                 method="POST", body={"by": by, "note": note})
    console.print(f"acked {data['alert_id']} ({data['route']}, {data['state']}) by {data['acked_by']}")


@alerts.command("silence")
@click.option("--match", "matchers", multiple=True, required=True, help="label=value, label!=value, label=~regex, label!~regex")
@click.option("--duration", default=None, help="e.g. 2h (or use --until)")
@click.option("--until", "until", default=None, help="RFC 3339 end time")
@click.option("--by", required=True)
@click.option("--comment", required=True, help="Why.")
@service_options
def alerts_silence(settings: Settings, matchers: tuple[str, ...], duration: str | None, until: str | None,
                   by: str, comment: str) -> None:
    """Silence alerts matching labels (route, kind, severity) until a time."""
    from services.contract.model import parse_timestamp

    try:
        ends_at = parse_timestamp(until) if until else None
    except Exception:
        raise Abort(f"--until must be an RFC 3339 timestamp with offset, got {until!r}") from None
    if duration is None and until is None:
        raise Abort("give --duration (e.g. 2h) or --until")
    body = {"matchers": list(matchers), "by": by, "comment": comment, "duration": duration,
            "ends_at": ends_at.isoformat() if ends_at else None}
    data = reach(settings, "/api/silences", {}, lambda c: serialise(c.alerts.silence(
        list(matchers), by, comment, utcnow(), duration=duration, ends_at=ends_at)), method="POST", body=body)
    console.print(f"silence {data['silence_id']} until {data['ends_at']}: {', '.join(data['matchers'])}")


@alerts.command("unsilence")
@click.argument("silence_id")
@service_options
def alerts_unsilence(settings: Settings, silence_id: str) -> None:
    """End a silence now."""
    data = reach(settings, f"/api/silences/{silence_id}", {}, lambda c: serialise(c.alerts.unsilence(silence_id, utcnow())),
                 method="DELETE")
    console.print(f"silence {data['silence_id']} ended at {data['ends_at']}")


def silence_columns(now) -> list[Column]:
    return [
        Column("SILENCE", lambda s: s["silence_id"], kind="id"),
        Column("MATCHERS", lambda s: ", ".join(s["matchers"]), kind="name", min_width=16),
        Column("ENDS", lambda s: ago(s["ends_at"], now), kind="num"),
        Column("ACTIVE", lambda s: "yes" if s.get("active") else "no", 1),
        Column("BY", lambda s: s["created_by"], 2, "name", lines=1, min_width=8),
        Column("COMMENT", lambda s: s["comment"], 3, "name", min_width=16),
        Column("STARTS", lambda s: ago(s["starts_at"], now), 4, "num"),
    ]


@alerts.command("silences")
@click.option("--active", is_flag=True)
@output_option
@service_options
def alerts_silences(settings: Settings, active: bool, output: str) -> None:
    """List silences (-o wide: every column; -o json: the API's JSON)."""
    data = reach(settings, "/api/silences", {"active": active}, lambda c: serialise(c.alerts.silences(utcnow(), active)))
    if output == "json":
        print_json(data)
        return
    print_table(silence_columns(utcnow()), data, output, empty="no silences")


@main.command()
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--alerts-out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None, help="TOML settings (drift section).")
def backtest(events: Path, alerts_out: Path, config_file: str | None) -> None:
    """Replay a JSONL file through the live rate and detector code in event time; write alert transitions."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from services.alerts.backtest import run_backtest

    try:
        settings = load_settings(config_file, os.environ, {})
    except SettingsError as exc:
        raise Abort(str(exc)) from None
    if not alerts_out.parent.exists():
        raise Abort(f"--alerts-out: directory {alerts_out.parent} does not exist")
    size = events.stat().st_size
    with Progress(TextColumn("backtest"), BarColumn(), TextColumn("{task.completed:,} events"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("events", total=None)
        summary = run_backtest(events, alerts_out, settings, progress=lambda n: progress.advance(task, n))
    console.print(f"{summary.events:,} events ({summary.rejected:,} invalid and {summary.duplicates:,} duplicates skipped), "
                  f"{summary.minutes:,} minutes evaluated, "
                  f"{summary.transitions} alert transitions -> {alerts_out}  [{size / 1e6:.0f} MB]")
