"""How shares and counts are written on every surface (terminal, pages, runbooks): 12.3% (— when there is none),
"1 item", "2,000 items"."""
from __future__ import annotations


def pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 item``, ``2,000 items``: a count with its noun, as every surface writes one."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
