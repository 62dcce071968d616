"""Rates with intervals, worst first: pure functions over the windowed sums."""
from __future__ import annotations

from services.contract.model import CANONICAL_VERDICTS
from services.rates.intervals import Counts, proportion_interval, ratio_interval


def _share(k: int, n: int) -> dict:
    interval = proportion_interval(k, n) if n else None
    return {
        "rate": k / n if n else None,
        "lo": interval.lo if interval else None,
        "hi": interval.hi if interval else None,
        "count": k,
        "of": n,
    }


def rate_entry(row: dict, key: str = "route") -> dict:
    """One slice's figures. The first six keys are the stable `rates --json` shape."""
    c = Counts.from_row(row)
    interval = ratio_interval(c) if c.claims else None
    entry = {
        key: row[key] if key in row else row.get("value", ""),
        "events": c.events,
        "claims": c.claims,
        "failed": c.failed,
        "rate": c.failed / c.claims if c.claims else None,
        "verdicts": {v: int(row.get(v, 0)) for v in CANONICAL_VERDICTS},
        "interval": [interval.lo, interval.hi] if interval else None,
        "unsafe_serve": _share(c.served_unsafe, c.served),
        "abstention": _share(c.abstained, c.events),
        # Reported together, never one alone.
        "abstention_pair": {
            "correct_abstention": _share(c.unanswerable_abstained, c.unanswerable),
            "over_refusal": _share(c.answerable_abstained, c.answerable),
        },
    }
    return entry


def worst_first(entries: list[dict]) -> list[dict]:
    """Highest rate first; slices with no checkable claims last."""
    return sorted(entries, key=lambda e: (e["rate"] is None, -(e["rate"] or 0.0), -e["claims"]))


def route_rates(rows: list[dict]) -> list[dict]:
    return worst_first([rate_entry(r) for r in rows])


def slice_rates(rows: list[dict], dim: str) -> list[dict]:
    """Rows of one slice dimension across routes, as {dim, value, route, ...}, worst first."""
    out = []
    for row in rows:
        entry = rate_entry(row)
        entry = {"dim": dim, "value": row["value"], **entry}
        out.append(entry)
    return worst_first(out)
