"""`claimwatch trace ID`: one trace whole, as text that fits 80 columns (or JSON)."""

from __future__ import annotations

import re
import shlex
import textwrap
from datetime import UTC, datetime
from urllib.parse import quote

import click

from services.app.cli.base import main, print_json, reach, service_options
from services.app.settings import Settings
from services.core.command import cli_command
from services.issues.traces import CLAIMS_PER_PAGE, MAX_CLAIMS_PAGE

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
