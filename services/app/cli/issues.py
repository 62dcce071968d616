"""`claimwatch` commands. Issues: cluster, list, show, resolve, merge, runbook (triage: cli/triage.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from services.app.cli.base import (
    Abort,
    by_option,
    console,
    main,
    on_store,
    print_json,
    reach,
    service_options,
    text_or_json,
    who,
)
from services.app.cli.tables import (
    Column,
    Command,
    ago,
    at,
    labelled,
    output_option,
    print_labelled,
    print_markdown,
    print_table,
    terminal_width,
)
from services.app.settings import Settings
from services.core.clock import utcnow
from services.core.command import cli_command
from services.core.names import visible_controls
from services.core.numbers import pct


@main.command()
@click.argument("input_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Offline mode: assignments JSONL.")
@click.option("--issues-out", type=click.Path(dir_okay=False, path_type=Path), help="Offline mode: issues JSONL.")
@click.option(
    "--schedule", is_flag=True, help="Re-cluster the store every clustering.interval_minutes (server deployments)."
)
@service_options
def cluster(
    settings: Settings, input_file: Path | None, out: Path | None, issues_out: Path | None, schedule: bool
) -> None:
    """Cluster failing claims into named issues: a file (offline), the store once, or on a schedule."""
    from clustering.progress import RichStageProgress
    from services.app.compose import clustering_config

    if input_file is not None:
        from clustering.offline import OfflineInputError, cluster_file

        if out is None or issues_out is None:
            raise Abort("offline mode needs --out ASSIGNMENTS.jsonl and --issues-out ISSUES.jsonl")
        try:
            with RichStageProgress(console) as progress:
                config = clustering_config(settings)
                summary = cluster_file(input_file, out, issues_out, config, progress, now=utcnow())
        except (OfflineInputError, ValueError, RuntimeError) as exc:
            raise Abort(str(exc)) from None
        console.print(
            f"{summary.get('claims', 0)} failing claims -> {summary.get('issues', 0)} issues "
            f"({summary.get('noise', 0)} noise) -> {out}, {issues_out}"
        )
        for note in summary.get("notes", []):
            console.print(f"note: {note}")
        return
    import time

    def run(components) -> None:
        jobs = components.issue_jobs  # the model loads once, on the first run
        while True:
            with RichStageProgress(console) as progress:
                report = jobs.recluster(utcnow(), progress)
            console.print(f"{report.claims} failing claims -> {report.issues} issues ({report.noise} noise)")
            if not schedule:
                return
            time.sleep(settings.clustering.interval_minutes * 60)

    on_store(settings, run, unavailable="{exc} (a running `" + cli_command() + " up` re-clusters on its own schedule)")


@main.group()
def issues() -> None:
    """Named issues: list, show, resolve, merge, and triage (assign, archive, note, link)."""


@issues.command("list")
@click.option(
    "--state",
    type=click.Choice(["new", "ongoing", "regressed", "resolved", "archived"]),
    default=None,
    help="archived issues are listed only with --state archived",
)
@click.option("--route", default=None)
@click.option("--owner", default=None, help="the issue's team or owner")
@click.option("--assignee", default=None)
@click.option(
    "--sort",
    type=click.Choice(["priority", "last_seen", "first_seen", "count", "name"]),
    default="priority",
    show_default=True,
    help="priority: issues driving a firing alert, then regressed or escalating, then the rest",
)
@click.option("--limit", default=50, show_default=True)
@output_option
@service_options
def issues_list(
    settings: Settings,
    state: str | None,
    route: str | None,
    owner: str | None,
    assignee: str | None,
    sort: str,
    limit: int,
    output: str,
) -> None:
    """Issues, in priority order by default (the state column flags escalating issues and firing alerts)."""
    filters = {"state": state, "route": route, "owner": owner, "assignee": assignee}
    params = {k: v for k, v in {**filters, "sort": sort, "limit": limit}.items() if v}
    data = reach(settings, "/api/issues", params)
    if output == "json":
        print_json(data)
        return
    print_table(
        issue_columns(utcnow()), data, output, empty="no issues yet: they appear after the first clustering run"
    )


def issue_columns(now) -> list[Column]:
    return [
        Column("ISSUE", lambda i: i["issue_id"], kind="id"),
        Column("NAME", lambda i: i["name"], kind="name", lines=2, min_width=24),
        Column("STATE", _state_cell),
        Column("OWNER", lambda i: i.get("owner") or "", 4, "key"),
        Column("ROUTES", lambda i: list(i["routes"]), 1, "list", lines=1, min_width=14),  # kept at 80 columns
        Column("COUNT", lambda i: str(i["count"]), 2, "num"),
        Column("LAST SEEN", lambda i: ago(i["last_seen"], now), 3, "num"),
        Column("FIRST SEEN", lambda i: ago(i["first_seen"], now), 4, "num"),
    ]


def _state_cell(issue: dict) -> str:
    """The state, then the flags that put the issue high in the priority order."""
    flags = ["escalating"] * bool(issue.get("escalating")) + ["alert"] * bool(issue.get("drives_alerts"))
    return "\n".join([issue["state"], *flags])


@issues.command("show")
@click.argument("issue_id")
@text_or_json
@service_options
def issues_show(settings: Settings, issue_id: str, output: str, as_json: bool) -> None:
    """One issue: its title, state, routes, counts, when it was seen, its traces and the alerts it drives."""
    data = reach(settings, f"/api/issues/{issue_id}", {})
    if output == "json" or as_json:
        print_json(data)
        return
    print_labelled(labelled(issue_fields(data, utcnow()), terminal_width()))


def excess_share(share: float | None) -> str:
    """An issue's part of an alert's excess; past 100% or below zero says why, as the issue page does (the
    parts add up to 100%, so one issue can pass it when another part fell)."""
    why = (
        " (it grew more than the route did)"
        if share is not None and share > 1
        else " (it shrank)"
        if share is not None and share < 0
        else ""
    )
    return f"{pct(share)} of its excess failing claims{why}"


def issue_fields(i: dict, now) -> list[tuple[str, str | list[str]]]:
    """What `issues show` prints, in order: (label, value or lines); empty values are left out."""
    flags = ["escalating"] * bool(i.get("escalating")) + ["behind a firing alert"] * bool(i.get("drives_alerts"))
    verdicts = ", ".join(f"{v} {n:,}" for v, n in sorted((i.get("verdicts") or {}).items(), key=lambda x: -x[1]))
    routes = [
        f"{r['route']}: {r['members']:,} claim{'' if r['members'] == 1 else 's'}; now {pct(r.get('rate'))}, "
        f"expected {pct(r.get('expected'))}"
        for r in i.get("route_figures") or []
    ] or list(i.get("routes") or [])
    alerts = [
        f"{a['alert_id']} on {a['route']}: {a.get('state_text') or a['state']}, {excess_share(a.get('share'))}"
        for a in i.get("alerts") or []
    ]
    alerts += [
        f"{a['alert_id']} on {a['route']}: firing"
        for a in i.get("drives_alerts") or []
        if a["alert_id"] not in {b["alert_id"] for b in i.get("alerts") or []}
    ]
    traces = [
        f"{e['trace_id']} ({e.get('verdict', '')} on {e.get('route', '')}): {e.get('text', '')}"
        for e in i.get("exemplars") or []
        if e.get("trace_id")
    ]
    fields = [
        ("issue", i["issue_id"]),
        ("name", i["name"]),
        ("about", i.get("subtitle") or ""),
        ("state", ", ".join([i["state"], *flags])),
        ("severity", i.get("severity") or ""),
        ("routes", routes),
        (
            "claims",
            f"{i['count']:,} failing claims, {i.get('recent_count', 0):,} in the last 24 h"
            + (f", from {i['traces']:,} traces" if i.get("traces") is not None else ""),
        ),
        ("verdicts", verdicts),
        ("first seen", at(i.get("first_seen"), now)),
        ("last seen", at(i.get("last_seen"), now)),
        ("stage", i.get("first_failed_stage") or ""),
        ("alerts", alerts),
        ("traces", traces),
        (
            "merged into",
            [
                f"{i['merged_into']}, where its claims are now:",
                Command(f"{cli_command()} issues show {i['merged_into']}"),
            ]
            if i.get("merged_into")
            else "",
        ),
        *triage_fields(i, now),
        ("runbook", Command(f"{cli_command()} runbook {i['issue_id']}")),
    ]
    return [(label, value) for label, value in fields if value]


def triage_fields(i: dict, now) -> list[tuple[str, str | list[str]]]:
    """Owner, assignee, suggested merges, archive, ticket and the activity (newest first), for `issues show`."""
    owner = f"{i.get('owner')} (team {i.get('team')})" if i.get("owner") != i.get("team") else i.get("team") or ""
    entries = [f"{at(e['at'], now)} {e['by']}: {e['summary']}" for e in i.get("activity") or []]
    if i.get("activity_total", 0) > len(entries):
        entries.append(f"… {i['activity_total'] - len(entries):,} older on the issue page")
    merges = [
        f"{c['issue_id']} ({c['similarity']:.2f} centroid similarity, {c['links']:.2f} neighbour links, "
        f"{c['needed']:.2f} needed here; both say "
        f"{', '.join(c['shared_words']) or 'no word in common'}): {c['name']}; "
        f"{cli_command()} issues merge {i['issue_id']} --into {c['issue_id']}"
        for c in i.get("merge_candidates") or []
    ]
    return [
        ("owner", owner),
        ("assignee", i.get("assignee") or ""),
        ("merge with?", merges),
        ("archived", (i.get("archive") or {}).get("text", "")),
        ("ticket", visible_controls(i.get("ticket_url") or "")),
        ("activity", entries),
    ]


@issues.command("resolve")
@click.argument("issue_id")
@click.option(
    "--in-next-version",
    is_flag=True,
    help="Regress only on a corpus, model or prompt version other than those current on its dominant route now.",
)
@by_option("Who resolves it.")
@service_options
def issues_resolve(settings: Settings, issue_id: str, in_next_version: bool, by: str | None) -> None:
    """Mark an issue resolved (it comes back as 'regressed' if it recurs)."""
    by = who(settings, by)
    data = reach(
        settings,
        f"/api/issues/{issue_id}/resolve",
        {},
        method="POST",
        body={"by": by, "in_next_version": in_next_version},
    )
    console.print(f"{data['issue_id']} is {data['state']}")


@issues.command("merge")
@click.argument("issue_id")
@click.option("--into", required=True)
@by_option("Who merges them.")
@service_options
def issues_merge(settings: Settings, issue_id: str, into: str, by: str | None) -> None:
    """Merge one issue into another; both keep the record."""
    by = who(settings, by)
    data = reach(settings, f"/api/issues/{issue_id}/merge", {}, method="POST", body={"into": into, "by": by})
    console.print(f"merged {issue_id} into {data['issue_id']}")


@main.command()
@click.argument("issue_id")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), default="md", show_default=True)
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the Markdown source instead of rendering it.")
@click.option("--alert", "alert_id", metavar="ALERT_ID", help="The alert you came from: its window gives the traces.")
@service_options
def runbook(settings: Settings, issue_id: str, fmt: str, as_markdown: bool, alert_id: str | None) -> None:
    """The runbook of one issue, rendered for the terminal (--markdown: its Markdown source; --format html)."""
    text = reach(
        settings, f"/api/issues/{issue_id}/runbook", {"format": fmt, **({"alert": alert_id} if alert_id else {})}
    )
    text = text["runbook"] if isinstance(text, dict) else text
    if fmt == "html" or as_markdown:
        sys.stdout.write(text + "\n")
        return
    print_markdown(text, terminal_width())
