"""Render a runbook (Markdown or HTML) from a RunbookContext, or an alert's from an AlertRunbookContext.

Untrusted text (anything that came from a trace: questions, answers, claims, spans,
issue names, ids) is neutralised in three layers:

1. It only ever reaches Jinja as data, never as template source, in a
   ``SandboxedEnvironment`` with ``StrictUndefined``.
2. Every ``{{ value }}`` goes through ``finalize``, which makes it one clean line
   (control and bidi characters replaced, whitespace collapsed), clips it and
   escapes the Markdown it could form. Only values marked ``Md`` by our own
   filters (shell-quoted arguments, links we build) pass through as they are.
3. HTML is the Markdown converted by markdown-it-py with raw HTML disabled, so
   anything left that looks like a tag is escaped text.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import quote

import jinja2
from jinja2.sandbox import SandboxedEnvironment
from markdown_it import MarkdownIt

from runbooks.context import KINDS, AlertRunbookContext, RunbookContext
from services.core.numbers import interval_text as interval
from services.core.numbers import pct, thousands
from services.core.numbers import utc_minute as when

MAX_VALUE_CHARS = 1000  # backstop for any single value a template forgot to clip
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")
# What would open a block if the value began a line (or a list item): heading, quote, list, rule.
_LINE_START = re.compile(r"^(#{1,6}(?=\s|$)|>|[-+](?=\s|$)|\d{1,9}(?=[.)](?:\s|$))|[-=](?=[-=\s]*$))")
_SPARKS = "▁▂▃▄▅▆▇█"


class RunbookError(RuntimeError):
    """A runbook could not be rendered. The message names the template and what to fix."""


class Md(str):
    """Markdown we built ourselves; ``finalize`` passes it through unescaped."""


def clean(value: object) -> str:
    """One line: control and bidi characters shown as U+FFFD, whitespace runs as one space."""
    text = str(value)
    text = "".join(
        "\ufffd" if (ch in _BIDI or (unicodedata.category(ch) == "Cc" and not ch.isspace())) else ch for ch in text
    )
    return " ".join(text.split())


def clip(value: object, limit: int = 240) -> str:
    """Cut at a word boundary near ``limit`` and say how much was dropped."""
    text = clean(value)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space >= limit * 0.8:  # a word boundary close to the limit; else cut hard (one long token)
        cut = cut[:space]
    return f"{cut.rstrip()} … (+{len(text) - len(cut)} chars)"


def md_escape(value: str) -> str:
    """Escape the characters that could start Markdown or HTML inside one line of text."""
    text = _INLINE_SPECIAL.sub(r"\\\1", value)
    return _LINE_START.sub(lambda m: m[1] + "\\" if m[1][0].isdigit() else "\\" + m[1], text, count=1)


def _finalize(value: object) -> str:
    if isinstance(value, Md):
        return value
    if value is None:
        return "—"
    return md_escape(clip(value, MAX_VALUE_CHARS))


def shell_arg(value: object) -> Md:
    """One shell word for copy-paste; control characters use bash $'...' quoting so it stays on one line."""
    text = str(value)
    if all(ch.isprintable() for ch in text):
        return Md(shlex.quote(text))
    escaped = "".join(
        {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(
            ch, ch if ch.isprintable() else f"\\x{ord(ch) & 0xFF:02x}"
        )
        for ch in text
    )
    return Md(f"$'{escaped}'")


def shell_list(values: Iterable[object]) -> Md:
    return shell_arg(",".join(str(v) for v in values))


def link(label: object, base_url: str, *parts: object) -> Md:
    """A Markdown link to a page of ours; every path part is percent-encoded."""
    base = quote(str(base_url).rstrip("/"), safe=":/?#@!$&'*+,;=%")
    path = "/".join(quote(str(p), safe="") for p in parts)
    return Md(f"[{md_escape(clip(label, 120))}](<{base}/{path}>)")


def num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def spark(counts: Sequence[int]) -> str:
    if not counts:
        return "—"
    top = max(counts) or 1
    return "".join(_SPARKS[min(len(_SPARKS) - 1, int(c / top * (len(_SPARKS) - 1) + 0.5))] for c in counts)


def _packaged_templates() -> Path:
    return Path(__file__).with_name("templates")


class RunbookRenderer:
    """Templates from ``template_dirs`` first, the packaged ones as fallback (override any single file)."""

    def __init__(self, template_dirs: Sequence[Path] = ()):
        self.template_dirs = [Path(d) for d in template_dirs]
        for directory in self.template_dirs:
            if not directory.is_dir():
                raise RunbookError(
                    f"runbook template directory {directory} does not exist; create it or drop the setting"
                )
        loader = jinja2.FileSystemLoader([*self.template_dirs, _packaged_templates()])
        self.env = SandboxedEnvironment(
            loader=loader,
            undefined=jinja2.StrictUndefined,
            finalize=_finalize,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        self.env.filters.update(
            clip=clip, sh=shell_arg, sh_list=shell_list, pct=pct, num=num, when=when, spark=spark, thousands=thousands
        )
        self.env.globals.update(interval=interval, link=link)
        self._markdown = MarkdownIt("commonmark", {"html": False}).enable("table")

    def render(self, ctx: RunbookContext, format: str = "md", kind: str | None = None) -> str:
        """Render the runbook for ``ctx`` (its own kind unless ``kind`` is given)."""
        if format not in ("md", "html"):
            raise RunbookError(f"unknown runbook format {format!r}: use md or html")
        kind = kind or ctx.kind
        if kind not in KINDS:
            raise RunbookError(f"unknown runbook kind {kind!r}: use one of {', '.join(KINDS)}")
        return self._render(format, ctx=ctx, kind=kind)

    def render_alert(self, ctx: AlertRunbookContext, format: str = "md") -> str:
        """Render the runbook of one alert on the monitor's own input (template ``<kind>.md.j2``)."""
        if format not in ("md", "html"):
            raise RunbookError(f"unknown runbook format {format!r}: use md or html")
        if f"{ctx.kind}.md.j2" not in self.env.list_templates():
            raise RunbookError(
                f"alert kind {ctx.kind!r} has no runbook template ({ctx.kind}.md.j2); a drift alert's "
                "runbooks are those of the issues behind it"
            )
        return self._render(format, ctx=ctx, kind=ctx.kind)

    def _render(self, format: str, kind: str, **context) -> str:
        """``kind``'s template with ``context`` (and ``kind``), as Markdown or HTML."""
        name = f"{kind}.md.j2"
        try:
            text = self.env.get_template(name).render(kind=kind, **context)
        except jinja2.TemplateError as exc:
            raise RunbookError(
                f"runbook template {name} failed{_where(exc)}: {exc}. Fix the template "
                f"(or remove the override from {', '.join(map(str, self.template_dirs)) or 'none'})"
            ) from exc
        if format == "md":
            return text
        return f'<article class="runbook runbook-{kind}">\n{self._markdown.render(text)}</article>\n'


def _where(exc: BaseException) -> str:
    """The template file and line an error comes from (Jinja keeps them in the traceback)."""
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return f" at {exc.filename or exc.name}:{exc.lineno}"
    tb, found = exc.__traceback__, ""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.endswith(".j2"):
            found = f" at {filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found
