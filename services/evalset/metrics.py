"""Eval-set metrics in plain numpy: faithfulness by slice, the abstention pair, label agreement, the CI gate.

Every figure carries a 95% percentile-bootstrap interval that resamples ITEMS (the
claims of one answer are correlated, so resampling claims would be too narrow).
Each figure draws from its own seeded stream (seed + the figure's name), so
adding a slice never moves another slice's interval.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from services.contract.model import VERDICT_ALIASES, canonical_verdict
from services.core.numbers import plural
from services.core.readmodel import closed
from services.core.stats import percentile_interval

SLICE_DIMS = ("query_type", "stakes")
MIN_INTERVAL_ITEMS = 10  # below this many items a bootstrap interval means little (n=1: zero width)
_CELLS_PER_CHUNK = 4_000_000  # bounds each chunk of resampling weights to ~32 MB


@dataclass(frozen=True)
class ItemOutcome:
    """One eval item as one run answered it, labelled by one labeler."""

    item_id: str
    query_type: str
    stakes: str
    answerable: bool | None
    abstained: bool
    verdicts: tuple[str, ...]


@dataclass(frozen=True)
class Figure:
    value: float | None  # None when nothing is in the denominator
    lo: float | None
    hi: float | None
    items: int  # volume: items behind the figure
    numerator: int = 0
    denominator: int = 0
    note: str = ""  # set when the interval is not to be shown, and why ("n=1: too few ...")

    @property
    def has_interval(self) -> bool:
        return not self.note and self.lo is not None and self.hi is not None


def interval_note(items: int, lo: float | None, hi: float | None) -> str:
    """Why an interval is not shown: too few items, or every resample gave the same value."""
    if items < MIN_INTERVAL_ITEMS:
        return f"n={items}: too few for an interval"
    if lo is not None and hi is not None and hi - lo <= 0:
        return f"n={items}: every resample agrees, so the bootstrap gives no interval"
    return ""


@dataclass(frozen=True)
class SliceFigure:
    dim: str
    value: str
    faithfulness: Figure

    @property
    def name(self) -> str:
        return f"{self.dim}={self.value}"


@dataclass(frozen=True)
class AbstentionPair:
    """Reported together, never one alone: abstaining more raises both."""

    correct_abstention: Figure  # abstained / unanswerable
    over_refusal: Figure  # abstained / answerable


@dataclass(frozen=True)
class DisagreementSlice:
    dim: str
    value: str
    pairs: int
    disagreement: float
    kappa: float | None  # None where undefined (every pair in the slice the same label on one side)
    top_confusion: tuple[str, str, int] | None  # (verifier said, human said, count)

    @property
    def name(self) -> str:
        return f"{self.dim}={self.value}"


@dataclass(frozen=True)
class LabelPair:
    """A verifier label and a human label on the same claim."""

    item_id: str
    claim_idx: int
    verifier: str
    human: str
    query_type: str = ""
    stakes: str = ""
    claim_type: str = ""


@dataclass(frozen=True)
class Agreement:
    kappa: Figure
    observed: Figure  # share of claims where both labels match
    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]  # rows: verifier, columns: human
    slices: tuple[DisagreementSlice, ...]  # most disagreement first


@dataclass(frozen=True)
class EvalReport:
    faithfulness: Figure
    slices: tuple[SliceFigure, ...]  # worst first
    abstention: AbstentionPair
    items: int
    agreement: Agreement | None = None  # shown beside every automated rate

    def slice(self, name: str) -> SliceFigure | None:
        return next((s for s in self.slices if s.name == name), None)


@dataclass(frozen=True)
class GateFailure:
    slice: str
    metric: str
    value: float | None
    threshold: float
    message: str


@dataclass(frozen=True)
class GateResult:
    passed: bool
    failures: tuple[GateFailure, ...]
    checked: tuple[str, ...] = ()  # each threshold met, with its figure's interval and items (what a pass rests on)


def canonical(verdict: str, where: str = "") -> str:
    """``canonical_verdict`` with a message that names where the verdict came from and the verdicts to use."""
    try:
        return canonical_verdict(str(verdict))
    except ValueError:
        raise ValueError(
            f"{where}unknown verdict {verdict!r}; use one of {sorted(set(VERDICT_ALIASES.values()))}"
        ) from None


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _resampled_sums(rng: np.random.Generator, rows: np.ndarray, n_boot: int) -> Iterator[np.ndarray]:
    """Column sums of ``rows`` (one row per item) over bootstrap resamples of the items, in chunks (b, d).

    Resampling n items with replacement only matters through how often each distinct row
    is drawn, so draw a multinomial over the distinct rows: same distribution, far fewer draws.
    """
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    n = len(rows)
    chunk = max(1, _CELLS_PER_CHUNK // max(len(distinct), 1))
    for start in range(0, n_boot, chunk):
        weights = rng.multinomial(n, counts / n, size=min(chunk, n_boot - start)).astype(np.float64)
        yield weights @ distinct


def ratio_figures(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]],
    name: str,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[Figure]:
    """sum(num)/sum(den) for each (num, den) pair of per-item arrays, all from the same item resamples."""
    n = len(pairs[0][0])
    if n == 0:
        return [Figure(None, None, None, 0) for _ in pairs]
    rows = np.column_stack([column for pair in pairs for column in pair]).astype(np.float64)
    boots: list[list[np.ndarray]] = [[] for _ in pairs]
    with np.errstate(invalid="ignore", divide="ignore"):
        for sums in _resampled_sums(_rng(seed, name), rows, n_boot):
            for k in range(len(pairs)):
                boots[k].append(sums[:, 2 * k] / sums[:, 2 * k + 1])
    figures = []
    for (num, den), samples in zip(pairs, boots):
        total_num, total_den, items = int(num.sum()), int(den.sum()), int(np.count_nonzero(den))
        if total_den == 0:
            figures.append(Figure(None, None, None, items, total_num, total_den))
            continue
        lo, hi = percentile_interval(np.concatenate(samples), confidence)
        figures.append(Figure(total_num / total_den, lo, hi, items, total_num, total_den, interval_note(items, lo, hi)))
    return figures


def claim_counts(outcomes: Sequence[ItemOutcome]) -> tuple[np.ndarray, np.ndarray]:
    """Per item, its supported and checkable (non-trivial) claims."""
    supported, checkable = np.zeros(len(outcomes)), np.zeros(len(outcomes))
    for i, item in enumerate(outcomes):
        verdicts = [canonical(v, f"item {item.item_id}: ") for v in item.verdicts]
        supported[i] = sum(v == "supported" for v in verdicts)
        checkable[i] = sum(v != "trivial" for v in verdicts)
    return supported, checkable


def faithfulness(outcomes: Sequence[ItemOutcome], name: str = "all", **boot) -> Figure:
    """Supported / checkable claims (trivial claims excluded), over items that have checkable claims."""
    supported, checkable = claim_counts(outcomes)
    keep = checkable > 0
    return ratio_figures([(supported[keep], checkable[keep])], f"faithfulness:{name}", **boot)[0]


def abstention_pair(outcomes: Sequence[ItemOutcome], **boot) -> AbstentionPair:
    known = [o for o in outcomes if o.answerable is not None]
    abstained = np.array([o.abstained for o in known], dtype=float)
    answerable = np.array([bool(o.answerable) for o in known], dtype=float)
    correct, over = ratio_figures(
        [(abstained * (1 - answerable), 1 - answerable), (abstained * answerable, answerable)], "abstention", **boot
    )
    return AbstentionPair(correct, over)


class _Boot(TypedDict):
    n_boot: int
    seed: int
    confidence: float


def eval_report(
    outcomes: Sequence[ItemOutcome],
    *,
    dims: Sequence[str] = SLICE_DIMS,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    agreement: Agreement | None = None,
) -> EvalReport:
    boot: _Boot = dict(n_boot=n_boot, seed=seed, confidence=confidence)
    slices = []
    for dim in dims:
        for value in sorted({getattr(o, dim) or "unknown" for o in outcomes}):
            members = [o for o in outcomes if (getattr(o, dim) or "unknown") == value]
            slices.append(SliceFigure(dim, value, faithfulness(members, f"{dim}={value}", **boot)))
    slices.sort(
        key=lambda s: (s.faithfulness.value is None, s.faithfulness.value or 0.0, -s.faithfulness.items, s.name)
    )
    return EvalReport(
        faithfulness(outcomes, **boot), tuple(slices), abstention_pair(outcomes, **boot), len(outcomes), agreement
    )


def confusion_matrix(a: Sequence[str], b: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """Counts with rows = labels of ``a``, columns = labels of ``b``."""
    if len(a) != len(b):
        raise ValueError(f"label lists differ in length: {len(a)} vs {len(b)}; pair each claim's two labels")
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for x, y in zip(a, b):
        for label in (x, y):
            if label not in index:
                raise ValueError(f"label {label!r} is not in labels {list(labels)}")
        matrix[index[x], index[y]] += 1
    return matrix


def _kappa(matrix: np.ndarray) -> np.ndarray:
    """Cohen's kappa of one (k, k) or many (b, k, k) confusion matrices; nan where undefined."""
    n = matrix.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(matrix, axis1=-2, axis2=-1) / n
        expected = (matrix.sum(axis=-1) * matrix.sum(axis=-2)).sum(axis=-1) / n**2
        return (observed - expected) / (1 - expected)


def cohen_kappa(a: Sequence[str], b: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """Chance-corrected agreement of two raters. nan when undefined (both used one same label throughout)."""
    if not a:
        raise ValueError("no label pairs: kappa needs at least one claim labelled by both raters")
    return float(_kappa(confusion_matrix(a, b, labels or sorted(set(a) | set(b)))))


def disagreement_slices(
    pairs: Sequence[LabelPair],
    dims: Sequence[str] = ("query_type", "stakes", "claim_type", "verifier"),
    min_pairs: int = 5,
) -> list[DisagreementSlice]:
    """Slices with at least ``min_pairs`` pairs, most disagreement first (then larger first)."""
    found = []
    for dim in dims:
        for value in sorted({getattr(p, dim) or "unknown" for p in pairs}):
            members = [p for p in pairs if (getattr(p, dim) or "unknown") == value]
            if len(members) < min_pairs:
                continue
            confusions = Counter((p.verifier, p.human) for p in members if p.verifier != p.human)
            top = confusions.most_common(1)[0] if confusions else None
            kappa = cohen_kappa([p.verifier for p in members], [p.human for p in members])
            found.append(
                DisagreementSlice(
                    dim,
                    value,
                    len(members),
                    sum(confusions.values()) / len(members),
                    kappa if math.isfinite(kappa) else None,
                    (top[0][0], top[0][1], top[1]) if top else None,
                )
            )
    return sorted(found, key=lambda s: (-s.disagreement, -s.pairs, s.name))


def agreement(
    pairs: Sequence[LabelPair],
    *,
    labels: Sequence[str] | None = None,
    min_pairs: int = 5,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Agreement:
    """Verifier vs human on the same claims: kappa and observed agreement with item-resampled intervals."""
    pairs = [
        LabelPair(
            p.item_id, p.claim_idx, canonical(p.verifier), canonical(p.human), p.query_type, p.stakes, p.claim_type
        )
        for p in pairs
    ]
    labels = tuple(labels or sorted({p.verifier for p in pairs} | {p.human for p in pairs}))
    items = sorted({p.item_id for p in pairs})
    total = confusion_matrix([p.verifier for p in pairs], [p.human for p in pairs], labels)
    agreed = int(np.trace(total))
    if not pairs:
        empty = Figure(None, None, None, 0)
        return Agreement(empty, empty, labels, (), ())
    per_item = np.zeros((len(items), len(labels) * len(labels)))
    where = {item: i for i, item in enumerate(items)}
    for p in pairs:
        per_item[where[p.item_id], labels.index(p.verifier) * len(labels) + labels.index(p.human)] += 1
    k = len(labels)
    kappas, shares = [], []
    for sums in _resampled_sums(_rng(seed, "agreement"), per_item, n_boot):
        boot = sums.reshape(-1, k, k)
        kappas.append(_kappa(boot))
        with np.errstate(invalid="ignore", divide="ignore"):
            shares.append(np.trace(boot, axis1=-2, axis2=-1) / boot.sum(axis=(-2, -1)))
    kappa_value = float(_kappa(total.astype(float)))
    k_lo, k_hi = percentile_interval(np.concatenate(kappas), confidence)
    kappa = Figure(
        kappa_value if np.isfinite(kappa_value) else None,
        k_lo,
        k_hi,
        len(items),
        agreed,
        len(pairs),
        interval_note(len(items), k_lo, k_hi),
    )
    o_lo, o_hi = percentile_interval(np.concatenate(shares), confidence)
    observed = Figure(
        agreed / len(pairs), o_lo, o_hi, len(items), agreed, len(pairs), interval_note(len(items), o_lo, o_hi)
    )
    return Agreement(
        kappa,
        observed,
        labels,
        tuple(tuple(int(x) for x in row) for row in total),
        tuple(disagreement_slices(pairs, min_pairs=min_pairs)),
    )


def figure_text(where: str, metric: str, figure: Figure, decimals: int = 4) -> str:
    """``faithfulness on all is 0.9500 (95% CI 0.9100–0.9800, 120 items)``: a gated figure as the gate states it."""
    spread = (
        f"95% CI {figure.lo:.{decimals}f}–{figure.hi:.{decimals}f}, " if figure.has_interval else f"{figure.note}; "
    )
    return f"{metric} on {where} is {figure.value:.{decimals}f} ({spread}{plural(figure.items, 'item')})"


def met_text(where: str, metric: str, figure: Figure, threshold: float, low_is_bad: bool, decimals: int = 4) -> str:
    """A threshold met, as a passing gate states it: the figure with its interval and items, and the bound."""
    bound = "at least the minimum" if low_is_bad else "at most the maximum"
    return f"{figure_text(where, metric, figure, decimals)}, {bound} {threshold:.{decimals}f}"


def check_figure(
    where: str,
    metric: str,
    figure: Figure | None,
    threshold: float,
    low_is_bad: bool,
    decimals: int = 4,
    min_items: int = 0,
) -> GateFailure | None:
    """The failure when ``figure`` misses ``threshold``; an undefined figure fails (no evidence is not a pass), and
    so does one resting on fewer than ``min_items`` items (too little evidence is not a pass either)."""
    if figure is None or figure.value is None:
        return GateFailure(
            where,
            metric,
            None,
            threshold,
            f"{metric} on {where} is undefined (no approved item it can count: faithfulness counts verifier-labelled "
            "claims, abstention answerable or unanswerable items); the gate cannot pass on no evidence",
        )
    if figure.items < min_items:
        return GateFailure(
            where,
            metric,
            figure.value,
            threshold,
            f"{figure_text(where, metric, figure, decimals)} rests on fewer than eval.min_items "
            f"({min_items}): too few to gate on; add eval items, or lower eval.min_items",
        )
    if not (figure.value < threshold if low_is_bad else figure.value > threshold):
        return None
    side = "below the minimum" if low_is_bad else "above the maximum"
    return GateFailure(
        where,
        metric,
        figure.value,
        threshold,
        f"{figure_text(where, metric, figure, decimals)}, {side} {threshold:.{decimals}f}",
    )


def gate(
    report: EvalReport,
    min_faithfulness: float | None = None,
    max_over_refusal: float | None = None,
    slice_min: float | Mapping[str, float] | None = None,
    min_items: int = 0,
) -> GateResult:
    """Compare point estimates with thresholds; an undefined figure fails (no evidence is not a pass), and the
    whole set's figures need ``min_items`` items behind them (eval.min_items)."""
    failures: list[GateFailure] = []
    checked: list[str] = []

    def check(
        where: str, metric: str, figure: Figure | None, threshold: float, low_is_bad: bool, least: int = 0
    ) -> None:
        failure = check_figure(where, metric, figure, threshold, low_is_bad, min_items=least)
        if failure:
            failures.append(failure)
        elif figure is not None:  # always: check_figure fails a missing figure
            checked.append(met_text(where, metric, figure, threshold, low_is_bad))

    if min_faithfulness is not None:
        check("all", "faithfulness", report.faithfulness, min_faithfulness, True, min_items)
    if max_over_refusal is not None:
        check("answerable", "over-refusal", report.abstention.over_refusal, max_over_refusal, False, min_items)
    if isinstance(slice_min, (int, float)):
        # Every slice with claims; a slice of abstentions only has nothing to be unfaithful about.
        for s in report.slices:
            if s.faithfulness.value is not None:
                check(s.name, "faithfulness", s.faithfulness, float(slice_min), True)
    elif slice_min:
        for name, threshold in slice_min.items():
            found = report.slice(name)
            check(name, "faithfulness", found.faithfulness if found else None, threshold, True)
    return GateResult(not failures, tuple(failures), tuple(checked))


def parse_slice_min(text: str) -> float | dict[str, float]:
    """``0.8`` (every slice) or ``stakes=high:0.9,query_type=lookup:0.85`` (named slices)."""
    try:
        return float(text)
    except ValueError:
        pass
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.rpartition(":")
        try:
            if "=" not in name:
                raise ValueError
            out[name] = float(value)
        except ValueError:
            raise ValueError(f"--slice-min part {part!r}: write DIM=VALUE:MIN, e.g. stakes=high:0.9") from None
    return out


for _shape in (Figure, SliceFigure, AbstentionPair, DisagreementSlice, Agreement, EvalReport, GateFailure, GateResult):
    closed(_shape)  # the API answers with them as they are (services/core/readmodel.py)
