"""`claimwatch` commands. Issues: cluster, list, show, resolve, merge, runbook."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from services.app.cli.base import Abort, console, main, on_store, print_json, reach, service_options
from services.app.cli.tables import Column, ago, output_option, print_table
from services.core.clock import utcnow
from services.app.settings import Settings


@main.command()
@click.argument("input_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Offline mode: assignments JSONL.")
@click.option("--issues-out", type=click.Path(dir_okay=False, path_type=Path), help="Offline mode: issues JSONL.")
@click.option("--schedule", is_flag=True, help="Re-cluster the store every clustering.interval_minutes (server deployments).")
@service_options
def cluster(settings: Settings, input_file: Path | None, out: Path | None, issues_out: Path | None, schedule: bool) -> None:
    """Cluster failing claims into named issues: a file (offline), the store once, or on a schedule."""
    from services.app.compose import clustering_config
    from clustering.progress import RichStageProgress

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
        console.print(f"{summary.get('claims', 0)} failing claims -> {summary.get('issues', 0)} issues "
                      f"({summary.get('noise', 0)} noise) -> {out}, {issues_out}")
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

    on_store(settings, run, unavailable="{exc} (a running `claimwatch up` re-clusters on its own schedule)")


@main.group()
def issues() -> None:
    """Named issues: list, show, resolve, merge."""


@issues.command("list")
@click.option("--state", type=click.Choice(["new", "ongoing", "regressed", "resolved"]), default=None)
@click.option("--route", default=None)
@click.option("--sort", type=click.Choice(["priority", "last_seen", "first_seen", "count", "name"]), default="priority",
              show_default=True, help="priority: issues driving a firing alert, then regressed or escalating, then the rest")
@click.option("--limit", default=50, show_default=True)
@output_option
@service_options
def issues_list(settings: Settings, state: str | None, route: str | None, sort: str, limit: int, output: str) -> None:
    """Issues, in priority order by default (the state column flags escalating issues and firing alerts)."""
    params = {k: v for k, v in {"state": state, "route": route, "sort": sort, "limit": limit}.items() if v}
    data = reach(settings, "/api/issues", params,
                 lambda c: c.issues.list(state=state, route=route, sort=sort, limit=limit))
    if output == "json":
        print_json(data)
        return
    print_table(issue_columns(utcnow()), data, output, empty="no issues yet: they appear after the first clustering run")


def issue_columns(now) -> list[Column]:
    return [
        Column("ISSUE", lambda i: i["issue_id"], kind="id"),
        Column("NAME", lambda i: i["name"], kind="name", lines=2, min_width=24),
        Column("STATE", _state_cell),
        Column("COUNT", lambda i: str(i["count"]), 1, "num"),
        Column("LAST SEEN", lambda i: ago(i["last_seen"], now), 1, "num"),
        Column("ROUTES", lambda i: list(i["routes"]), 2, "list", lines=1, min_width=14),
        Column("FIRST SEEN", lambda i: ago(i["first_seen"], now), 3, "num"),
    ]


def _state_cell(issue: dict) -> str:
    """The state, then the flags that put the issue high in the priority order."""
    flags = ["escalating"] * bool(issue.get("escalating")) + ["alert"] * bool(issue.get("drives_alerts"))
    return "\n".join([issue["state"], *flags])


@issues.command("show")
@click.argument("issue_id")
@service_options
def issues_show(settings: Settings, issue_id: str) -> None:
    """One issue with its exemplars and history (JSON)."""
    print_json(reach(settings, f"/api/issues/{issue_id}", {}, lambda c: c.issues.show(issue_id)))


@issues.command("resolve")
@click.argument("issue_id")
@click.option("--by", required=True)
@service_options
def issues_resolve(settings: Settings, issue_id: str, by: str) -> None:
    """Mark an issue resolved (it comes back as 'regressed' if it recurs)."""
    data = reach(settings, f"/api/issues/{issue_id}/resolve", {}, lambda c: c.issues.resolve(issue_id, by),
                 method="POST", body={"by": by})
    console.print(f"{data['issue_id']} is {data['state']}")


@issues.command("merge")
@click.argument("issue_id")
@click.option("--into", required=True)
@click.option("--by", required=True)
@service_options
def issues_merge(settings: Settings, issue_id: str, into: str, by: str) -> None:
    """Merge one issue into another; both keep the record."""
    data = reach(settings, f"/api/issues/{issue_id}/merge", {}, lambda c: c.issues.merge(issue_id, into, by),
                 method="POST", body={"into": into, "by": by})
    console.print(f"merged {issue_id} into {data['issue_id']}")


@main.command()
@click.argument("issue_id")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), default="md", show_default=True)
@service_options
def runbook(settings: Settings, issue_id: str, fmt: str) -> None:
    """Render the runbook of one issue."""
    text = reach(settings, f"/api/issues/{issue_id}/runbook", {"format": fmt},
                 lambda c: {"runbook": c.issues.runbook(issue_id, fmt)})
    sys.stdout.write((text["runbook"] if isinstance(text, dict) else text) + "\n")
