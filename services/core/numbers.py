"""How figures are written on every surface (terminal, pages, runbooks, notifications): shares ``12.3%`` (— when
there is none), changes ``+2.3 pts``, intervals ``8.1%–10.2%``, times ``2026-12-05 02:27 UTC``, counts "1 item",
"2,000 items". Each is defined here once; JSON carries the numbers and ISO 8601 times."""

from __future__ import annotations

from datetime import UTC, datetime

MISSING = "—"


def pct(value: float | None, digits: int = 1) -> str:
    return MISSING if value is None else f"{100 * value:.{digits}f}%"


def pts(value: float | None, missing: str = MISSING) -> str:
    """A change of a share, in points and signed: ``+2.3 pts``, ``-0.4 pts``; one that rounds to nothing is
    ``+0.0 pts``, never ``-0.0``."""
    return missing if value is None else f"{round(100 * value, 1) + 0.0:+.1f} pts"


def interval_text(lo: float | None, hi: float | None) -> str:
    """A 95% interval of a share: ``8.1%–10.2%``."""
    return MISSING if lo is None or hi is None else f"{pct(lo)}–{pct(hi)}"


def change_interval_text(lo: float | None, hi: float | None) -> str:
    """A 95% interval of a change of a share, in signed points: ``-6.1 to -2.3 pts``."""
    return MISSING if lo is None or hi is None else f"{pts(lo)[:-4]} to {pts(hi)}"


def utc_minute(value: str | datetime | None) -> str:
    """A moment as ``2026-12-05 02:27 UTC`` (naive means UTC; an ISO 8601 text is read first)."""
    if not value:
        return MISSING
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00")) if isinstance(value, str) else value
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def thousands(value: int | float | None) -> str:
    """A count with thousands separators: ``1,234``."""
    return MISSING if value is None else f"{value:,.0f}"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 item``, ``2,000 items``: a count with its noun, as every surface writes one."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
