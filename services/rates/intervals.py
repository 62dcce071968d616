"""Rates with honest 95% intervals from the per-minute sums of table rate_minute.

Claims of one answer are correlated, so every interval here resamples answers,
not claims. The hallucination rate is a ratio estimator (failed / claims) over
answers; its cluster-robust (sandwich) variance needs only the sums that the
store keeps per minute: Σf², Σn², Σf·n. That variance becomes a design effect,
and the Wilson interval is taken at the effective number of claims. Coverage is
measured by simulation in tests/unit/rates/test_intervals.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from services.contract.model import FAILED_VERDICT_ORDER
from services.core.stats import Floats, wilson, z_value
from services.store.rates import COUNT_FIELDS, SAMPLING_FIELDS, SUM_FIELDS  # rate_minute's columns, defined once

CHECKED_VERDICTS = ("supported", *FAILED_VERDICT_ORDER)  # the verdicts a claim's rate counts (not trivial)

# The sums the claim-level rate and its interval read (Counts.weighted): weighted, and the unweighted ones they
# equal at w = 1, used where no weights were kept.
WEIGHTED = ("w_claims", "w_failed", "w2_claims", "w2_claims_sq", "w2_failed_sq", "w2_failed_claims")
UNWEIGHTED = ("claims", "failed", "claims", "claims_sq", "failed_sq", "failed_claims")

# Sums the effective (sampled) view replaces: the rate's and the checked verdicts' (Counts.effective)
EFFECTIVE_FIELDS = ("claims", "failed", "claims_sq", "failed_sq", "failed_claims", *CHECKED_VERDICTS)
_AT = {f: i for i, f in enumerate(SUM_FIELDS)}
_INTEGRAL = len(COUNT_FIELDS) + 1  # the counts and `sampled` are whole numbers; the weighted sums are not


def checked_sums(sums: np.ndarray) -> np.ndarray:
    """Rows of SUM_FIELDS sums as the store gives them, refused as ``Counts.from_row`` refuses one."""
    bad_count = (sums[:, :_INTEGRAL] < 0) | (sums[:, :_INTEGRAL] != np.floor(sums[:, :_INTEGRAL]))
    bad_weight = ~(sums[:, _INTEGRAL:] >= 0)  # also NaN
    for bad, what in (
        (bad_count, "count {!r} must be a non-negative whole number, got {}"),
        (bad_weight, "weighted sum {!r} must be a non-negative number, got {}"),
    ):
        if bad.any():
            row, col = np.argwhere(bad)[0]
            col += 0 if bad is bad_count else _INTEGRAL
            raise ValueError(what.format(SUM_FIELDS[col], sums[row, col]))
    return sums


def effective_sums(sums: np.ndarray) -> np.ndarray:
    """Rows of SUM_FIELDS sums -> their COUNT_FIELDS as the drift engines add them up. With sampled answers, the
    rate's sums as an unweighted sample worth as much: every weight scaled by Σw·n / Σw²·n, so claims become Kish's
    effective claims, failed / claims the weighted rate, and the design effect and interval the weighted ones
    (tests/unit/rates/test_sampling_weights.py checks both). The detector's evidence is the sample's, not the
    traffic's. Rows without sampled answers are their counts."""
    out = sums[:, : len(COUNT_FIELDS)].astype(float)
    sampled = sums[:, _AT["sampled"]] > 0
    if not sampled.any():
        return out
    s = sums[sampled]
    weighted = (s[:, _AT["w_events"]] > 0)[:, None]  # else no weights were kept: the unweighted sums, as at w = 1
    w_claims, w_failed, w2_claims, w2_claims_sq, w2_failed_sq, w2_failed_claims = np.where(
        weighted, s[:, [_AT[f] for f in WEIGHTED]], s[:, [_AT[f] for f in UNWEIGHTED]]
    ).T
    k = np.where(w2_claims > 0, w_claims / np.where(w2_claims > 0, w2_claims, 1.0), 0.0)
    scaled = {
        "claims": w_claims * k,
        "failed": w_failed * k,
        "claims_sq": w2_claims_sq * k * k,
        "failed_sq": w2_failed_sq * k * k,
        "failed_claims": w2_failed_claims * k * k,
        **{v: s[:, _AT["w_" + v]] * k for v in CHECKED_VERDICTS},
    }
    rows = np.flatnonzero(sampled)
    for name, values in scaled.items():
        out[rows, COUNT_FIELDS.index(name)] = values
    return out


@dataclass(frozen=True, slots=True)
class Counts:
    """Sums over the answers of a window; the columns of rate_minute, in its order."""

    events: int = 0
    claims: int = 0  # non-trivial claims
    failed: int = 0
    claims_sq: int = 0  # Σ n_i²
    failed_sq: int = 0  # Σ f_i²
    failed_claims: int = 0  # Σ f_i·n_i
    supported: int = 0
    unsupported: int = 0
    contradicted: int = 0
    overreach: int = 0
    stale: int = 0
    no_source: int = 0
    trivial: int = 0
    served: int = 0
    served_unsafe: int = 0
    abstained: int = 0
    answerable: int = 0
    answerable_abstained: int = 0
    unanswerable: int = 0
    unanswerable_abstained: int = 0
    # Sampled verification: each answer weighs w = 1 / its sampling.rate (1 when every answer is verified).
    sampled: int = 0  # answers verified with a sampling.rate below 1
    w_events: float = 0.0  # Σ w
    w2_events: float = 0.0  # Σ w²
    w_claims: float = 0.0  # Σ w·n
    w_failed: float = 0.0  # Σ w·f
    w2_claims: float = 0.0  # Σ w²·n
    w2_claims_sq: float = 0.0  # Σ w²·n²
    w2_failed_sq: float = 0.0  # Σ w²·f²
    w2_failed_claims: float = 0.0  # Σ w²·f·n
    w_served: float = 0.0  # Σ w over the answers of each event-level share
    w_served_unsafe: float = 0.0
    w_abstained: float = 0.0
    w_answerable: float = 0.0
    w_answerable_abstained: float = 0.0
    w_unanswerable: float = 0.0
    w_unanswerable_abstained: float = 0.0
    w_supported: float = 0.0  # Σ w·(claims with each checked verdict)
    w_unsupported: float = 0.0
    w_contradicted: float = 0.0
    w_overreach: float = 0.0
    w_stale: float = 0.0
    w_no_source: float = 0.0

    def __add__(self, other: Counts) -> Counts:
        if not isinstance(other, Counts):
            return NotImplemented
        return Counts(*(getattr(self, f) + getattr(other, f) for f in SUM_FIELDS))

    @classmethod
    def zero(cls) -> Counts:
        return cls()

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Counts:
        """Build from a store row; extra keys (route, minute, dim …) are ignored, missing ones are 0."""
        values = []
        for name in COUNT_FIELDS + ("sampled",):
            value = row.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    raise ValueError(f"count {name!r} must be a whole number, got {value!r}")
            if value < 0:
                raise ValueError(f"count {name!r} must not be negative, got {value}")
            values.append(int(value))
        weighted = []
        for name in SAMPLING_FIELDS[1:]:
            raw = row.get(name, 0.0)
            if not isinstance(raw, (int, float, str, np.number)):
                raise ValueError(f"weighted sum {name!r} must be a non-negative number, got {raw!r}")
            value = float(raw)
            if not value >= 0:  # also NaN
                raise ValueError(f"weighted sum {name!r} must be a non-negative number, got {value!r}")
            weighted.append(value)
        return cls(*values, *weighted)

    @classmethod
    def from_array(cls, values: Iterable[float]) -> Counts:
        """From the drift engines' arrays (``as_array``), rounded to whole counts."""
        return cls(*(int(round(v)) for v in values))

    def as_array(self) -> np.ndarray:
        """The drift engines' view: COUNT_FIELDS, with the rate's sums taken from ``effective``."""
        row: np.ndarray = effective_sums(np.array([[getattr(self, f) for f in SUM_FIELDS]], dtype=float))[0]
        return row

    def effective(self) -> Counts:
        """With sampled answers, the rate's sums as an unweighted sample worth as much (``effective_sums``).
        Unchanged without sampling."""
        if not self.sampled:
            return self
        values = effective_sums(np.array([[getattr(self, f) for f in SUM_FIELDS]], dtype=float))[0]
        # Not whole numbers, though the fields are typed int: the sample's effective size, as slice_sums reads it.
        effective: dict[str, Any] = {f: float(values[COUNT_FIELDS.index(f)]) for f in EFFECTIVE_FIELDS}
        return replace(self, **effective)

    def as_dict(self) -> dict[str, float]:
        return {f: getattr(self, f) for f in SUM_FIELDS}

    @property
    def weighted(self) -> tuple[float, float, float, float, float, float]:
        """(Σw·n, Σw·f, Σw²·n, Σw²·n², Σw²·f², Σw²·f·n): the weighted sums (WEIGHTED), or, where none were kept
        (sums from before weights, or the drift engines' arrays), the unweighted ones (UNWEIGHTED), which they
        equal at w = 1."""
        return tuple(getattr(self, name) for name in (WEIGHTED if self.w_events > 0 else UNWEIGHTED))

    def verdict_share(self, verdict: str) -> float | None:
        """The share of checked claims with ``verdict``, of the whole traffic (weighted where answers were
        sampled; the stored count's share where no weights were kept)."""
        if self.w_events > 0 and self.w_claims > 0:
            share: float = getattr(self, "w_" + verdict) / self.w_claims
            return share
        return getattr(self, verdict) / self.claims if self.claims else None

    def weighted_share(self, part: str, whole: str) -> tuple[float, float, float]:
        """An event-level share of the traffic (e.g. served_unsafe of served): (weighted part, weighted whole, the
        whole's effective answers). The effective size takes the whole route's Kish factor, (Σw)² / (Σw²·answers),
        as if the share's answers were weighted like all of them."""
        count = getattr(self, whole)
        if self.w_events <= 0:
            return float(getattr(self, part)), float(count), float(count)
        kish = self.w_events * self.w_events / (self.w2_events * self.events) if self.w2_events and self.events else 1.0
        return getattr(self, "w_" + part), getattr(self, "w_" + whole), count * kish

    @property
    def rate(self) -> float | None:
        """Claim-level hallucination rate of the whole traffic: weighted failed over weighted claims (each answer
        weighs 1 / its sampling rate); None without non-trivial claims."""
        w_claims, w_failed = self.weighted[:2]
        return w_failed / w_claims if self.claims and w_claims > 0 else None

    @property
    def effective_claims(self) -> float:
        """Kish's effective number of claims, (Σw·n)² / Σw²·n: the claims it is worth as an unweighted sample."""
        w_claims, _, w2_claims = self.weighted[:3]
        return w_claims * w_claims / w2_claims if w2_claims > 0 else 0.0


assert tuple(f.name for f in fields(Counts)) == SUM_FIELDS


@dataclass(frozen=True, slots=True)
class Interval:
    lo: float
    hi: float

    def __contains__(self, value: float) -> bool:
        return self.lo <= value <= self.hi

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def as_list(self) -> list[float]:
        return [self.lo, self.hi]


def design_effect(
    events: float | Floats,
    claims: float | Floats,
    failed: float | Floats,
    claims_sq: float | Floats,
    failed_sq: float | Floats,
    failed_claims: float | Floats,
) -> Floats:
    """Cluster-robust variance of failed/claims over the binomial one, in [1, Σn²/Σn].

    The upper end is the design effect when all claims of an answer share one
    verdict (intra-answer correlation 1); it is also the fallback when the rate
    is 0 or 1 and the data cannot tell how correlated the claims are.
    """
    claims = np.asarray(claims, dtype=np.float64)
    safe_claims = np.maximum(claims, 1.0)
    r = np.asarray(failed, dtype=np.float64) / safe_claims
    m = np.maximum(np.asarray(events, dtype=np.float64), 2.0)
    residual_sq = np.maximum(failed_sq - 2 * r * failed_claims + r * r * claims_sq, 0.0) * m / (m - 1)
    binomial = r * (1 - r) * safe_claims
    ceiling = np.maximum(np.asarray(claims_sq, dtype=np.float64) / safe_claims, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        deff = np.where(binomial > 0, residual_sq / np.where(binomial > 0, binomial, 1.0), ceiling)
    return np.clip(deff, 1.0, ceiling)


def ratio_interval(c: Counts, level: float = 0.95) -> Interval | None:
    """Interval for the (weighted) failed/claims that resamples answers; None when there are no claims.

    Weighted, the sandwich variance takes w² in each sum and the binomial reference Σw²·n, so the Wilson
    interval is at the effective claims, (Σw·n)²/Σw²·n over the design effect; at w = 1 this is exactly the
    unweighted interval."""
    if c.claims <= 0:
        return None
    if c.weighted[0] <= 0:
        return None
    lo, hi = ratio_bounds(c.events, *c.weighted, level=level)
    return Interval(float(lo), float(hi))


def ratio_bounds(
    events: float | Floats,
    w_claims: float | Floats,
    w_failed: float | Floats,
    w2_claims: float | Floats,
    w2_claims_sq: float | Floats,
    w2_failed_sq: float | Floats,
    w2_failed_claims: float | Floats,
    *,
    level: float = 0.95,
) -> tuple[Floats, Floats]:
    """``ratio_interval``'s bounds from the sums it reads (``Counts.weighted``), for one slice or, as arrays, for
    many at once with the very same arithmetic. Every slice given must have claims (w_claims > 0)."""
    # design_effect reads (claims, claims_sq) as the binomial reference and its ceiling: Σw²·n and Σw²·n² here,
    # with the rate itself given through failed = rate x Σw²·n.
    rate = w_failed / w_claims
    deff = design_effect(events, w2_claims, rate * w2_claims, w2_claims_sq, w2_failed_sq, w2_failed_claims)
    effective_claims = w_claims * w_claims / w2_claims  # Counts.effective_claims: w2_claims > 0 when w_claims is
    return wilson(rate, effective_claims / deff, z_value(level))


def share_interval(k: int, c: Counts, level: float = 0.95) -> Interval | None:
    """Interval for k/claims, e.g. one verdict's share, without per-verdict Σ sums.

    It uses the largest possible design effect (Σn²/Σn), so it is conservative.
    """
    if c.claims <= 0:
        return None
    deff = max(c.claims_sq / c.claims, 1.0)
    lo, hi = wilson(k / c.claims, c.claims / deff, z_value(level))
    return Interval(float(lo), float(hi))


def effective_proportion_interval(share: float, effective: float, level: float = 0.95) -> Interval:
    """Wilson interval for a weighted share at its effective sample size (``proportion_interval`` at w = 1)."""
    lo, hi = wilson(share, effective, z_value(level))
    return Interval(float(lo), float(hi))


def proportion_interval(k: int, n: int, level: float = 0.95) -> Interval | None:
    """Wilson interval for an event-level proportion k/n; None when n is 0."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"proportion needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    lo, hi = wilson(k / n, float(n), z_value(level))
    return Interval(float(lo), float(hi))


@dataclass(frozen=True, slots=True)
class Rate:
    name: str
    value: float | None
    interval: Interval | None
    numerator: int
    denominator: int


def rates(c: Counts, level: float = 0.95) -> dict[str, Rate]:
    """Every rate of issue 3 for one window, each with its interval and volume."""
    out = {"hallucination": Rate("hallucination", c.rate, ratio_interval(c, level), c.failed, c.claims)}
    for verdict in FAILED_VERDICT_ORDER:
        k = getattr(c, verdict)
        out[verdict] = Rate(verdict, k / c.claims if c.claims else None, share_interval(k, c, level), k, c.claims)
    for name, k, n in (
        ("unsafe_serve", c.served_unsafe, c.served),
        ("abstention", c.abstained, c.events),
        ("correct_abstention", c.unanswerable_abstained, c.unanswerable),
        ("over_refusal", c.answerable_abstained, c.answerable),
    ):
        out[name] = Rate(name, k / n if n else None, proportion_interval(k, n, level), k, n)
    return out
