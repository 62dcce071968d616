"""`claimwatch issues` triage commands: assign, unassign, archive, unarchive, note, link (resolve and merge are in
issues.py). Each goes through the running API when one answers, as the same change made from the page would."""

from __future__ import annotations

from collections.abc import Callable

import click

from services.app.cli.base import Abort, by_option, console, reach, say_if_merged, service_options, who
from services.app.cli.issues import issues
from services.app.settings import Settings
from services.core.command import cli_command
from services.core.names import visible_controls


def _change(settings: Settings, issue_id: str, action: str, body: dict) -> dict:
    """POST /api/issues/ID/ACTION. A merged issue's change goes to the issue it was merged into, and this says so
    (the next line names that issue)."""
    data = reach(settings, f"/api/issues/{issue_id}/{action}", {}, method="POST", body=body)
    say_if_merged(issue_id, data.get("issue_id") or issue_id)
    return data


@issues.command("assign")
@click.argument("issue_id")
@click.argument("assignee")
@by_option("Who assigns it.")
@service_options
def issues_assign(settings: Settings, issue_id: str, assignee: str, by: str | None) -> None:
    """Assign an issue to someone (it is theirs until unassigned, whoever owns its route)."""
    by = who(settings, by)
    data = _change(settings, issue_id, "assign", {"assignee": assignee, "by": by})
    console.print(f"{data['issue_id']} is assigned to {data['assignee']} (team {data['team']})")


def _by_only(name: str, doc: str, said: Callable[[dict], str]) -> None:
    """A command whose one input is who does it (unassign, unarchive)."""

    @issues.command(name, help=doc)
    @click.argument("issue_id")
    @by_option("Who does it.")
    @service_options
    def command(settings: Settings, issue_id: str, by: str | None) -> None:
        by = who(settings, by)
        console.print(said(_change(settings, issue_id, name, {"by": by})))


_by_only(
    "unassign",
    "Leave an issue to the owner of its dominant route.",
    lambda data: f"{data['issue_id']} is unassigned; its owner is {data['owner']}",
)
_by_only(
    "unarchive",
    "Bring an archived issue back to the list now.",
    lambda data: f"{data['issue_id']} is {data['state']} again",
)


@issues.command("archive")
@click.argument("issue_id")
@click.option("--for", "duration", default=None, metavar="DURATION", help="Archive for this long (e.g. 8h, 7d).")
@click.option(
    "--until-claims",
    "claims",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Archive until N more failing claims.",
)
@by_option("Who archives it.")
@service_options
def issues_archive(settings: Settings, issue_id: str, duration: str | None, claims: int | None, by: str | None) -> None:
    """Archive an issue: it leaves `issues list` and comes back by itself when it escalates (the default), when
    --for has passed, or after --until-claims more failing claims."""
    from services.alerts.lifecycle.silences import parse_duration

    if duration and claims:
        raise Abort("give --for or --until-claims, not both (neither: until it escalates)")
    try:
        if duration:
            parse_duration(duration, "--for")  # the flag, named as the user typed it
    except ValueError as exc:
        raise Abort(str(exc)) from None
    by = who(settings, by)
    body = {"by": by, **({"duration": duration} if duration else {}), **({"claims": claims} if claims else {})}
    data = _change(settings, issue_id, "archive", body)
    console.print(
        f"{data['issue_id']} is archived {data['archive']['text']}; "
        f"`{cli_command()} issues list --state archived` lists it",
        soft_wrap=True,
    )  # a command, unbroken


@issues.command("note")
@click.argument("issue_id")
@click.argument("text")
@by_option("Who writes it.")
@service_options
def issues_note(settings: Settings, issue_id: str, text: str, by: str | None) -> None:
    """Add a note to an issue's activity (the runbook shows the latest ones)."""
    by = who(settings, by)
    data = _change(settings, issue_id, "notes", {"text": text, "by": by})
    console.print(f"noted on {data['issue_id']}")


@issues.command("link")
@click.argument("issue_id")
@click.argument("url")
@by_option("Who links it.")
@service_options
def issues_link(settings: Settings, issue_id: str, url: str, by: str | None) -> None:
    """Link an issue to the ticket its fix is tracked in (the issue webhook's events carry the link)."""
    by = who(settings, by)
    data = _change(settings, issue_id, "link", {"url": url, "by": by})
    console.print(f"{data['issue_id']} is linked to {visible_controls(data['ticket_url'])}", markup=False)
