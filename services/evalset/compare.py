"""Two eval runs compared item by item (issue 53): the paired difference in each metric the report has, with a
paired bootstrap interval, and the gate's check that a candidate is not credibly worse than its baseline.

Pairs are the approved items both runs answered. Each metric is the report's own figure (services/evalset/
metrics.py) over the items it can count on BOTH sides: faithfulness (supported / checkable claims, pooled over
items) over the items where both runs made checkable claims; correct abstention over the unanswerable items; over-
refusal over the answerable ones. The interval resamples ITEMS, the same items for both runs in each resample, so
what the two runs share (an item's difficulty) cancels out of the difference, which is why a paired interval is
narrower than two separate ones. Plain numpy, no I/O: the service loads the outcomes and names the runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from services.core.numbers import change_interval_text, pct, plural, pts
from services.core.readmodel import closed
from services.core.stats import percentile_interval
from services.evalset.metrics import (
    MIN_INTERVAL_ITEMS,
    SLICE_DIMS,
    Figure,
    GateFailure,
    ItemOutcome,
    _resampled_sums,
    _rng,
    claim_counts,
    interval_note,
)

FAITHFULNESS, CORRECT_ABSTENTION, OVER_REFUSAL = "faithfulness", "correct abstention", "over-refusal"


@closed
@dataclass(frozen=True)
class EvalRun:
    """One run of the eval set, as a matcher found it."""

    run_id: str
    versions: dict[str, str]  # what it answered with (empty for the origin run: production's mixed versions)
    results: int  # items it answered (approved or not)
    produced_at: datetime  # its newest result
    label: str  # ``r-77 (model=gen-2026-11)``: the run and what it answered with, as every surface names it
    matcher: str = ""  # what it was asked for: a run id, or KEY=VALUE,... version matchers
    matched: int = 1  # runs the matcher matched; the newest is the one compared

    @classmethod
    def of(
        cls,
        run_id: str,
        versions: dict[str, str],
        results: int,
        produced_at: datetime,
        matcher: str = "",
        matched: int = 1,
    ) -> EvalRun:
        shown = ",".join(f"{k}={v}" for k, v in sorted(versions.items()))
        label = f"{run_id} ({shown})" if shown else run_id
        return cls(run_id, versions, results, produced_at, label, matcher, matched)


@closed
@dataclass(frozen=True)
class PairedFigure:
    """A metric on both runs over the same items, and candidate minus baseline with its paired interval."""

    metric: str
    where: str  # "all", "answerable", "unanswerable" or a slice such as "stakes=high"
    higher_is_better: bool
    pairs: int  # items behind the comparison: both runs answered them and each counts them for the metric
    baseline: Figure
    candidate: Figure
    difference: float | None  # candidate minus baseline; None with no pairs
    lo: float | None
    hi: float | None
    excludes_zero: bool  # the interval lies wholly above or wholly below 0: a credible difference
    reading: str  # candidate better, candidate worse, no credible difference, too few items, or no pairs
    note: str = ""  # why no interval is shown (too few pairs, or every resample agreed)

    @property
    def has_interval(self) -> bool:
        return not self.note and self.lo is not None and self.hi is not None

    @property
    def settled(self) -> bool:
        """Enough pairs for the interval to say something. Every resample agreeing (each item changed alike) is
        settled: its interval is the one value, and shown as a note."""
        return self.pairs >= MIN_INTERVAL_ITEMS and self.lo is not None and self.hi is not None


def _reading(figure: PairedFigure) -> str:
    if figure.difference is None:
        return "no pairs"
    if not figure.settled:
        return "too few items"
    if not figure.excludes_zero:
        return "no credible difference"
    gained = (figure.lo or 0.0) > 0
    return "candidate better" if gained == figure.higher_is_better else "candidate worse"


@closed
@dataclass(frozen=True)
class PairedMetrics:
    items: int  # approved items both runs answered
    baseline_only: int  # approved items only the baseline answered (left out)
    candidate_only: int
    confidence: float
    metrics: tuple[PairedFigure, ...]  # faithfulness, correct abstention, over-refusal
    slices: tuple[PairedFigure, ...] = ()  # faithfulness by slice, the candidate's largest loss first


@closed
@dataclass(frozen=True)
class RunComparison:
    """What `claimwatch eval compare` and GET /api/eval/compare answer."""

    baseline: EvalRun
    candidate: EvalRun
    items: int
    baseline_only: int
    candidate_only: int
    confidence: float
    metrics: tuple[PairedFigure, ...]
    slices: tuple[PairedFigure, ...] = ()

    @classmethod
    def of(cls, baseline: EvalRun, candidate: EvalRun, paired: PairedMetrics) -> RunComparison:
        return cls(
            baseline,
            candidate,
            paired.items,
            paired.baseline_only,
            paired.candidate_only,
            paired.confidence,
            paired.metrics,
            paired.slices,
        )

    def metric(self, name: str) -> PairedFigure:
        return next(m for m in self.metrics if m.metric == name)


class PairedComparison:
    """The paired bootstrap of two runs on the same items; seeded, each figure from its own stream (as the
    report's figures are), so adding a slice never moves another figure's interval."""

    def __init__(self, n_boot: int = 2000, seed: int = 0, confidence: float = 0.95):
        self.n_boot, self.seed, self.confidence = n_boot, seed, confidence

    def ratio_difference(
        self,
        metric: str,
        where: str,
        baseline: tuple[np.ndarray, np.ndarray],
        candidate: tuple[np.ndarray, np.ndarray],
        higher_is_better: bool = True,
    ) -> PairedFigure:
        """sum(num)/sum(den) on each side over the same items (row i of all four arrays is item i), and candidate
        minus baseline; every resample draws the same items for both sides."""
        rows = np.column_stack([*baseline, *candidate]).astype(np.float64).reshape(-1, 4)
        n = len(rows)
        if n == 0:
            empty = Figure(None, None, None, 0)
            return PairedFigure(metric, where, higher_is_better, 0, empty, empty, None, None, None, False, "no pairs")
        boots: list[list[np.ndarray]] = [[], [], []]
        with np.errstate(invalid="ignore", divide="ignore"):
            for sums in _resampled_sums(_rng(self.seed, f"compare:{metric}:{where}"), rows, self.n_boot):
                b, c = sums[:, 0] / sums[:, 1], sums[:, 2] / sums[:, 3]
                boots[0].append(b)
                boots[1].append(c)
                boots[2].append(c - b)
        totals = rows.sum(axis=0)
        sides = []
        for k, samples in enumerate(boots[:2]):
            num, den = float(totals[2 * k]), float(totals[2 * k + 1])
            lo, hi = percentile_interval(np.concatenate(samples), self.confidence)
            value = num / den if den else None
            sides.append(Figure(value, lo, hi, n, int(num), int(den), interval_note(n, lo, hi)))
        b_fig, c_fig = sides
        difference = None if b_fig.value is None or c_fig.value is None else c_fig.value - b_fig.value
        lo, hi = percentile_interval(np.concatenate(boots[2]), self.confidence)
        credible = n >= MIN_INTERVAL_ITEMS and lo is not None and hi is not None and (lo > 0 or hi < 0)
        found = PairedFigure(
            metric, where, higher_is_better, n, b_fig, c_fig, difference, lo, hi, credible, "", interval_note(n, lo, hi)
        )
        return replace(found, reading=_reading(found))

    def compare(
        self, baseline: Sequence[ItemOutcome], candidate: Sequence[ItemOutcome], dims: Sequence[str] = SLICE_DIMS
    ) -> PairedMetrics:
        """Faithfulness, the abstention pair and faithfulness by slice over the items both runs answered."""
        by_item = {o.item_id: o for o in candidate}
        ids = [o.item_id for o in baseline if o.item_id in by_item]
        shared = set(ids)
        base = [o for o in baseline if o.item_id in shared]
        cand = [by_item[i] for i in ids]
        metrics = (
            self._faithfulness(base, cand, "all"),
            self._abstention(base, cand, CORRECT_ABSTENTION, "unanswerable", answerable=False),
            self._abstention(base, cand, OVER_REFUSAL, "answerable", answerable=True),
        )
        slices = []
        for dim in dims:
            for value in sorted({getattr(o, dim) or "unknown" for o in base}):
                keep = [i for i, o in enumerate(base) if (getattr(o, dim) or "unknown") == value]
                where = f"{dim}={value}"
                slices.append(self._faithfulness([base[i] for i in keep], [cand[i] for i in keep], where))
        slices = [s for s in slices if s.pairs]
        slices.sort(key=lambda s: (s.difference is None, s.difference or 0.0, -s.pairs, s.where))
        return PairedMetrics(
            len(ids),
            len(baseline) - len(ids),
            len(by_item) - len(shared),
            self.confidence,
            metrics,
            tuple(slices),
        )

    def _faithfulness(self, base: Sequence[ItemOutcome], cand: Sequence[ItemOutcome], where: str) -> PairedFigure:
        (bs, bk), (cs, ck) = claim_counts(base), claim_counts(cand)
        keep = (bk > 0) & (ck > 0)  # both runs made checkable claims on the item
        return self.ratio_difference(FAITHFULNESS, where, (bs[keep], bk[keep]), (cs[keep], ck[keep]))

    def _abstention(
        self, base: Sequence[ItemOutcome], cand: Sequence[ItemOutcome], metric: str, where: str, answerable: bool
    ) -> PairedFigure:
        keep = [i for i, o in enumerate(base) if o.answerable is answerable]
        abstained_b = np.array([base[i].abstained for i in keep], dtype=float)
        abstained_c = np.array([cand[i].abstained for i in keep], dtype=float)
        ones = np.ones(len(keep))
        return self.ratio_difference(
            metric, where, (abstained_b, ones), (abstained_c, ones), higher_is_better=not answerable
        )


def difference_text(m: PairedFigure, baseline: EvalRun, candidate: EvalRun) -> str:
    """``faithfulness on all is 88.1% for r-2 (model=gen-2026-11) against 92.3% for r-1 (model=gen-2026-10):
    -4.2 pts (95% CI -6.1 to -2.3 pts, 84 items)``."""
    if m.difference is None:
        return f"{m.metric} on {m.where}: no approved item both runs answered counts for it"
    spread = f"95% CI {change_interval_text(m.lo, m.hi)}, " if m.has_interval else f"{m.note}; "
    return (
        f"{m.metric} on {m.where} is {pct(m.candidate.value)} for {candidate.label} against "
        f"{pct(m.baseline.value)} for {baseline.label}: {pts(m.difference)} ({spread}{plural(m.pairs, 'item')})"
    )


def regression_check(
    comparison: RunComparison, tolerance: float, min_items: int = 0
) -> tuple[list[GateFailure], list[str]]:
    """The gate on a comparison: each metric fails when the candidate is credibly worse by more than ``tolerance``
    (its whole interval lies beyond it: faithfulness and correct abstention below -tolerance, over-refusal above
    +tolerance). Faithfulness must rest on ``min_items`` pairs (no evidence is not a pass); a metric with no pairs
    or no interval cannot show a regression and is said so among the checks."""
    failures: list[GateFailure] = []
    checked: list[str] = []
    b, c = comparison.baseline, comparison.candidate
    for m in comparison.metrics:
        text = difference_text(m, b, c)
        bound = -tolerance if m.higher_is_better else tolerance
        if m.metric == FAITHFULNESS and m.pairs < max(min_items, 1):
            why = (
                "no evidence is not a pass"
                if not m.pairs
                else f"fewer than eval.min_items ({min_items}) items: too few to gate on"
            )
            failures.append(
                GateFailure(m.where, f"{m.metric} against the baseline", m.difference, bound, f"{text}; {why}")
            )
        elif m.lo is None or m.hi is None or not m.settled:
            checked.append(f"{text}; not gated: too few items to show a regression")
        elif (m.hi < bound) if m.higher_is_better else (m.lo > bound):
            side = "below" if m.higher_is_better else "above"
            failures.append(
                GateFailure(
                    m.where,
                    f"{m.metric} against the baseline",
                    m.difference,
                    bound,
                    f"{text}: credibly worse, the whole interval {side} {pts(bound)} (eval.compare_tolerance)",
                )
            )
        else:
            checked.append(f"{text}: not credibly worse than {pts(bound)} (eval.compare_tolerance)")
    return failures, checked


def parse_matcher(text: str, name: str) -> tuple[str, dict[str, str]]:
    """A run id, or ``KEY=VALUE[,KEY=VALUE...]`` version matchers: (run id, {}) or ("", versions)."""
    text = text.strip()
    if not text:
        raise ValueError(f"{name}: give a run id or version matchers, e.g. model=gen-2026-11")
    if "=" not in text:
        return text, {}
    versions: dict[str, str] = {}
    for part in text.split(","):
        key, _, value = (s.strip() for s in part.partition("="))
        if not key or not value or "=" not in part:
            raise ValueError(
                f"{name}: {part.strip()!r} is not KEY=VALUE; write e.g. model=gen-2026-11 "
                "(several: model=gen-2026-11,prompt=p7), or a run id"
            )
        if versions.get(key, value) != value:
            raise ValueError(f"{name}: {key} is given twice ({versions[key]} and {value}); keep one")
        versions[key] = value
    return "", versions
