"""`claimwatch traces`: the traces list, searched (a table, a page at a time); `claimwatch trace ID`: one trace
whole, as text that fits 80 columns (or JSON)."""

from __future__ import annotations

import re
import shlex
import textwrap
from datetime import UTC, datetime
from urllib.parse import quote

import click
from rich.text import Text

from services.app.cli.base import console, main, out, print_json, reach, reach_page, service_options
from services.app.cli.data import page_note
from services.app.cli.tables import Column, ago, output_option, paging_options, print_table
from services.app.settings import Settings
from services.contract.model import CANONICAL_VERDICTS
from services.core.clock import utcnow
from services.core.command import cli_command
from services.core.numbers import thousands
from services.issues.traces import CLAIMS_PER_PAGE, MAX_CLAIMS_PAGE
from services.issues.tracesearch import ANY_FAILED, MAX_SEARCH_ROWS, MAX_VERSIONS, TIME_FORMS, TRACES_PER_PAGE

WIDTH = 80
# Trace text is untrusted: terminal control sequences are shown as nothing, not executed.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _plain(text: object) -> str:
    return _CONTROL.sub("", str(text))


def _wrap(text: object, indent: str, first: str | None = None, limit: int | None = None) -> list[str]:
    value = _plain(text)
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    lines: list[str] = []
    for n, para in enumerate(value.splitlines() or [""]):
        lead = first if first is not None and n == 0 else indent
        lines += textwrap.wrap(
            para, WIDTH, initial_indent=lead, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False
        ) or [lead.rstrip()]
    return lines


def _when(text: str) -> str:
    try:
        ts = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return _plain(text)
    return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _chunk(claim: dict) -> list[str]:
    chunk = claim.get("chunk")
    if chunk:
        bits = [chunk["chunk_id"]] + [
            b for b in (chunk.get("source_id"), chunk.get("version") and f"version {chunk['version']}") if b
        ]
        if chunk.get("used") is not None:
            bits.append("used" if chunk["used"] else "not used")
        lines = _wrap(" · ".join(bits), "            ", "     chunk: ")
        if chunk.get("text"):
            lines += _wrap(chunk["text"], "            ", limit=400)
        return lines
    if claim.get("chunk_id"):
        return _wrap(f"{claim['chunk_id']} (not among the event's retrieved chunks)", "            ", "     chunk: ")
    return ["     chunk: none named"]


def _event_lines(e: dict) -> list[str]:
    lines = _wrap(f"route {e['route']} · event {e['event_id']}", "  ", "")
    lines += [
        f"observed {_when(e['observed_at'])} (event time)",
        f"first failed stage: {e.get('first_failed_stage') or 'not reported'}",
        f"action: {e.get('action') or 'not reported'}",
    ]
    versions = ", ".join(f"{k}={v}" for k, v in sorted((e.get("versions") or {}).items()))
    lines += _wrap(versions or "none sent", "  ", "versions: ")
    lines += ["", "question"] + _wrap(e.get("question") or "(no question text was sent)", "  ")
    lines += ["", "answer"] + _wrap(e.get("answer") or "(no answer text was sent)", "  ")
    claims = e.get("claims") or []
    shown = (
        f": {e['claims_from'] + 1:,}–{e['claims_from'] + len(claims):,} shown"
        if e["claim_count"] > len(claims) and claims
        else ""
    )
    lines += ["", f"claims ({e['claim_count']:,}, {e['failed_claims']:,} failed{shown})"]
    for c in claims:
        score = "" if c.get("score") is None else f" {c['score']:.2f}"
        lines += _wrap(c.get("text") or "(no text)", "     ", f"{c['index'] + 1:>3}. [{c['verdict']}{score}] ")
        lines += _wrap(f'"{c["span"]}"' if c.get("span") else "none", "            ", "      span: ", limit=400)
        lines += _chunk(c)
        if c.get("issue_ids"):
            lines += _wrap(", ".join(c["issue_ids"]), "            ", "    issues: ")
    return lines


def trace_text(data: dict) -> str:
    """The trace as lines of at most 80 columns."""
    lines = _wrap(data["trace_id"], "      ", "trace ") + _event_lines(data)
    lines += ["", "issues"]
    for i in data.get("issues") or []:
        lines += _wrap(
            f"{i['name']} ({i['state'] or 'no state'}; {i['claims']} of this trace's claims): "
            f"claimwatch issues show {i['issue_id']}",
            "    ",
            f"  {i['issue_id']}: ",
        )
    if not data.get("issues"):
        lines.append("  none of its claims belongs to an issue")
    for n, e in enumerate(data.get("earlier") or [], 1):
        lines += ["", f"earlier answer {n}"] + ["  " + line if line else "" for line in _event_lines(e)]
    page, pages = data["claims_page"], data["claims_pages"]
    if page < pages:
        lines += [
            "",
            f"claims page {page} of {pages}; the next: "
            f"{cli_command()} trace {shlex.quote(data['trace_id'])} --claims-page {page + 1}",
        ]
    return "\n".join(line.rstrip() for line in lines)


@main.command()
@click.argument("trace_id")
@click.option(
    "--claims-page",
    type=click.IntRange(1, MAX_CLAIMS_PAGE),
    default=1,
    show_default=True,
    help=f"Page of each answer's claims, {CLAIMS_PER_PAGE} a page.",
)
@click.option("--json", "as_json", is_flag=True, help="The API's JSON instead of text.")
@service_options
def trace(settings: Settings, trace_id: str, claims_page: int, as_json: bool) -> None:
    """One trace: question, answer, every claim with its verdict, span and chunk, versions, issues."""
    data = reach(settings, f"/api/traces/{quote(trace_id, safe='')}", {"claims_page": claims_page})
    if as_json:
        print_json(data)
        return
    click.echo(trace_text(data))


def trace_columns(now: datetime) -> list[Column]:
    """The traces list's table (`claimwatch traces`, the assistant's search_traces): FIRST SEEN relative to ``now``."""
    return [
        Column("TRACE", lambda t: t["trace_id"], kind="id"),
        Column("ROUTE", lambda t: t["route"], kind="key"),
        Column("FIRST SEEN", lambda t: ago(t["first_observed_at"], now), 1, "num"),
        Column("EVENTS", lambda t: thousands(t["events"]), 4, "num"),
        Column(
            "CLAIMS",
            lambda t: thousands(t["claims"]),
            2,
            "num",
            note="the trace's claims that match the filters; FAILED: those of them with a failed verdict",
        ),
        Column("FAILED", lambda t: thousands(t["failed"]), kind="num"),
        Column("VERDICTS", lambda t: t["verdicts"], 3, "list", lines=1, min_width=12),
        Column(
            "CLAIM",
            lambda t: f"[{t['claim']['verdict']}] {t['claim']['text']}",
            kind="name",
            lines=3,
            min_width=24,
            note="one matched claim with its verdict, a failed one if any",
        ),
    ]


def search_title(since: str | None, until: str | None, text: str | None) -> str:
    span = (f"since {since}" if since else "in the 24 h before " + (until or "now")) + (
        f" until {until}" if since and until else ""
    )
    return f"Traces {span}" + (f" with a claim containing {text!r}" if text else "") + ", newest first"


@main.command("traces")
@click.option("--route", default=None, help="Only this route (its whole name).")
@click.option(
    "--verdict",
    "verdicts",
    multiple=True,
    metavar="VERDICT",
    help=f"Only claims with this verdict (repeat for any of several): {', '.join(CANONICAL_VERDICTS)}, or "
    f"{ANY_FAILED} (any failed verdict).",
)
@click.option(
    "--version",
    "versions",
    multiple=True,
    metavar="KEY=VALUE",
    help=f"Only claims whose versions hold this, e.g. model=gen-2026-11 (repeat: all of them; at most {MAX_VERSIONS}).",
)
@click.option(
    "--since",
    default=None,
    metavar="6h|RFC3339",
    help=f"Start of the range: {TIME_FORMS}. [default: 24 h before --until]",
)
@click.option("--until", default=None, metavar="6h|RFC3339", help="End of the range (not included). [default: now]")
@click.option("--text", default=None, help="Only claims whose text contains this, without case.")
@paging_options("traces", TRACES_PER_PAGE, MAX_SEARCH_ROWS)
@output_option
@service_options
def traces(
    settings: Settings,
    route: str | None,
    verdicts: tuple[str, ...],
    versions: tuple[str, ...],
    since: str | None,
    until: str | None,
    text: str | None,
    limit: int,
    offset: int,
    output: str,
) -> None:
    """Traces with a claim that matches every filter given, newest first, a page at a time: route, verdict,
    versions, event time (at most 31 days; default the last 24 hours) and claim text. Each row counts the
    trace's matched claims and shows one of them; `claimwatch trace TRACE_ID` shows a trace whole. -o json prints
    the API's JSON (the page); -o wide every column."""
    params = {
        "route": route,
        "verdict": list(verdicts),
        "version": list(versions),
        "since": since,
        "until": until,
        "text": text,
        "limit": limit,
        "offset": offset,
    }
    data, total = reach_page(settings, "/api/traces", {k: v for k, v in params.items() if v not in (None, [])})
    more = page_note(data, total, offset, limit, None, "trace")
    if output == "json":
        print_json(data)
        if more:
            console.print(Text(more), soft_wrap=True)
        return
    if not data:
        out.print(
            Text(more or "no traces match in this range: widen it with --since (at most 31 days) or loosen a filter"),
            soft_wrap=True,
        )
        return
    print_table(trace_columns(utcnow()), data, output, title=search_title(since, until, text))
    if more:
        out.print(Text(more), soft_wrap=True)
