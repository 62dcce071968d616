"""Plotly's browser bundle, served from the plotly package itself, under a CSP with no inline styles.

plotly.js injects <style> elements at run time, which a strict ``style-src 'self'``
blocks. It skips that when the page already holds an element with the style's id
(and, for its base rules, the class ``no-inline-styles``). So pages carry such
placeholder elements, and the base rules are served as a stylesheet, extracted
from the same bundle so they always match its version.
"""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

import plotly

BUNDLE = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
BASE_STYLE_ID = "plotly.js-style-global"
_INJECTED_ID = re.compile(
    r'document\.getElementById\("([0-9a-f]{32,64})"\)\)\{var \w+=document\.createElement\("style"\)'
)
_RULES = re.compile(r'=\{("X,X div":.*?)\};for\(')
_RULE = re.compile(r'"((?:[^"\\]|\\.)*)":(?:\'((?:[^\'\\]|\\.)*)\'|"((?:[^"\\]|\\.)*)")')


class PlotlyAssets:
    def __init__(self, bundle: Path = BUNDLE):
        self.bundle = bundle

    @cached_property
    def _source(self) -> str:
        return self.bundle.read_text(encoding="utf-8")

    @cached_property
    def injected_style_ids(self) -> tuple[str, ...]:
        """Ids of the <style> elements the bundle would create when it loads."""
        return tuple(dict.fromkeys(_INJECTED_ID.findall(self._source)))

    @cached_property
    def base_css(self) -> str:
        """The base rules plotly.js adds with insertRule, as a stylesheet (empty if the bundle changed shape)."""
        found = _RULES.search(self._source)
        if not found:
            return ""
        lines = []
        for selector, single, double in _RULE.findall(found.group(1)):
            body = single or double
            if body == "outline:none;":  # keep the dashboard's visible keyboard focus
                continue
            selector = (
                re.sub(r"^,", " ,", selector).replace("X", ".js-plotly-plot .plotly").replace("Y", ".plotly-notifier")
            )
            lines.append(f"{selector}{{{body}}}")
        return "\n".join(lines) + "\n"
