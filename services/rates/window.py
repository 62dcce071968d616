"""Window names ('30m', '24h', 'all') as lengths of event time. Pure: no store, no clock."""

from __future__ import annotations

import re
from datetime import timedelta

_WINDOW_RE = re.compile(r"(\d+)\s*([smhd])")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW = timedelta(days=366)  # longer windows are refused (use 'all' for everything stored)


class WindowError(ValueError):
    pass


def parse_window(text: str) -> timedelta | None:
    """'30m', '90m', '24h', '7d' or 'all' (None: everything stored)."""
    text = text.strip().lower()
    if text == "all":
        return None
    match = _WINDOW_RE.fullmatch(text)
    if not match or int(match[1]) == 0:
        raise WindowError(f"window {text!r}: use a positive number followed by s, m, h or d (e.g. 30m), or 'all'")
    if int(match[1]) * _SECONDS[match[2]] > MAX_WINDOW.total_seconds():
        raise WindowError(f"window {text!r} is longer than {MAX_WINDOW.days} days; use a shorter one, or 'all'")
    return timedelta(**{_UNIT[match[2]]: int(match[1])})
