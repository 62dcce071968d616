"""Suspect changes: which ``versions`` values moved in share around a rise's onset.

Input is the rate_minute rows of one route summed over a window before the
onset and a window after it, one (dim, value, Counts) per version value, e.g.
("version.model", "gen-2026-11", Counts(...)). Only the marginals are known
(no model × corpus joint), so the ranking reasons with them:

- a value that gained share next to other values of its dim is judged by the
  contrast with them, in the same minutes: its gain in claim share × (its rate −
  the rest's rate). Time-wide changes cancel out of that contrast;
- a value that covers all the after-window traffic (a full switchover) cannot be
  contrasted; it gets the route's rise minus what the within-window contrasts
  of other dims already explain.

"system" changes (model, prompt, retriever, verifier) and "evidence" changes
(corpus) are labelled, so an alert can say which kind moved.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from services.rates.intervals import Counts, Interval, ratio_interval
from services.store.rates import SUM_FIELDS

SYSTEM_KEYS = frozenset({"model", "prompt", "retriever", "verifier"})
EVIDENCE_KEYS = frozenset({"corpus"})
Aggregates = Mapping[tuple[str, str], Counts] | Iterable[tuple[str, str, Counts]]


@dataclass(frozen=True)
class Suspect:
    dim: str
    key: str
    value: str
    kind: str  # "system", "evidence" or "other"
    share_before: float  # of the route's answers carrying this versions key
    share_after: float
    rate_before: float | None
    rate_before_interval: Interval | None
    rate_after: float | None
    rate_after_interval: Interval | None
    claims_before: int
    claims_after: int
    explained: float  # points of the after-window rate this value accounts for

    @property
    def share_change(self) -> float:
        return self.share_after - self.share_before

    def as_dict(self) -> dict[str, Any]:
        def interval(i: Interval | None) -> list[float] | None:
            return None if i is None else [round(i.lo, 6), round(i.hi, 6)]

        return {
            "dim": self.dim,
            "key": self.key,
            "value": self.value,
            "kind": self.kind,
            "share_before": round(self.share_before, 6),
            "share_after": round(self.share_after, 6),
            "rate_before": self.rate_before,
            "rate_before_interval": interval(self.rate_before_interval),
            "rate_after": self.rate_after,
            "rate_after_interval": interval(self.rate_after_interval),
            "claims_before": self.claims_before,
            "claims_after": self.claims_after,
            "explained": round(self.explained, 6),
        }


def kind_of(key: str) -> str:
    return "system" if key in SYSTEM_KEYS else "evidence" if key in EVIDENCE_KEYS else "other"


def _by_dim(aggregates: Aggregates) -> dict[str, dict[str, Counts]]:
    rows = aggregates.items() if isinstance(aggregates, Mapping) else (((d, v), c) for d, v, c in aggregates)
    out: dict[str, dict[str, Counts]] = defaultdict(dict)
    for (dim, value), counts in rows:
        if not isinstance(counts, Counts):
            raise TypeError(f"aggregate for {dim}={value} must be a Counts, got {type(counts).__name__}")
        out[dim][value] = out[dim].get(value, Counts.zero()) + counts
    return out


def _route_total(by_dim: dict[str, dict[str, Counts]], prefix: str) -> Counts:
    """The whole route: the dim '' row when given, else the version dim that saw the most answers."""
    if "" in by_dim:
        return _total(by_dim[""].values())
    totals = [_total(v.values()) for d, v in by_dim.items() if d.startswith(prefix)]
    return max(totals, key=lambda c: c.events, default=Counts.zero())


def _total(values: Iterable[Counts]) -> Counts:
    total = Counts.zero()
    for c in values:
        total += c
    return total


def _minus(total: Counts, part: Counts) -> Counts:
    return Counts(*(getattr(total, f) - getattr(part, f) for f in SUM_FIELDS))  # as Counts.__add__ adds


def _mix_shift(b: Counts, a: Counts, b_total: Counts, a_total: Counts, min_claims: int) -> float | None:
    """How much the value's gain in claim share moved the route's rate: Δshare × (its rate − the rest's).

    The contrast is taken in the after window (same minutes, so time-wide changes
    cancel). A value that lost share is credited nothing: the values that took its
    place carry the change. None when a grown value has nothing to be compared
    with (a full switchover).
    """
    gain = (a.claims / a_total.claims if a_total.claims else 0.0) - (
        b.claims / b_total.claims if b_total.claims else 0.0
    )
    if gain <= 0 or not a.claims:
        return 0.0
    rest = _minus(a_total, a)
    if rest.claims < min_claims or a.rate is None or rest.rate is None:
        return None
    return gain * (a.rate - rest.rate)


def suspect_changes(
    before: Aggregates,
    after: Aggregates,
    min_share_change: float = 0.05,
    min_claims: int = 50,
    level: float = 0.95,
    prefix: str = "version.",
    limit: int = 10,
) -> list[Suspect]:
    """Version values whose traffic share moved by at least min_share_change, most explanatory first.

    Pass the rows of dim '' (the whole route) too when you have them; without
    them the route total is taken from the version dim with the most answers.
    """
    if not 0 <= min_share_change < 1:
        raise ValueError(f"min_share_change must be in [0, 1), got {min_share_change!r}")
    old, new = _by_dim(before), _by_dim(after)
    route_before, route_after = _route_total(old, prefix), _route_total(new, prefix)
    old = {d: v for d, v in old.items() if d.startswith(prefix)}
    new = {d: v for d, v in new.items() if d.startswith(prefix)}
    rise = (route_after.rate or 0.0) - (route_before.rate or 0.0)

    candidates = []
    contrast_explained: defaultdict[str, float] = defaultdict(float)
    for dim in sorted(set(old) | set(new)):
        b_vals, a_vals = old.get(dim, {}), new.get(dim, {})
        b_total, a_total = _total(b_vals.values()), _total(a_vals.values())
        for value in sorted(set(b_vals) | set(a_vals)):
            b, a = b_vals.get(value, Counts.zero()), a_vals.get(value, Counts.zero())
            share_b = b.events / b_total.events if b_total.events else 0.0
            share_a = a.events / a_total.events if a_total.events else 0.0
            if abs(share_a - share_b) < min_share_change:
                continue
            explained = _mix_shift(b, a, b_total, a_total, min_claims)
            if explained is not None:
                contrast_explained[dim] = max(contrast_explained[dim], explained)
            candidates.append((dim, value, b, a, share_b, share_a, explained))

    suspects = []
    for dim, value, b, a, share_b, share_a, explained in candidates:
        if explained is None:  # full switchover: the rise that no other dim's contrast explains
            others = max((v for d, v in contrast_explained.items() if d != dim), default=0.0)
            explained = max(rise - others, 0.0)
        key = dim[len(prefix) :]
        suspects.append(
            Suspect(
                dim,
                key,
                value,
                kind_of(key),
                share_b,
                share_a,
                b.rate,
                ratio_interval(b, level),
                a.rate,
                ratio_interval(a, level),
                b.claims,
                a.claims,
                explained,
            )
        )
    # On a tie (a full switchover that explains nothing beyond the other dims), the value that took the traffic
    # comes before the one it replaced: the new version is the change, the old one only left.
    suspects.sort(key=lambda s: (-s.explained, s.share_change <= 0, -abs(s.share_change), s.dim, s.value))
    return suspects[:limit]
