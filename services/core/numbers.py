"""How a share is written on every surface (terminal, pages, runbooks): 12.3%, or — when there is none."""
from __future__ import annotations


def pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"
