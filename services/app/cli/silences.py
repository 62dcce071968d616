"""`claimwatch alerts silence` (and its --preview), `alerts unsilence` and `alerts silences`."""

from __future__ import annotations

import click

from services.app.cli.alerts import alert_columns, alerts
from services.app.cli.base import Abort, by_option, console, print_json, reach, service_options, who
from services.app.cli.tables import Column, ago, output_option, print_table
from services.app.cli.tables import at as _at
from services.app.settings import Settings
from services.core.clock import utcnow
from services.core.numbers import plural


def preview_summary(p: dict) -> str:
    """The line under a preview's table: how many open and resolved alerts the matchers match, and that nothing
    was made."""
    resolved = f"; {plural(p['resolved'], 'resolved alert')} match{'es' if p['resolved'] == 1 else ''} too"
    return (
        f"{', '.join(p['matchers'])} would silence {plural(p['active'], 'open alert')}"
        f"{resolved if p['resolved'] else ''} (of the newest {p['searched']:,} open and resolved). "
        "No silence was created."
    )


@alerts.command("silence")
@click.option(
    "--match", "matchers", multiple=True, required=True, help="label=value, label!=value, label=~regex, label!~regex"
)
@click.option("--duration", default=None, help="e.g. 2h (or use --until)")
@click.option("--until", "until", default=None, help="RFC 3339 end time")
@by_option("Who silences.")
@click.option("--comment", default=None, help="Why (required unless --preview).")
@click.option("--preview", is_flag=True, help="Only list the alerts these matchers would silence; create nothing.")
@output_option
@service_options
def alerts_silence(
    settings: Settings,
    matchers: tuple[str, ...],
    duration: str | None,
    until: str | None,
    by: str | None,
    comment: str | None,
    preview: bool,
    output: str,
) -> None:
    """Silence alerts matching labels (route, kind, severity) until a time; --preview lists what it would silence."""
    from services.contract.model import parse_timestamp

    if preview:
        found = reach(settings, "/api/silences/preview", {}, method="POST", body={"matchers": list(matchers)})
        if output == "json":
            print_json(found)
            return
        if found["alerts"]:
            print_table(alert_columns(utcnow()), found["alerts"], output)
        console.print(preview_summary(found))
        return
    if not comment:
        raise Abort("give --comment (why), or --preview to only see what the silence would match")
    by = who(settings, by)
    try:
        ends_at = parse_timestamp(until) if until else None
    except Exception:
        raise Abort(f"--until must be an RFC 3339 timestamp with offset, got {until!r}") from None
    if duration is None and until is None:
        raise Abort("give --duration (e.g. 2h) or --until")
    body = {
        "matchers": list(matchers),
        "by": by,
        "comment": comment,
        "duration": duration,
        "ends_at": ends_at.isoformat() if ends_at else None,
    }
    data = reach(settings, "/api/silences", {}, method="POST", body=body)
    if output == "json":
        print_json(data)
        return
    console.print(f"silence {data['silence_id']} until {_at(data['ends_at'], utcnow())}: {', '.join(data['matchers'])}")


@alerts.command("unsilence")
@click.argument("silence_id")
@by_option("Who ends the silence.")
@service_options
def alerts_unsilence(settings: Settings, silence_id: str, by: str | None) -> None:
    """End a silence now."""
    by = who(settings, by)
    data = reach(settings, f"/api/silences/{silence_id}", {}, method="DELETE", body={"by": by})
    ended_by = f" by {data['ended_by']}" if data.get("ended_by") else ""
    console.print(f"silence {data['silence_id']} ended at {_at(data['ends_at'], utcnow())}{ended_by}")


def silence_columns(now) -> list[Column]:
    return [
        Column("SILENCE", lambda s: s["silence_id"], kind="id"),
        Column("MATCHERS", lambda s: ", ".join(s["matchers"]), kind="name", min_width=16),
        Column("ENDS", lambda s: ago(s["ends_at"], now), kind="num"),
        Column("ACTIVE", lambda s: "yes" if s.get("active") else "no", 1),
        Column("BY", lambda s: s["created_by"], 2, "name", lines=1, min_width=8),
        Column("ENDED BY", lambda s: s.get("ended_by") or "", 4, "name", lines=1, min_width=8),
        Column("COMMENT", lambda s: s["comment"], 3, "name", min_width=16),
        Column("STARTS", lambda s: ago(s["starts_at"], now), 4, "num"),
    ]


@alerts.command("silences")
@click.option("--active", is_flag=True)
@output_option
@service_options
def alerts_silences(settings: Settings, active: bool, output: str) -> None:
    """List silences (-o wide: every column; -o json: the API's JSON)."""
    data = reach(settings, "/api/silences", {"active": active})
    if output == "json":
        print_json(data)
        return
    print_table(silence_columns(utcnow()), data, output, empty="no silences")
