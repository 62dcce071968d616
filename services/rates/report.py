"""Rates with intervals, worst first: pure functions over the windowed sums."""

from __future__ import annotations

from datetime import timedelta
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from services.contract.model import CANONICAL_VERDICTS
from services.rates.intervals import (
    CHECKED_VERDICTS,
    UNWEIGHTED,
    WEIGHTED,
    Counts,
    effective_proportion_interval,
    ratio_bounds,
    ratio_interval,
)

if TYPE_CHECKING:
    from services.store.rates import RateRepository


def _share(c: Counts, part: str, whole: str) -> dict[str, Any]:
    """An event-level share: its rate weighted (each answer 1 / its sampling.rate), its Wilson interval at the
    effective answers, and the stored counts."""
    k, n = getattr(c, part), getattr(c, whole)
    w_part, w_whole, effective = c.weighted_share(part, whole)
    share = w_part / w_whole if n and w_whole > 0 else None
    interval = effective_proportion_interval(share, effective) if share is not None and effective > 0 else None
    return {
        "rate": share,
        "lo": interval.lo if interval else None,
        "hi": interval.hi if interval else None,
        "count": k,
        "of": n,
    }


def rate_entry(row: dict[str, Any], key: str = "route") -> dict[str, Any]:
    """One slice's figures. The first six keys are the stable `rates --json` shape."""
    c = Counts.from_row(row)
    interval = ratio_interval(c) if c.claims else None
    entry = {
        key: row[key] if key in row else row.get("value", ""),
        "events": c.events,
        "claims": c.claims,
        "failed": c.failed,
        "rate": c.rate,
        "verdicts": {v: int(row.get(v, 0)) for v in CANONICAL_VERDICTS},
        # Of the whole traffic, as ``rate`` is: the stored counts' shares unless answers were sampled.
        "verdict_shares": {v: c.verdict_share(v) for v in CHECKED_VERDICTS},
        "interval": [interval.lo, interval.hi] if interval else None,
        "unsafe_serve": _share(c, "served_unsafe", "served"),
        "abstention": _share(c, "abstained", "events"),
        # Reported together, never one alone.
        "abstention_pair": {
            "correct_abstention": _share(c, "unanswerable_abstained", "unanswerable"),
            "over_refusal": _share(c, "answerable_abstained", "answerable"),
        },
        **sampling_figures(c),
    }
    return entry


def sampling_figures(c: Counts) -> dict[str, Any]:
    """What sampled verification does to a slice's figures: ``rate`` and ``interval`` estimate the whole traffic
    (each answer weighs 1 / its sampling.rate), ``weighted`` gives the totals they stand for, ``effective_claims``
    what the claims are worth as an unweighted sample, and ``sampling`` whether none, some ("mixed") or all of
    the answers were sampled."""
    w_claims, w_failed = c.weighted[:2]
    return {
        "weighted": {"events": c.w_events or float(c.events), "claims": w_claims, "failed": w_failed},
        "effective_claims": round(c.effective_claims, 1),
        "sampling": "none" if not c.sampled else "all" if c.sampled == c.events else "mixed",
        "sampled_events": c.sampled,
    }


# What ``ranking_entries`` reads of each row: the sums of the claim-level rate and its interval.
RANKING_SUMS = tuple(dict.fromkeys(("events", "claims", "w_events", *WEIGHTED, *UNWEIGHTED)))


def ranking_entries(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of each route's row (its RANKING_SUMS at least), what ordering reads: route, claims, rate and interval, as
    ``rate_entry`` gives them, computed for every row at once, so a list can be sorted whole and only its page be
    given every figure."""
    if not rows:
        return []
    table = np.array(list(map(itemgetter(*RANKING_SUMS), rows)), dtype=np.float64).reshape(len(rows), -1)
    column = dict(zip(RANKING_SUMS, table.T))
    weighted_rows = column["w_events"] > 0
    sums = [np.where(weighted_rows, column[w], column[u]) for w, u in zip(WEIGHTED, UNWEIGHTED)]
    rated = (column["claims"] > 0) & (sums[0] > 0)  # Counts.rate and ratio_interval: None otherwise
    kept = [s[rated] for s in sums]
    rate = np.full(len(rows), np.nan)
    lo, hi = rate.copy(), rate.copy()
    if rated.any():
        rate[rated] = kept[1] / kept[0]
        lo[rated], hi[rated] = ratio_bounds(column["events"][rated], *kept)
    return [
        {
            "route": row["route"],
            "claims": int(row["claims"]),
            "rate": r if ok else None,
            "interval": [a, b] if ok else None,
        }
        for row, ok, r, a, b in zip(rows, rated.tolist(), rate.tolist(), lo.tolist(), hi.tolist())
    ]


def worst_first(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Highest rate first; slices with no checkable claims last."""
    return sorted(entries, key=lambda e: (e["rate"] is None, -(e["rate"] or 0.0), -e["claims"]))


def route_rates(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return worst_first([rate_entry(r) for r in rows])


def slice_rates(rows: list[dict[str, Any]], dim: str) -> list[dict[str, Any]]:
    """Rows of one slice dimension across routes, as {dim, value, route, ...}, worst first."""
    out = []
    for row in rows:
        entry = rate_entry(row)
        entry = {"dim": dim, "value": row["value"], **entry}
        out.append(entry)
    return worst_first(out)


# /api/slices answers a bounded amount whatever the store holds: producers choose version keys and values.
FIXED_SLICE_DIMS = ("query_type", "stakes", "mix")  # always valid, even before any event carries them
MAX_SLICE_DIMS = 24  # dimensions in one answer: by default the ones with the most events
MAX_SLICE_VALUES = 50  # values per dimension, worst first


def slice_report(
    rates: RateRepository, window: timedelta | None, dims: list[str] | None = None, values: int = MAX_SLICE_VALUES
) -> dict[str, list[dict[str, Any]]]:
    """Rates by slice, worst first, for ``dims`` (default: the most-used ones), in one pass over the window.
    Raises ValueError naming the bound or the unknown dimensions."""
    if dims:
        dims = list(dict.fromkeys(dims))
        if len(dims) > MAX_SLICE_DIMS:
            raise ValueError(f"{len(dims)} slice dimensions asked for; the limit is {MAX_SLICE_DIMS}")
        unknown = sorted(set(dims) - set(FIXED_SLICE_DIMS) - rates.stored_dims(dims))
        if unknown:
            shown = ", ".join(repr(d[:64]) for d in unknown[:5]) + (
                f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            )
            raise ValueError(f"unknown slice dimension(s) {shown}; GET /api/slices without dim lists the stored ones")
    else:
        dims = rates.dims(MAX_SLICE_DIMS)
    by_dim: dict[str, list[dict[str, Any]]] = {d: [] for d in dims}
    for row in rates.totals_by_dim(dims, window):
        by_dim[row["dim"]].append(row)
    return {d: slice_rates(rows, d)[:values] for d, rows in by_dim.items()}
