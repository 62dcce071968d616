"""One table renderer for every list command, in the manner of kubectl and gh.

Each column has a priority (0: always shown, higher: dropped sooner). At the terminal's
width the lowest-priority columns are dropped until the rest fit; then names wrap at word
boundaries (at most ``lines`` lines, ellipsised at the end after a whole word). Ids are never
wrapped or cut, and neither are keys such as route names (only one longer than ``KEY_MAX`` loses
its end). Under the table, each shown column that has a ``note`` says what it means.
``-o wide`` shows every column at full width; ``-o json`` (alias ``--json``) prints the
API's JSON unchanged.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import click
from rich.markdown import CodeBlock, Markdown
from rich.text import Text

from services.app.cli.base import out
from services.core.numbers import utc_minute

GAP = "  "
KEY_MAX = 40
OUTPUTS = ("table", "wide", "json")
# Values are untrusted (route names, claim text): control sequences are shown as nothing.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_DANGLING = " …\"'.,;:"  # left before an ellipsis they would read as "…\"…"
LABEL = 13  # labelled text: "transitions" and two spaces
_POINTS = re.compile(r"(\d) pts\b")

Kind = Literal["id", "key", "num", "text", "name", "list"]


@dataclass(frozen=True)
class Column:
    """``kind``: id (whole, always), key (whole up to KEY_MAX), num (right-aligned), text (short,
    whole), name (wraps at spaces to ``lines`` lines, narrows to ``min_width`` before dropping),
    list (the value is a list of keys, each kept whole, ``, +N`` for those that do not fit). ``note``: what
    the column means, printed under the table while the column is shown."""

    header: str
    value: Callable[[dict], Any]
    priority: int = 0
    kind: Kind = "text"
    lines: int = 2
    min_width: int = 16
    note: str = ""


def terminal_width() -> int:
    """$COLUMNS, else the terminal's width, else 80 (output to a pipe or a file)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size((80, 24)).columns


def _plain(value: Any) -> str:
    return _CONTROL.sub("", "" if value is None else str(value).replace("\t", " "))


def _cell_lines(column: Column, row: dict) -> list[str]:
    if column.kind == "list":
        return [_plain(item).replace("\n", " ") for item in column.value(row) or ()]
    text = _plain(column.value(row))
    if column.kind == "name":
        return [" ".join(text.split())]
    return text.split("\n")


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def _wrap(text: str, width: int, lines: int) -> list[str]:
    """At most ``lines`` lines of at most ``width``, broken at spaces only; ellipsised at the end."""
    if not text:
        return [""]
    wrapped = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
    kept = [_cut(line, width) for line in wrapped[:lines]]
    if len(wrapped) > lines:
        kept[-1] = _ellipsised(wrapped[lines - 1], width)
    return kept


def _ellipsised(line: str, width: int) -> str:
    """``line`` shortened to whole words and "…" within ``width`` (a quote or stop before the "…" goes too)."""
    words = line.split(" ")
    while len(words) > 1 and len(" ".join(words).rstrip(_DANGLING)) + 1 > width:
        words.pop()
    return _cut(" ".join(words).rstrip(_DANGLING) + "…", width)  # one word wider than the column: cut


def _pack(items: list[str], width: int, lines: int) -> list[str]:
    """Whole items, ", "-separated, in at most ``lines`` lines; ``+N`` says how many more there are."""
    rows: list[list[str]] = []
    for item in items:
        if rows and len(", ".join(rows[-1] + [item])) + 1 <= width:  # +1: the trailing comma
            rows[-1].append(item)
        else:
            rows.append([item])
    if len(rows) > lines:
        rows, more = rows[:lines], sum(len(r) for r in rows[lines:])
        while len(rows[-1]) > 1 and len(", ".join(rows[-1] + [f"+{more}"])) > width:
            rows[-1].pop()
            more += 1
        rows[-1].append(f"+{more}")
    text = [", ".join(r) + ("," if n < len(rows) - 1 else "") for n, r in enumerate(rows)]
    return [_cut(line, width) for line in text] or [""]


@dataclass(frozen=True)
class Layout:
    columns: list[Column]
    widths: list[int]
    dropped: list[str]


def layout(columns: Sequence[Column], rows: Sequence[dict], width: int | None, wide: bool = False) -> Layout:
    """Which columns fit ``width`` (all of them when ``wide``) and how wide each one is."""
    natural, minimum = [], []
    for col in columns:
        cells = [_cell_lines(col, row) for row in rows]
        if col.kind == "list":  # the first item of each row is always shown whole; later ones may become "+N"
            shortest = max(
                [min(len(c[0]), KEY_MAX) + (len(f", +{len(c) - 1}") if len(c) > 1 else 0) for c in cells if c] or [0]
            )
            longest = max([len(col.header)] + [len(", ".join(c)) for c in cells])
            natural.append(longest)
            minimum.append(min(longest, max(col.min_width, len(col.header), shortest)))
            continue
        longest = max([len(col.header)] + [len(line) for c in cells for line in c])
        if col.kind == "key" and not wide:
            longest = max(len(col.header), min(longest, KEY_MAX))
        natural.append(longest)
        minimum.append(min(longest, max(col.min_width, len(col.header))) if col.kind == "name" else longest)
    shown = list(range(len(columns)))

    def used(widths: Iterable[int]) -> int:
        widths = list(widths)
        return sum(widths) + len(GAP) * max(0, len(widths) - 1)

    if wide or width is None:
        return Layout([columns[i] for i in shown], [natural[i] for i in shown], [])
    while used(minimum[i] for i in shown) > width:
        droppable = [i for i in shown if columns[i].priority > 0]
        if not droppable:
            break
        shown.remove(max(droppable, key=lambda i: (columns[i].priority, i)))
    for i in sorted(set(range(len(columns))) - set(shown), key=lambda i: (columns[i].priority, i)):
        if used(minimum[j] for j in [*shown, i]) <= width:  # dropped before a wider, more important one went too
            shown = sorted([*shown, i])
    widths = {i: minimum[i] for i in shown}
    spare = width - used(widths.values())
    for i in shown:  # the room left goes to the names, left to right
        if columns[i].kind in ("name", "list") and spare > 0:
            grow = min(spare, natural[i] - widths[i])
            widths[i] += grow
            spare -= grow
    return Layout(
        [columns[i] for i in shown],
        [widths[i] for i in shown],
        [c.header for n, c in enumerate(columns) if n not in shown],
    )


def render(columns: Sequence[Column], rows: Sequence[dict], width: int | None = None, wide: bool = False) -> list[str]:
    """The table as plain lines (header first): at most ``width`` columns unless ``wide``."""
    plan = layout(columns, rows, width, wide)
    lines = [_join([c.header for c in plan.columns], plan)]
    for row in rows:
        cells = []
        for col, w in zip(plan.columns, plan.widths):
            raw = _cell_lines(col, row)
            if col.kind == "name":
                cells.append(_wrap(raw[0], w, col.lines))
            elif col.kind == "list":
                cells.append(_pack(raw, w, col.lines))
            elif col.kind == "key":
                cells.append([_cut(line, w) for line in raw])
            else:
                cells.append(raw)
        for n in range(max(len(c) for c in cells) if cells else 0):
            lines.append(_join([c[n] if n < len(c) else "" for c in cells], plan))
    return lines


def _join(values: list[str], plan: Layout) -> str:
    parts = [v.rjust(w) if col.kind == "num" else v.ljust(w) for v, col, w in zip(values, plan.columns, plan.widths)]
    return GAP.join(parts).rstrip()


def print_table(
    columns: Sequence[Column],
    rows: Sequence[dict],
    output: str = "table",
    title: str | None = None,
    empty: str = "nothing to show",
    width: int | None = None,
) -> None:
    """Render to stdout at the terminal's width (or every column with ``output="wide"``)."""
    if not rows:
        out.print(Text(empty))
        return
    width = width or terminal_width()
    lines = render(columns, rows, width, wide=output == "wide")
    if title:
        for line in textwrap.wrap(title, width, break_long_words=False, break_on_hyphens=False):
            out.print(Text(line, style="bold"), soft_wrap=True)
    out.print(Text(lines[0], style="bold"), soft_wrap=True)
    for line in lines[1:]:
        out.print(Text(line), soft_wrap=True)
    for line in legend(layout(columns, rows, width, wide=output == "wide").columns, width):
        out.print(Text(line, style="dim"), soft_wrap=True)


def legend(shown: Sequence[Column], width: int) -> list[str]:
    """What the shown columns that carry a note mean, one wrapped entry each."""
    return [
        line
        for c in shown
        if c.note
        for line in textwrap.wrap(f"{c.header}: {c.note}", width, subsequent_indent="  ", break_long_words=False)
    ]


class Command(str):
    """A shell command in a labelled value: never wrapped, so that it pastes whole at any width."""


def labelled(fields: list[tuple[str, str | list[str]]], width: int, label_width: int = LABEL) -> list[str]:
    """(label, value or lines) as lines at most ``width`` wide, values wrapped at spaces beside their label
    (`alerts show`, `issues show`, `eval agreement`); a ``Command`` stays whole on its line."""
    lines = []
    for label, value in fields:
        first = label.ljust(label_width)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Command):
                lines.append(first + item)
                first = " " * label_width
                continue
            text = _POINTS.sub("\\1\u00a0pts", " ".join(_plain(item).split()))  # "+4.5 pts" stays on one line
            wrapped = textwrap.wrap(
                text, max(20, width - label_width), break_long_words=False, break_on_hyphens=False
            ) or [""]
            lines += [
                (first if n == 0 else " " * label_width) + part.replace("\u00a0", " ") for n, part in enumerate(wrapped)
            ]
            first = " " * label_width
    return [line.rstrip() for line in lines]


def print_labelled(lines: list[str], label_width: int = LABEL) -> None:
    """``labelled`` lines to stdout, labels in bold."""
    for line in lines:
        label = line[:label_width].rstrip()
        out.print(Text.assemble((label, "bold"), line[len(label) :]), soft_wrap=True)


class _PastableCode(CodeBlock):
    """A code block as it is, never wrapped: a command copied from the terminal pastes whole."""

    def __rich_console__(self, console, options):
        yield Text(str(self.text).rstrip(), no_wrap=True, overflow="ignore")


class TerminalMarkdown(Markdown):
    """Markdown for the terminal: prose wrapped at word boundaries, code blocks unwrapped; backslash escapes
    (runbooks escape untrusted text, runbooks/render.py) show as the plain characters they stand for."""

    elements = {**Markdown.elements, "fence": _PastableCode, "code_block": _PastableCode}


def print_markdown(text: str, width: int) -> None:
    out.print(TerminalMarkdown(text), width=width, crop=False)  # crop=False: code lines run past the width


def paging_options(noun: str, default: int, most: int) -> Callable[[Callable], Callable]:
    """``--limit`` and ``--offset`` of a paged list (its last line names the next page's command)."""

    def wrap(fn: Callable) -> Callable:
        fn = click.option(
            "--offset",
            type=click.IntRange(0, 10_000_000),
            default=0,
            show_default=True,
            help=f"{noun.capitalize()} of the list to skip: the last line names the next page's command.",
        )(fn)
        return click.option(
            "--limit",
            type=click.IntRange(1, most),
            default=default,
            show_default=True,
            help=f"{noun.capitalize()} a page.",
        )(fn)

    return wrap


def output_option(fn: Callable) -> Callable:
    """``-o table|wide|json`` and ``--json`` (the same as ``-o json``); passes ``output`` on."""

    @click.option(
        "-o",
        "--output",
        type=click.Choice(OUTPUTS),
        default="table",
        show_default=True,
        help="table: fits the terminal; wide: every column; json: the API's JSON.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Same as -o json.")
    @functools.wraps(fn)
    def wrapper(*args, output: str, as_json: bool, **kwargs):
        return fn(*args, output="json" if as_json else output, **kwargs)

    return wrapper


# -- cell formats ----------------------------------------------------------------------
def ago(text: str | None, now: datetime) -> str:
    """An RFC 3339 time relative to ``now`` (``45s ago``, ``3m ago``, ``in 2h``), or its date beyond 30 days."""
    if not text:
        return "—"
    try:
        at = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return _plain(text)[:16]
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    seconds = int((now - at).total_seconds())
    if abs(seconds) >= 30 * 86400:
        return at.astimezone(UTC).strftime("%Y-%m-%d")
    size, unit = next(
        ((s, u) for u, s in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)) if abs(seconds) >= s), (1, "s")
    )
    amount = f"{abs(seconds) // size}{unit}"
    return f"in {amount}" if seconds < 0 else f"{amount} ago"


def at(text: str | None, now: datetime, relative: bool = True) -> str:
    """``2026-11-21 08:23 UTC (3h ago)`` (the relative part within 30 days)."""
    if not text:
        return "—"
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return _plain(text)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    rel = ago(text, now)
    shown = relative and (rel.endswith(" ago") or rel.startswith("in "))
    return utc_minute(moment) + (f" ({rel})" if shown else "")
