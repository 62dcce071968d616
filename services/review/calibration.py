"""Calibrated rates: the verifier's failed-rate corrected for its measured errors (Rogan–Gladen).

The verifier says "failed" (any non-supported verdict) with sensitivity Se and specificity Sp against
settled human labels. If it reports a raw rate p, the true rate is (p + Sp - 1) / (Se + Sp - 1),
clipped to [0, 1]. Labels are weighted by 1 / their stratum's sampling probability, so oversampling
rare verdicts does not bias Se and Sp. The interval is a percentile bootstrap that resamples both the
answers of the traffic (claims of one answer move together) and the labelled claims, within the strata they
were sampled from (a stratum's count is fixed by its quota; resampling across strata would add variance the
design does not have, and over-cover).

What it estimates: the rate the settled human labels would give if every claim were reviewed. Settled labels
are wrong only when both reviewers (and, on a dispute, the adjudicator) are wrong together, so with reviewers
wrong 5% of the time that rate is within a fraction of a point of the true one (tests/unit/review/
test_calibration_simulation.py measures coverage of the true rate).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Mapping, Sequence

import numpy as np

from services.review.labels import ReviewedClaim


@dataclass(frozen=True)
class Traffic:
    """A route's answers in a window, as distinct (failed, claims) patterns and how many answers had each."""

    route: str
    verifier_version: str
    failed: np.ndarray
    claims: np.ndarray
    answers: np.ndarray

    @classmethod
    def from_row(cls, row: Mapping) -> "Traffic":
        profile = np.array(row["profile"], dtype=np.float64).reshape(-1, 3)
        return cls(row["route"], row["verifier_version"], profile[:, 0], profile[:, 1], profile[:, 2])

    @property
    def raw(self) -> float | None:
        claims = float(self.answers @ self.claims)
        return float(self.answers @ self.failed) / claims if claims else None


@dataclass(frozen=True)
class CalibratedRate:
    route: str
    raw: float | None
    value: float | None             # Rogan–Gladen, clipped to [0, 1]
    interval: tuple[float, float] | None
    sensitivity: float | None
    specificity: float | None
    labels: int                     # settled labels behind Se and Sp
    pooled: bool                    # labels of other routes with the same verifier version were used
    label_routes: tuple[str, ...]
    verifier_version: str
    stale: bool
    reasons: tuple[str, ...] = field(default=())   # why stale, or why there is no value
    newest_label: datetime | None = None

    def as_dict(self) -> dict:
        """The ``calibrated`` field of a `rates --json` entry (the entry's own ``rate`` is the raw one)."""
        return {"rate": self.value, "interval": list(self.interval) if self.interval else None,
                "sensitivity": self.sensitivity, "specificity": self.specificity, "labels": self.labels,
                "pooled": self.pooled, "label_routes": list(self.label_routes),
                "verifier_version": self.verifier_version, "stale": self.stale, "reasons": list(self.reasons),
                "newest_label": self.newest_label.isoformat() if self.newest_label else None}


def with_calibrated(entries: list[dict], calibrated: Mapping[str, CalibratedRate]) -> list[dict]:
    """`rates` entries with a ``calibrated`` field added (None for a route without answers to correct)."""
    return [{**e, "calibrated": calibrated[e["route"]].as_dict() if e["route"] in calibrated else None}
            for e in entries]


def rogan_gladen(raw, sensitivity, specificity):
    """(raw + Sp - 1) / (Se + Sp - 1) clipped to [0, 1]; nan where Se + Sp <= 1 (no better than chance)."""
    raw, se, sp = (np.asarray(x, dtype=np.float64) for x in (raw, sensitivity, specificity))
    youden = se + sp - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.clip((raw + sp - 1) / youden, 0.0, 1.0)
    value = np.where(youden > 0, value, np.nan)
    return float(value) if value.ndim == 0 else value


@dataclass(frozen=True)
class SettledLabel:
    """What calibration needs of a settled production claim."""

    route: str
    verifier_version: str
    stratum: tuple[str, float]      # resampled together: the claims of one stratum-day (same quota, same weight)
    weight: float
    verifier_failed: bool
    human_failed: bool
    settled_at: datetime


def settled_labels(claims: Sequence[ReviewedClaim]) -> list[SettledLabel]:
    """Production claims with a settled failed-or-supported label; eval claims were chosen, not sampled."""
    out = []
    for c in claims:
        if c.origin != "production" or c.weight <= 0:
            continue
        human = c.human_failed
        if human is not None:
            out.append(SettledLabel(c.route, c.verifier_version, (c.stratum or f"{c.route}|{c.verdict}", c.weight),
                                    c.weight, c.verifier_failed, human, c.settled_at))
    return out


def resample_counts(rng: np.random.Generator, n: int, draws: int) -> np.ndarray:
    """(draws, n) counts of how often each of n items is drawn in n draws with replacement (a multinomial,
    by bincount: much faster than numpy's multinomial for many small items)."""
    picks = rng.integers(0, n, size=(draws, n)) + (np.arange(draws) * n)[:, None]
    return np.bincount(picks.ravel(), minlength=draws * n).reshape(draws, n).astype(np.float64)


def _error_rates(weights: np.ndarray, verifier: np.ndarray, human: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted Se and Sp for each row of ``weights`` (labelled claims' draw counts times their weights)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        se = (weights @ (verifier * human)) / (weights @ human)
        sp = (weights @ ((1 - verifier) * (1 - human))) / (weights @ (1 - human))
    return se, sp


class Calibrator:
    def __init__(self, min_labels: int, max_label_age: timedelta, n_boot: int = 1000, confidence: float = 0.95,
                 seed: int = 0):
        self.min_labels = min_labels
        self.max_label_age = max_label_age
        self.n_boot = n_boot
        self.confidence = confidence
        self.seed = seed

    def calibrate_all(self, traffic: Sequence[Traffic], claims: Sequence[ReviewedClaim], now: datetime
                      ) -> dict[str, CalibratedRate]:
        usable = settled_labels(claims)
        return {t.route: self._calibrate(t, usable, now) for t in traffic}

    def calibrate(self, traffic: Traffic, claims: Sequence[ReviewedClaim], now: datetime) -> CalibratedRate:
        return self._calibrate(traffic, settled_labels(claims), now)

    def _calibrate(self, traffic: Traffic, usable: Sequence[SettledLabel], now: datetime) -> CalibratedRate:
        basis, pooled, reasons = self._basis(traffic, usable)
        newest = max((c.settled_at for c in basis), default=None)
        if newest is not None and now - newest > self.max_label_age:
            reasons.append(f"the newest label is {(now - newest).days} days old (calibration.max_label_age_days is "
                           f"{self.max_label_age.days})")
        common = dict(route=traffic.route, raw=traffic.raw, labels=len(basis), pooled=pooled,
                      label_routes=tuple(sorted({c.route for c in basis})), verifier_version=traffic.verifier_version,
                      newest_label=newest)
        weights = np.array([c.weight for c in basis])
        verifier = np.array([c.verifier_failed for c in basis], dtype=np.float64)
        human = np.array([c.human_failed for c in basis], dtype=np.float64)
        missing = [side for side, n in (("failed", human.sum()), ("supported", len(human) - human.sum())) if n == 0]
        if traffic.raw is None or missing:
            why = ["no checkable claims in the window"] if traffic.raw is None else \
                [f"no settled label says {' or '.join(missing)}, so the verifier's error rates are unknown"]
            return CalibratedRate(value=None, interval=None, sensitivity=None, specificity=None, stale=True,
                                  reasons=tuple(reasons + why), **common)
        se, sp = (float(x) for x in _error_rates(weights, verifier, human))
        value = rogan_gladen(traffic.raw, se, sp)
        if np.isnan(value):
            reasons.append(f"the verifier is no better than chance on these labels (Se {se:.2f} + Sp {sp:.2f} <= 1)")
        strata = [c.stratum for c in basis]
        return CalibratedRate(value=None if np.isnan(value) else value, interval=self._interval(traffic, weights,
                              verifier, human, strata), sensitivity=se, specificity=sp, stale=bool(reasons),
                              reasons=tuple(reasons), **common)

    def _basis(self, traffic: Traffic, usable: Sequence[SettledLabel]) -> tuple[list[SettledLabel], bool, list[str]]:
        """The route's own labels of its current verifier version; else pooled across routes of that version;
        else the route's labels of other versions (stale)."""
        version = traffic.verifier_version
        own = [c for c in usable if c.route == traffic.route and c.verifier_version == version]
        if len(own) >= self.min_labels:
            return own, False, []
        same_version = [c for c in usable if c.verifier_version == version]
        if len(same_version) > len(own):
            own, pooled = same_version, True
        else:
            pooled = False
        if len(own) >= self.min_labels:
            return own, pooled, []
        older = [c for c in usable if c.route == traffic.route and c.verifier_version != version]
        if len(older) > len(own):
            versions = ", ".join(sorted({c.verifier_version or "(none)" for c in older}))
            return older, False, [f"{len(older)} labels are of verifier {versions}; the route now runs "
                                  f"{version or '(none)'}", *self._too_few(len(older))]
        return own, pooled, self._too_few(len(own))

    def _too_few(self, n: int) -> list[str]:
        return [f"only {n} settled labels (calibration needs review.min_labels = {self.min_labels})"] \
            if n < self.min_labels else []

    def _interval(self, traffic: Traffic, weights: np.ndarray, verifier: np.ndarray, human: np.ndarray,
                  strata: Sequence[tuple[str, float]]) -> tuple[float, float] | None:
        rng = np.random.default_rng([self.seed, zlib.crc32(traffic.route.encode())])
        total = int(traffic.answers.sum())
        drawn = rng.multinomial(total, traffic.answers / total, size=self.n_boot).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            raw = (drawn @ traffic.failed) / (drawn @ traffic.claims)
        picks = np.empty((self.n_boot, len(weights)))
        members: dict[tuple[str, float], list[int]] = {}
        for i, stratum in enumerate(strata):
            members.setdefault(stratum, []).append(i)
        for ix in members.values():
            picks[:, ix] = resample_counts(rng, len(ix), self.n_boot)
        picks *= weights
        se, sp = _error_rates(picks, verifier, human)
        samples = rogan_gladen(raw, se, sp)
        samples = samples[np.isfinite(samples)]
        if samples.size < self.n_boot / 2:  # mostly undefined: an interval from the rest would mislead
            return None
        tail = (1 - self.confidence) / 2
        lo, hi = np.quantile(samples, [tail, 1 - tail])
        return float(lo), float(hi)
