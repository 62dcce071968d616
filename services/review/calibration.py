"""Calibrated rates: the verifier's failed-rate corrected by settled human labels.

Two estimators, from the same weighted labels (weight 1 / their stratum's sampling probability, so oversampling
rare verdicts biases neither) and the window's raw share p of claims the verifier flagged (any non-supported
verdict):

- ``ppi``: stratified prediction-powered inference, strata by the verifier's verdict:
  p·P(failed | flagged) + (1 - p)·P(failed | passed), each conditional share the weighted share of that class's
  labels settled as failed (Angelopoulos et al., "PPI++: Efficient Prediction-Powered Inference", 2023; Fisch
  et al., "Stratified Prediction-Powered Inference for Hybrid Language Model Evaluation", 2024). With a binary
  prediction PPI++'s power tuning changes nothing: inside a stratum the prediction is constant, so
  λ·mean(f) - λ·mean(f) cancels and the stratum's estimate is the mean of its labels whatever λ is.
- ``rogan_gladen``: (p + Sp - 1) / (Se + Sp - 1), the verifier's sensitivity and specificity measured on the
  labels, clipped to [0, 1].

Both are θ0 + λ·(p - q), θ0 the labels' own weighted failed share and q their weighted flagged share, with
λ = P(failed | flagged) - P(failed | passed) for PPI and 1 / (Se + Sp - 1) for Rogan–Gladen (Chen et al.,
"Efficient Inference for Noisy LLM-as-a-Judge Evaluation", ICML 2026, compare the two families and derive the
efficient estimator). They differ only in how they carry the labels over to a window whose flagged share p
differs from the labels' q:
- where the labels are a sample of the same traffic, PPI's λ is the efficient one. The window's noise in p then
  weighs (a - b)² rather than 1 / (Se + Sp - 1)², so PPI's interval can keep narrowing as labels are added;
  Rogan–Gladen's cannot go under 2·z·sd(p) / (Se + Sp - 1). At 200 labels a route the two are equally wide
  (the labels' own variance dominates, and it is the same θ0); the gain is in reaching a few points;
- where they are not, PPI is biased. P(failed | verdict) moves with the prevalence; Se and Sp stay with the
  verifier. So labels of other traffic than the window's use Rogan–Gladen (``transfer_estimator``): pooled
  labels (other routes of the verifier version; the eval set's chosen answers), and labels whose flagged share
  q differs from the window's p beyond noise (the prevalence moved since they were drawn).
bench/calibration.py measures all three cases.

Intervals:
- PPI's is analytic: p's variance (answers resampled: claims of one answer move together) times λ², plus each
  class's share² × its labels' variance / effective labels ((Σw)² / Σw², which is how the sampling strata's
  weights enter). A class's variance is Jeffreys-smoothed (half a label each way). A percentile bootstrap
  degenerates here: misses are rare (about 1 failed in 80 passed labels on one bench route), a quarter of
  draws see none, and the interval then ignores that class's uncertainty (covered 89.7%).
- Rogan–Gladen's is a percentile bootstrap. It resamples both the traffic's answers and the labelled claims,
  within the strata they were sampled from: a stratum's count is fixed by its quota, and resampling across
  strata would add variance the design does not have, and over-cover.

What it estimates: the rate the settled human labels would give if every claim were reviewed. Settled labels
are wrong only when both reviewers (and, on a dispute, the adjudicator) are wrong together. With reviewers
wrong 5% of the time that is 0.7% of labels, so the rate sits about half a point from the true one. That is
small against the width at 200 labels (tests/unit/review/test_calibration_simulation.py measures coverage of
the true rate), but not against an interval narrowed to 2-3 points.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TypedDict

import numpy as np

from services.core.score_bands import UNSCORED, band
from services.core.stats import percentile_interval, z_value
from services.review.estimators import (
    Agreement,
    VerdictClass,
    effective_labels,
    resample_counts,
    stratified_variance,
)
from services.review.labels import ReviewedClaim
from services.review.score_strata import ScoreCell, post_stratify
from services.review.traffic import Traffic

ESTIMATORS = ("ppi", "rogan_gladen")


@dataclass(frozen=True)
class CalibratedRate:
    route: str
    raw: float | None
    value: float | None  # in [0, 1]
    interval: tuple[float, float] | None
    sensitivity: float | None
    specificity: float | None
    labels: int  # settled labels behind the estimate
    pooled: bool  # labels of other routes with the same verifier version were used
    label_routes: tuple[str, ...]
    verifier_version: str
    stale: bool
    reasons: tuple[str, ...] = field(default=())  # why stale, or why there is no value
    newest_label: datetime | None = None
    estimator: str = "ppi"  # ppi | rogan_gladen
    estimator_note: str = ""  # why not the configured estimator
    flagged: VerdictClass | None = None
    passed: VerdictClass | None = None
    raw_variance: float | None = None
    own_labels: int = 0  # the route's own settled labels of its current verifier version
    score_cells: tuple[ScoreCell, ...] = ()  # post-stratified on score bands: the cells (else empty)

    @property
    def status(self) -> str:
        """What every surface says of it: ``no labels yet`` (nothing to calibrate with: not stale, never fresh),
        ``stale`` (see ``reasons``) or ``current``."""
        return "no labels yet" if self.labels == 0 else "stale" if self.stale else "current"

    def slope(self, estimator: str | None = None) -> float | None:
        """λ of ``estimator`` (default: this rate's): how far the estimate moves with the window's flagged share."""
        if (estimator or self.estimator) == "rogan_gladen":
            youden = (self.sensitivity or 0.0) + (self.specificity or 0.0) - 1
            return 1 / youden if youden > 0 else None
        if self.flagged is None or self.passed is None or self.flagged.failed is None or self.passed.failed is None:
            return None
        return self.flagged.failed - self.passed.failed

    def as_dict(self) -> dict:
        """The ``calibrated`` field of a `rates --json` entry (the entry's own ``rate`` is the raw one)."""
        return {
            "rate": self.value,
            "interval": list(self.interval) if self.interval else None,
            "sensitivity": self.sensitivity,
            "specificity": self.specificity,
            "labels": self.labels,
            "pooled": self.pooled,
            "label_routes": list(self.label_routes),
            "verifier_version": self.verifier_version,
            "stale": self.stale,
            "status": self.status,
            "reasons": list(self.reasons),
            "newest_label": self.newest_label.isoformat() if self.newest_label else None,
            "own_labels": self.own_labels,
            "estimator": self.estimator,
            "estimator_note": self.estimator_note,
            "failed_if_flagged": self.flagged.failed if self.flagged else None,
            "failed_if_passed": self.passed.failed if self.passed else None,
            "score_cells": [
                {"cell": c.name, "share": c.share, "failed": c.failed, "labels": c.count} for c in self.score_cells
            ],
        }


def with_calibrated(entries: list[dict], calibrated: Mapping[str, CalibratedRate]) -> list[dict]:
    """`rates` entries with a ``calibrated`` field added (None for a route without answers to correct)."""
    return [
        {**e, "calibrated": calibrated[e["route"]].as_dict() if e["route"] in calibrated else None} for e in entries
    ]


@dataclass(frozen=True)
class SettledLabel:
    """What calibration needs of a settled production claim."""

    route: str
    verifier_version: str
    stratum: tuple[str, float]  # resampled together: the claims of one stratum-day (same quota, same weight)
    weight: float
    verifier_failed: bool
    human_failed: bool
    settled_at: datetime
    band: int = UNSCORED  # of the verifier's score (services/core/score_bands.py)


def settled_labels(claims: Sequence[ReviewedClaim]) -> list[SettledLabel]:
    """Production claims with a settled failed-or-supported label; eval claims were chosen, not sampled."""
    out = []
    for c in claims:
        if c.origin != "production" or c.weight <= 0:
            continue
        human, at = c.human_failed, c.settled_at
        if human is not None and at is not None:  # a settled claim has a review, so a time
            out.append(
                SettledLabel(
                    c.route,
                    c.verifier_version,
                    (c.stratum or f"{c.route}|{c.verdict}", c.weight),
                    c.weight,
                    c.verifier_failed,
                    human,
                    at,
                    band(c.score),
                )
            )
    return out


class _RateBasis(TypedDict):
    """The fields of a CalibratedRate known before its value is."""

    route: str
    raw: float | None
    labels: int
    pooled: bool
    label_routes: tuple[str, ...]
    verifier_version: str
    newest_label: datetime | None
    estimator: str
    estimator_note: str
    raw_variance: float | None
    own_labels: int
    sensitivity: float | None
    specificity: float | None
    flagged: VerdictClass
    passed: VerdictClass


def _number(x) -> float | None:
    return None if np.isnan(x) else float(x)


class Calibrator:
    def __init__(
        self,
        min_labels: int,
        max_label_age: timedelta,
        n_boot: int = 1000,
        confidence: float = 0.95,
        seed: int = 0,
        estimator: str = "ppi",
        transfer_estimator: str = "rogan_gladen",
        use_scores: bool = True,
    ):
        for name in (estimator, transfer_estimator):
            if name not in ESTIMATORS:
                raise ValueError(f"estimator {name!r} is not one of {', '.join(ESTIMATORS)}")
        self.min_labels = min_labels
        self.max_label_age = max_label_age
        self.n_boot = n_boot
        self.confidence = confidence
        self.seed = seed
        self.estimator = estimator
        # For labels of other traffic than the window's (pooled over routes, or drawn before the prevalence moved):
        # P(failed | verdict) moves with the prevalence, Se and Sp stay with the verifier.
        self.transfer_estimator = transfer_estimator
        self.use_scores = use_scores  # post-stratify PPI on score bands where that is the more precise

    def calibrate_all(
        self, traffic: Sequence[Traffic], claims: Sequence[ReviewedClaim], now: datetime
    ) -> dict[str, CalibratedRate]:
        usable = settled_labels(claims)
        return {t.route: self._calibrate(t, usable, now) for t in traffic}

    def calibrate(self, traffic: Traffic, claims: Sequence[ReviewedClaim], now: datetime) -> CalibratedRate:
        return self._calibrate(traffic, settled_labels(claims), now)

    def _calibrate(self, traffic: Traffic, usable: Sequence[SettledLabel], now: datetime) -> CalibratedRate:
        own = [c for c in usable if c.route == traffic.route and c.verifier_version == traffic.verifier_version]
        basis, pooled, reasons = self._basis(traffic, own, usable)
        newest = max((c.settled_at for c in basis), default=None)
        if newest is not None and now - newest > self.max_label_age:
            reasons.append(
                f"the newest label is {(now - newest).days} days old (calibration.max_label_age_days is "
                f"{self.max_label_age.days})"
            )
        weights = np.array([c.weight for c in basis])
        verifier = np.array([c.verifier_failed for c in basis], dtype=np.float64)
        human = np.array([c.human_failed for c in basis], dtype=np.float64)
        found = Agreement.of(weights, verifier, human)
        raw, raw_variance = traffic.raw, traffic.raw_variance
        estimator, note = self._estimator(pooled, raw, raw_variance, found, weights)
        se, sp = _number(found.sensitivity), _number(found.specificity)
        if se is None or sp is None:  # known as a pair or not at all
            se = sp = None
        common: _RateBasis = dict(
            route=traffic.route,
            raw=raw,
            labels=len(basis),
            pooled=pooled,
            label_routes=tuple(sorted({c.route for c in basis})),
            verifier_version=traffic.verifier_version,
            newest_label=newest,
            estimator=estimator,
            estimator_note=note,
            raw_variance=raw_variance,
            own_labels=len(own),
            sensitivity=se,
            specificity=sp,
            flagged=VerdictClass(
                raw or 0.0, _number(found.failed_if_flagged), effective_labels(weights[verifier == 1])
            ),
            passed=VerdictClass(
                1 - (raw or 0.0), _number(found.failed_if_passed), effective_labels(weights[verifier == 0])
            ),
        )
        missing = [side for side, n in (("failed", human.sum()), ("supported", len(human) - human.sum())) if n == 0]
        unlabelled = [
            side for side, n in (("flagged", verifier.sum()), ("passed", len(verifier) - verifier.sum())) if n == 0
        ]
        if raw is None or missing or (estimator == "ppi" and unlabelled):
            why = (
                "no checkable claims in the window"
                if raw is None
                else f"no settled label says {' or '.join(missing)}, so the verifier's error rates are unknown"
                if missing
                else f"no settled label is of a claim the verifier {' or '.join(unlabelled)}, so how often such "
                "claims fail is unknown"
            )
            return CalibratedRate(value=None, interval=None, stale=True, reasons=(*reasons, why), **common)
        value = found.estimate(estimator, raw)
        if np.isnan(value):
            reasons.append(f"the verifier is no better than chance on these labels (Se {se:.2f} + Sp {sp:.2f} <= 1)")
            return CalibratedRate(value=None, interval=None, stale=True, reasons=tuple(reasons), **common)
        rate = CalibratedRate(value=value, interval=None, stale=bool(reasons), reasons=tuple(reasons), **common)
        if estimator == "ppi":
            banded = self._post_stratified(rate, traffic, basis, weights, verifier, human)
            return banded or self._with_interval(rate, value, self._class_variance(rate))
        strata = [c.stratum for c in basis]
        return replace(rate, interval=self._bootstrap(traffic, weights, verifier, human, strata))

    def _estimator(
        self, pooled: bool, raw: float | None, raw_variance: float | None, found: Agreement, weights: np.ndarray
    ) -> tuple[str, str]:
        """The estimator for these labels and this window, and why when it is not the configured one."""
        if self.transfer_estimator == self.estimator:
            return self.estimator, ""
        if pooled:
            return self.transfer_estimator, "labels pooled over routes"
        # A prevalence shift since the labels were drawn moves the window's flagged share p away from theirs, q.
        q = found.flagged_share
        if raw is None or np.isnan(q):
            return self.estimator, ""
        noise = math.sqrt(raw_variance + q * (1 - q) / weights.sum())
        if abs(raw - q) > z_value(self.confidence) * noise:
            return self.transfer_estimator, (
                f"the window's flagged share ({100 * raw:.1f}%) moved from the labels' ({100 * q:.1f}%)"
            )
        return self.estimator, ""

    def _post_stratified(
        self,
        rate: CalibratedRate,
        traffic: Traffic,
        basis: Sequence[SettledLabel],
        weights: np.ndarray,
        verifier: np.ndarray,
        human: np.ndarray,
    ) -> CalibratedRate | None:
        """The rate post-stratified on score bands, where the labels carry scores and that is the more precise
        (a score that tells nothing would only split the labels thinner); else None."""
        bands = np.array([c.band for c in basis], dtype=np.int64)
        if not self.use_scores or traffic.cells is None or traffic.cross is None or not bands.any():
            return None
        strata = [c.stratum[0] for c in basis]
        found = post_stratify(traffic.cells, traffic.cross, weights, verifier, bands, human, strata)
        if found is None or len(found.cells) <= 2 or found.variance >= self._class_variance(rate):
            return None
        return self._with_interval(replace(rate, score_cells=found.cells), found.value, found.variance)

    @staticmethod
    def _class_variance(rate: CalibratedRate) -> float:
        slope = rate.slope()
        # PPI gets here with a value from labels of both classes and a window with claims: all of these are known.
        assert rate.flagged is not None and rate.passed is not None
        assert slope is not None and rate.raw_variance is not None
        return stratified_variance(rate.flagged, rate.passed, slope, rate.raw_variance)

    def _with_interval(self, rate: CalibratedRate, value: float, variance: float) -> CalibratedRate:
        half = z_value(self.confidence) * math.sqrt(variance)
        interval = (max(0.0, value - half), min(1.0, value + half))
        return replace(rate, value=min(1.0, max(0.0, value)), interval=interval)

    def _basis(
        self, traffic: Traffic, own: list[SettledLabel], usable: Sequence[SettledLabel]
    ) -> tuple[list[SettledLabel], bool, list[str]]:
        """The route's own labels of its current verifier version; else pooled across routes of that version;
        else the route's labels of other versions (stale)."""
        version = traffic.verifier_version
        if len(own) >= self.min_labels:
            return own, False, []
        same_version = [c for c in usable if c.verifier_version == version]
        basis, pooled = (same_version, True) if len(same_version) > len(own) else (own, False)
        if len(basis) >= self.min_labels:
            return basis, pooled, []
        older = [c for c in usable if c.route == traffic.route and c.verifier_version != version]
        if len(older) > len(basis):
            versions = ", ".join(sorted({c.verifier_version or "(none)" for c in older}))
            return (
                older,
                False,
                [
                    f"{len(older)} labels are of verifier {versions}; the route now runs {version or '(none)'}",
                    *self._too_few(len(older)),
                ],
            )
        return basis, pooled, self._too_few(len(basis))

    def _too_few(self, n: int) -> list[str]:
        return (
            [f"only {n} settled labels (calibration needs review.min_labels = {self.min_labels})"]
            if n < self.min_labels
            else []
        )

    def _bootstrap(
        self,
        traffic: Traffic,
        weights: np.ndarray,
        verifier: np.ndarray,
        human: np.ndarray,
        strata: Sequence[tuple[str, float]],
    ) -> tuple[float, float] | None:
        """Rogan–Gladen's percentile interval: answers and, within their strata, labelled claims resampled."""
        rng = np.random.default_rng([self.seed, zlib.crc32(traffic.route.encode())])
        total = int(traffic.answers.sum())
        drawn = rng.multinomial(total, traffic.answers / total, size=self.n_boot).astype(np.float64)
        drawn *= traffic.answer_weights / traffic.answers  # a drawn answer weighs its pattern's mean weight
        with np.errstate(invalid="ignore", divide="ignore"):
            raw = (drawn @ traffic.failed) / (drawn @ traffic.claims)
        picks = np.empty((self.n_boot, len(weights)))
        members: dict[tuple[str, float], list[int]] = {}
        for i, stratum in enumerate(strata):
            members.setdefault(stratum, []).append(i)
        for ix in members.values():
            picks[:, ix] = resample_counts(rng, len(ix), self.n_boot)
        picks *= weights
        samples = Agreement.of(picks, verifier, human).estimate("rogan_gladen", raw)
        if np.isfinite(samples).sum() < self.n_boot / 2:  # mostly undefined: an interval from the rest would mislead
            return None
        lo, hi = percentile_interval(samples, self.confidence)
        return (lo, hi) if lo is not None and hi is not None else None
