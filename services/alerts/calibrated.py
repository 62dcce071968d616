"""Alerts on the instrument (issue 16): the verifier agreeing with people less than it did, and what the
calibrated rate says about a rate alert.

Agreement is the share of settled human labels on which the verifier is on the same side (failed vs
supported). ``AgreementDropTest`` compares the labels settled in the recent window with every older one by a
one-sided two-proportion z-test (pooled variance): it fires when the recent share is lower with p < alpha and
by at least ``min_drop``, each side having ``min_labels``. Labelled claims are independent draws from the
daily stratified sample, whose mix of strata is the same every day, so the unweighted shares compare like
with like.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import NormalDist
from typing import Callable, Iterable, Mapping, Protocol, Sequence

from services.alerts.lifecycle import AGREEMENT_KIND, SERVICE_LABELS, Alert, make_alert_id, merge, resolve
from services.alerts.records import AlertRecords
from services.rates.intervals import Interval, wilson
from services.review.estimators import rogan_gladen
from services.review.labels import ReviewedClaim


@dataclass(frozen=True)
class LabelAgreement:
    route: str
    settled_at: datetime
    verifier_version: str
    agreed: bool


def label_agreements(claims: Iterable[ReviewedClaim]) -> list[LabelAgreement]:
    """Every claim humans settled (production or eval), with whether the verifier was on their side."""
    return [LabelAgreement(c.route, c.settled_at, c.verifier_version, c.verifier_failed == c.human_failed)
            for c in claims if c.human_failed is not None]


@dataclass(frozen=True)
class AgreementDrop:
    recent: float
    recent_labels: int
    history: float
    history_labels: int
    z: float
    p_value: float
    significant: bool

    @property
    def drop(self) -> float:
        return self.history - self.recent


class AgreementDropTest:
    def __init__(self, recent: timedelta = timedelta(days=7), alpha: float = 0.01, min_drop: float = 0.05,
                 min_labels: int = 30):
        self.recent = recent
        self.alpha = alpha
        self.min_drop = min_drop
        self.min_labels = min_labels

    def test(self, labels: Sequence[LabelAgreement], now: datetime) -> AgreementDrop | None:
        """None when either side has fewer than ``min_labels`` labels: nothing to compare."""
        since = now - self.recent
        recent = [x.agreed for x in labels if since <= x.settled_at <= now]
        history = [x.agreed for x in labels if x.settled_at < since]
        if len(recent) < self.min_labels or len(history) < self.min_labels:
            return None
        p1, p2 = sum(recent) / len(recent), sum(history) / len(history)
        pooled = (sum(recent) + sum(history)) / (len(recent) + len(history))
        se = math.sqrt(pooled * (1 - pooled) * (1 / len(recent) + 1 / len(history)))
        z = (p1 - p2) / se if se else 0.0
        p_value = NormalDist().cdf(z) if se else 1.0
        return AgreementDrop(p1, len(recent), p2, len(history), z, p_value,
                             p_value < self.alpha and p2 - p1 >= self.min_drop)


def version_suspects(labels: Sequence[LabelAgreement], since: datetime, min_share_change: float = 0.05
                     ) -> tuple[dict, ...]:
    """Verifier versions whose share of the labelled claims grew from before ``since`` to after it."""
    def shares(group):
        versions = [x.verifier_version for x in group]
        return {v: versions.count(v) / len(versions) for v in set(versions)}
    before = shares([x for x in labels if x.settled_at < since]) if labels else {}
    after = shares([x for x in labels if x.settled_at >= since]) if labels else {}
    grew = sorted((v for v in after if after[v] - before.get(v, 0.0) >= min_share_change),
                  key=lambda v: before.get(v, 0.0) - after[v])
    return tuple({"dim": "version.verifier", "key": "verifier", "value": v, "kind": "system",
                  "share_before": round(before.get(v, 0.0), 6), "share_after": round(after[v], 6),
                  "rate_before": None, "rate_after": None, "explained": 0.0,
                  "note": "share of the labelled claims the verifier version judged"} for v in grew)


class AgreementWatch:
    """One `verifier_agreement` alert per route: fires (warning) while the drop is significant, resolves after."""

    def __init__(self, test: AgreementDropTest):
        self.test = test

    def step(self, labels: Sequence[LabelAgreement], open_alerts: Mapping[str, Alert], now: datetime
             ) -> list[Alert]:
        """The alerts whose state changed, or whose figures did, at ``now``."""
        changed = []
        for route in sorted({x.route for x in labels} | set(open_alerts)):
            mine = [x for x in labels if x.route == route]
            found = self.test.test(mine, now)
            previous = open_alerts.get(route)
            if found is None or not found.significant:
                if previous is not None:
                    changed.append(resolve(previous, now))
                continue
            changed.append(merge(previous, self._observed(route, found, mine, now)))
        return changed

    def _observed(self, route: str, found: AgreementDrop, labels: Sequence[LabelAgreement], now: datetime) -> Alert:
        z = NormalDist().inv_cdf(0.975)
        interval = lambda p, n: Interval(*(float(x) for x in wilson(p, n, z)))  # noqa: E731
        since = now - self.test.recent
        return Alert(alert_id=make_alert_id(route, AGREEMENT_KIND, now), route=route, kind=AGREEMENT_KIND,
                     severity="warning", labels=dict(SERVICE_LABELS),
                     window=int(self.test.recent / timedelta(minutes=1)),
                     pending_since=now, starts_at=now, rate=found.recent,
                     rate_interval=interval(found.recent, found.recent_labels), baseline=found.history,
                     baseline_interval=interval(found.history, found.history_labels), delta=-found.drop,
                     claims=found.recent_labels, onset=since, suspect_changes=version_suspects(labels, since),
                     updated_at=now, expected=found.history,
                     expected_basis=f"agreement on {found.history_labels} earlier labels; one-sided two-proportion "
                                    f"test p = {found.p_value:.2g}")


class InstrumentAlerts:
    """The alert cycle's hook: at most every ``every``, test agreement per route and record what changed."""

    def __init__(self, watch: AgreementWatch, reviewed: Callable[[], list[ReviewedClaim]], alerts: AlertRecords,
                 every: timedelta = timedelta(minutes=15)):
        self.watch = watch
        self.reviewed = reviewed
        self.alerts = alerts
        self.every = every
        self.last: datetime | None = None
        self.open: dict[str, Alert] = {}  # route -> its open agreement alert, for the cycle's resends

    def evaluate(self, now: datetime) -> list[Alert]:
        if self.last is not None and now - self.last < self.every:
            return []
        self.last = now
        open_alerts = {a.route: a for a in self.alerts.open_alerts() if a.kind == AGREEMENT_KIND}
        transitions = []
        for alert in self.watch.step(label_agreements(self.reviewed()), open_alerts, now):
            self.alerts.save(alert)
            previous = open_alerts.get(alert.route)
            if previous is None or previous.recorded_state != alert.recorded_state:
                self.alerts.record_transition(alert)
                transitions.append(alert)
            open_alerts[alert.route] = alert
        self.open = {route: a for route, a in open_alerts.items() if a.ends_at is None}
        return transitions


# -- what a rate alert's rise is on the calibrated rate ----------------------------------------------
class Calibration(Protocol):      # services.review.calibration.CalibratedRate
    sensitivity: float | None
    specificity: float | None
    labels: int
    stale: bool
    reasons: tuple[str, ...]
    verifier_version: str


def calibrated_rise(alert: Alert, calibration: Calibration | None) -> dict:
    """Whether the alert's rise holds on the calibrated rate. Se and Sp apply to both windows alike, so the rise
    keeps its sign unless both ends fall below the verifier's false-positive floor (1 - Sp): then the whole rise is
    within what the verifier invents. Unknown when the calibration is stale."""
    expected = alert.expected if alert.expected is not None else alert.baseline
    if calibration is None or calibration.sensitivity is None or calibration.specificity is None:
        reasons = list(calibration.reasons) if calibration else ["no human labels"]
        return {"holds": None, "stale": True, "reasons": reasons, "rate": None, "expected": None, "delta": None}
    se, sp = calibration.sensitivity, calibration.specificity
    rate, base = (None if x is None else rogan_gladen(x, se, sp) for x in (alert.rate, expected))
    delta = None if rate is None or base is None else rate - base
    holds = None if calibration.stale or delta is None else bool(delta > 0)
    return {"holds": holds, "stale": calibration.stale, "reasons": list(calibration.reasons), "rate": rate,
            "expected": base, "delta": delta, "sensitivity": se, "specificity": sp, "labels": calibration.labels,
            "false_positive_floor": 1 - sp}


def calibration_suspect(calibration: Calibration | None) -> dict | None:
    """The verifier version that made the route's calibration stale, as a suspect change."""
    if calibration is None:
        return None
    reason = next((r for r in calibration.reasons if "the route now runs" in r), None)
    if reason is None:
        return None
    return {"dim": "version.verifier", "key": "verifier", "value": calibration.verifier_version, "kind": "system",
            "share_before": None, "share_after": None, "rate_before": None, "rate_after": None, "explained": 0.0,
            "note": f"calibration stale: {reason}"}
