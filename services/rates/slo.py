"""Service level objectives on hallucinated claims: the error budget and its burn rates (issue 54), as the SRE workbook
defines them, over the same sums as every rate (services/rates/intervals.py: Counts, weighted by ``sampling.rate``).

An SLO promises that at least ``objective`` of its SLI's units are good over a rolling ``window``:

- ``claims``: a non-trivial claim is good when it is supported; bad when failed (the claim-level rate);
- ``served_answers``: a served answer is good when none of its claims failed; bad when unsafe.

The error budget is the bad share the objective allows, ``1 - objective``. Over a span of minutes the **burn
rate** is the bad share over the budget: 1 spends the budget exactly over the SLO's window, 14.4 spends 2% of a
28-day budget in an hour. The budget **spent** over the window is the window's burn rate (the share of the budget
the window's bad units took); what is left is 1 minus that, below 0 once it is overspent. Each figure carries the
bad share's interval (answers resampled, as every rate's), divided by the budget likewise.

A burn window tells nothing until the SLO's traffic covers it (``history``) and it holds ``min_claims`` units: it
then says why instead of giving a number, and no alert rule can fire on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import numpy as np

from services.rates.intervals import Counts, Interval, effective_proportion_interval, ratio_interval
from services.store.rates import COUNT_FIELDS, SUM_FIELDS

SLIS = ("claims", "served_answers")
Sli = Literal["claims", "served_answers"]
# The burn-rate windows of the workbook's multi-window alerts, shortest first: name -> minutes.
BURN_WINDOWS: dict[str, int] = {"5m": 5, "30m": 30, "1h": 60, "6h": 360, "3d": 3 * 24 * 60}
DEFAULT_MIN_CLAIMS = 30  # units a burn window needs before it gives a number


@dataclass(frozen=True)
class Slo:
    name: str
    routes: str  # a shell glob over route names
    objective: float  # the good share promised, e.g. 0.95
    window_minutes: int  # the rolling window the budget is spent over (28 days: 40,320)
    sli: Sli = "claims"
    version_key: str | None = None  # corpus, model or prompt: the SLO counts only traffic of matching versions
    version_pattern: str | None = None  # a shell glob on that version
    description: str = ""

    @property
    def budget(self) -> float:
        """The bad share the objective allows."""
        return 1.0 - self.objective


@dataclass(frozen=True)
class BadShare:
    """The SLI's bad share over a span: the share (weighted), its interval, and the units behind it."""

    share: float | None
    interval: Interval | None
    units: int  # claims (claims SLI) or served answers (served_answers SLI), as stored


def bad_share(counts: Counts, sli: Sli) -> BadShare:
    if sli == "claims":
        return BadShare(counts.rate, ratio_interval(counts), counts.claims)
    bad, whole, effective = counts.weighted_share("served_unsafe", "served")
    if whole <= 0:
        return BadShare(None, None, counts.served)
    share = bad / whole
    return BadShare(share, effective_proportion_interval(share, effective), counts.served)


@dataclass(frozen=True)
class Burn:
    """One burn window at a minute: the burn rate and its interval, or why there is none (``reason``)."""

    window: str
    minutes: int
    rate: float | None
    interval: Interval | None
    units: int
    reason: str = ""  # "" when the window gives a number

    @property
    def known(self) -> bool:
        return self.rate is not None

    def exceeds(self, factor: float) -> bool:
        return self.rate is not None and self.rate > factor


def burn(
    counts: Counts, slo: Slo, window: str, minutes: int, history_minutes: int, min_claims: int = DEFAULT_MIN_CLAIMS
) -> Burn:
    """The burn rate over the last ``minutes`` (``counts``: their sums), given ``history_minutes`` of traffic so far."""
    found = bad_share(counts, slo.sli)
    unit = "claims" if slo.sli == "claims" else "served answers"
    if history_minutes < minutes:
        reason = f"too little history: {_span(history_minutes)} of {window}"
        return Burn(window, minutes, None, None, found.units, reason)
    if found.share is None or found.units < min_claims:
        return Burn(window, minutes, None, None, found.units, f"too few {unit} to tell ({found.units} of {min_claims})")
    interval = found.interval
    scaled = None if interval is None else Interval(interval.lo / slo.budget, interval.hi / slo.budget)
    return Burn(window, minutes, found.share / slo.budget, scaled, found.units)


@dataclass(frozen=True)
class Budget:
    """The error budget over the SLO's window: the share of it spent (and its interval), and what is left."""

    spent: float | None  # 1.0: all of it; above 1: overspent
    spent_interval: Interval | None
    units: int
    bad_share: float | None

    @property
    def remaining(self) -> float | None:
        return None if self.spent is None else 1.0 - self.spent


def budget(counts: Counts, slo: Slo) -> Budget:
    found = bad_share(counts, slo.sli)
    if found.share is None:
        return Budget(None, None, found.units, None)
    interval = found.interval
    scaled = None if interval is None else Interval(interval.lo / slo.budget, interval.hi / slo.budget)
    return Budget(found.share / slo.budget, scaled, found.units, found.share)


MINUTE = timedelta(minutes=1)
_WHOLE = len(COUNT_FIELDS) + 1  # the counts and ``sampled`` are whole numbers; the weighted sums are not


class MinuteSeries:
    """An SLO's traffic a minute at a time, from ``start`` through ``end``: the sums of any span of it in constant
    time (prefix sums), so every burn window of every minute of a pass costs two lookups.

    ``rows``: (minute, the SUM_FIELDS in order). ``first_traffic``: the SLO's first minute with traffic ever, so a
    window is known to be covered only once the traffic reaches back over it."""

    def __init__(
        self, start: datetime, end: datetime, rows: Iterable[tuple[datetime, list[float]]], first_traffic: datetime
    ):
        self.start, self.end, self.first_traffic = start, end, first_traffic
        size = int((end - start) / MINUTE) + 1
        sums = np.zeros((size + 1, len(SUM_FIELDS)))
        for minute, values in rows:
            offset = int((minute - start) / MINUTE)
            if 0 <= offset < size:
                sums[offset + 1] += values
        self.prefix = np.cumsum(sums, axis=0)

    def total(self, minute: datetime, minutes: int) -> Counts:
        """The sums of the ``minutes`` minutes ending with ``minute`` (those before ``start`` count as empty)."""
        last = int((minute - self.start) / MINUTE) + 1
        values = (
            self.prefix[min(max(last, 0), len(self.prefix) - 1)]
            - self.prefix[min(max(last - minutes, 0), len(self.prefix) - 1)]
        )
        return counts_of(values)

    def history(self, minute: datetime) -> int:
        """Minutes of traffic history at ``minute``: from the SLO's first minute with traffic through it."""
        return max(0, int((minute - self.first_traffic) / MINUTE) + 1)

    def burns(self, slo: Slo, minute: datetime, min_claims: int = DEFAULT_MIN_CLAIMS) -> dict[str, Burn]:
        """Every burn window at ``minute``."""
        history = self.history(minute)
        return {
            name: burn(self.total(minute, minutes), slo, name, minutes, history, min_claims)
            for name, minutes in BURN_WINDOWS.items()
        }


def counts_of(sums: Iterable[float]) -> Counts:
    """Counts from the SUM_FIELDS' sums in order (floats, as arrays and the store's lists hold them)."""
    values = list(sums)
    return Counts(*(int(round(v)) for v in values[:_WHOLE]), *(float(v) for v in values[_WHOLE:]))


def _span(minutes: int) -> str:
    if minutes >= 24 * 60 and minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)}d"
    if minutes >= 60:
        return f"{minutes / 60:.1f}h".replace(".0h", "h")
    return f"{minutes}m"
