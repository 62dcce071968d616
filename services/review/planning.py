"""How many more settled labels bring a route's calibrated interval under a width (`claimwatch review plan`).

The interval's variance (services/review/calibration.py, ``stratified_variance``) is the window's noise in the
flagged share p times λ², plus W_k²·σ_k² / n_k for the verifier's two verdict classes (W_k their shares of the
window, σ_k the spread of their labels, n_k their effective labels; post-stratified on score bands, W_k·σ_k is
the sum of the class's cells' W_g·σ_g, as the sampler splits a class's labels by band the Neyman way). The
fewest labels that bring it to (width / 2z)² are split by Neyman allocation, n_k ∝ W_k·σ_k: in total
n = (2z·Σ W_k σ_k / width)² when no class already has more than its share. The traffic's part does not shrink
with labels: when it alone is wider than asked, no number of labels will do, and the plan says so.

A plan made from the current estimates falls short about half the time (σ is estimated too, and comes out low
as often as high), so each class's failed share is first moved ``caution`` standard errors towards ½, where σ is
largest (bench/calibration.py --plan measures how often the plan lands under the width). New labels are counted one
effective label each, as when every day's sample takes the same share of its strata.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from services.core.readmodel import closed
from services.core.stats import z_value
from services.review.calibration import CalibratedRate
from services.review.estimators import VerdictClass
from services.review.score_strata import ScoreCell

PLAN_CAUTION = 1.5  # standard errors each class's failed share moves towards ½ (bench/calibration.py --plan)


@closed
@dataclass(frozen=True)
class LabelPlan:
    route: str
    width: float | None  # the interval's width now
    target: float
    more: int | None  # settled labels still needed; None when labels alone cannot do it
    flagged: int  # of them, claims the verifier flagged (any non-supported verdict)
    passed: int  # and claims it passed
    labels: int  # the route's own settled labels now
    estimator: str
    note: str = ""  # why there is no count, or what the count assumes


class _PlanBasis(TypedDict):
    route: str
    width: float | None
    target: float
    labels: int
    estimator: str


def neyman(parts: tuple[float, float], have: tuple[float, float], budget: float) -> tuple[float, float]:
    """The fewest labels per verdict class (``parts``: W_k·σ_k; a class's variance is part² / n) whose variances
    sum to at most ``budget``: n_k ∝ W_k·σ_k, except that a class already holding more than that keeps what it
    has and the other takes the rest of the budget."""
    total = sum(parts)
    wanted = [part * total / budget for part in parts]
    for i in (0, 1):
        j = 1 - i
        if wanted[i] < have[i]:
            left = budget - parts[i] ** 2 / have[i]
            wanted[i], wanted[j] = have[i], parts[j] ** 2 / left
            break
    return wanted[0], wanted[1]


def cautious_spread(k: VerdictClass | ScoreCell, caution: float) -> float:
    """σ of the class with its failed share ``caution`` standard errors nearer ½ (Jeffreys-smoothed first, so
    labels that all agree still leave doubt)."""
    n = k.labels
    share = ((k.failed or 0.0) * n + 0.5) / (n + 1)
    step = caution * math.sqrt(share * (1 - share) / (n + 1))
    moved = min(0.5, share + step) if share < 0.5 else max(0.5, share - step)
    return math.sqrt(moved * (1 - moved))


def halves(n: int) -> tuple[int, int]:
    """``n`` labels (none if negative) split between the flagged and the passed class, the odd one passed."""
    n = max(0, n)
    return n // 2, n - n // 2


class LabelPlanner:
    def __init__(self, estimator: str, min_labels: int, confidence: float = 0.95, caution: float = PLAN_CAUTION):
        self.estimator = estimator
        self.min_labels = min_labels
        self.confidence = confidence
        self.caution = caution

    def plan_all(self, rates: Iterable[CalibratedRate], width: float) -> list[LabelPlan]:
        """Every route's plan, those needing the most labels first (None: labels cannot do it, first of all)."""
        plans = [self.plan(rate, width) for rate in rates]
        return sorted(plans, key=lambda p: (p.more is not None, -(p.more or 0), p.route))

    def needs(self, plans: Iterable[LabelPlan]) -> dict[tuple[str, bool], int]:
        """What the daily sampler asks of each (route, flagged) class: the plan's split; for a route no number of
        labels brings under the width, what it lacks of min_labels, so that it stands alone (else it would never
        be sampled and stay pooled)."""
        out = {}
        for p in plans:
            split = (p.flagged, p.passed) if p.more is not None else halves(self.min_labels - p.labels)
            out[(p.route, True)], out[(p.route, False)] = split
        return out

    def plan(self, rate: CalibratedRate, width: float) -> LabelPlan:
        now = rate.interval[1] - rate.interval[0] if rate.interval else None
        own = rate.own_labels
        common: _PlanBasis = dict(route=rate.route, width=now, target=width, labels=own, estimator=self.estimator)
        flagged, passed = rate.flagged, rate.passed
        if rate.raw is None or rate.raw_variance is None or flagged is None or passed is None:
            return LabelPlan(more=None, flagged=0, passed=0, note="no checkable claims in the window", **common)
        # Labels of other routes or versions tell what the route's classes look like, but will not count.
        have = (flagged.labels, passed.labels) if own == rate.labels else (0.0, 0.0)
        slope = rate.slope(self.estimator)
        slope = 1.0 if slope is None else slope  # unknown shares: p's noise at most whole (λ = a - b <= 1)
        z = z_value(self.confidence)
        budget = (width / (2 * z)) ** 2 - slope**2 * rate.raw_variance
        floor = 2 * z * abs(slope) * math.sqrt(rate.raw_variance)  # the width with labels beyond count
        if budget <= 0:
            return LabelPlan(
                more=None, flagged=0, passed=0, note=f"window alone: {100 * floor:.1f} pts; widen it", **common
            )
        parts = (
            flagged.share * cautious_spread(flagged, self.caution),
            passed.share * cautious_spread(passed, self.caution),
        )
        if rate.score_cells:  # post-stratified: each class's part is its cells' (labels split by band inside it)
            cells = rate.score_cells
            part = [sum(c.share * cautious_spread(c, self.caution) for c in cells if c.flagged == f) for f in (1, 0)]
            parts = (part[0], part[1])
            if own == rate.labels:
                held = [sum(c.labels for c in cells if c.flagged == f) for f in (1, 0)]
                have = (held[0], held[1])
        targets = neyman(parts, have, budget)
        more = [math.ceil(max(0.0, t - n)) for t, n in zip(targets, have)]
        # The route stands alone only from min_labels on.
        more = [m + extra for m, extra in zip(more, halves(self.min_labels - own - sum(more)))]
        note = (
            "no labels yet: planned as coin tosses"
            if not rate.labels
            else ""
            if own == rate.labels
            else "own count from 0 (labels pooled)"
        )
        if floor > width / 2:  # most of the width is the window's own noise: labels buy little of the rest
            note = "; ".join(filter(None, [note, f"window alone: {100 * floor:.1f} pts; a longer one needs fewer"]))
        return LabelPlan(more=sum(more), flagged=more[0], passed=more[1], note=note, **common)
