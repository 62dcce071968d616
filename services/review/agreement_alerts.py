"""The verifier's own alert (issue 16): it agrees with people less than it did.

Agreement is the share of settled human labels on which the verifier is on the same side (failed vs
supported). ``AgreementDropTest`` compares the labels settled in the recent window with every older one by a
one-sided two-proportion z-test (pooled variance): it fires when the recent share is lower with p < alpha and
by at least ``min_drop``, each side having ``min_labels``. Labelled claims are independent draws from the
daily stratified sample, whose mix of strata is the same every day, so the unweighted shares compare like
with like. The alert cycle runs ``InstrumentAlerts`` beside the rate alerts (services/alerts/evaluation/cycle.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import NormalDist

from services.alerts.lifecycle.alert import Alert, make_alert_id
from services.alerts.lifecycle.kinds import AGREEMENT_KIND, SERVICE_LABELS
from services.alerts.lifecycle.records import AlertRecords
from services.alerts.lifecycle.transitions import merge, resolve
from services.core.stats import wilson
from services.rates.intervals import Interval
from services.review.labels import ReviewedClaim


@dataclass(frozen=True)
class LabelAgreement:
    route: str
    settled_at: datetime
    verifier_version: str
    agreed: bool


def label_agreements(claims: Iterable[ReviewedClaim]) -> list[LabelAgreement]:
    """Every claim humans settled (production or eval), with whether the verifier was on their side."""
    return [
        LabelAgreement(c.route, c.settled_at, c.verifier_version, c.verifier_failed == c.human_failed)
        for c in claims
        if c.human_failed is not None and c.settled_at is not None  # a settled claim has a review, so a time
    ]


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
    def __init__(
        self, recent: timedelta = timedelta(days=7), alpha: float = 0.01, min_drop: float = 0.05, min_labels: int = 30
    ):
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
        return AgreementDrop(
            p1, len(recent), p2, len(history), z, p_value, p_value < self.alpha and p2 - p1 >= self.min_drop
        )


def version_suspects(
    labels: Sequence[LabelAgreement], since: datetime, min_share_change: float = 0.05
) -> tuple[dict, ...]:
    """Verifier versions whose share of the labelled claims grew from before ``since`` to after it."""

    def shares(group):
        versions = [x.verifier_version for x in group]
        return {v: versions.count(v) / len(versions) for v in set(versions)}

    before = shares([x for x in labels if x.settled_at < since]) if labels else {}
    after = shares([x for x in labels if x.settled_at >= since]) if labels else {}
    grew = sorted(
        (v for v in after if after[v] - before.get(v, 0.0) >= min_share_change),
        key=lambda v: before.get(v, 0.0) - after[v],
    )
    return tuple(
        {
            "dim": "version.verifier",
            "key": "verifier",
            "value": v,
            "kind": "system",
            "share_before": round(before.get(v, 0.0), 6),
            "share_after": round(after[v], 6),
            "rate_before": None,
            "rate_after": None,
            "explained": 0.0,
            "note": "share of the labelled claims the verifier version judged",
        }
        for v in grew
    )


class AgreementWatch:
    """One `verifier_agreement` alert per route: fires (warning) while the drop is significant, resolves after."""

    def __init__(self, test: AgreementDropTest):
        self.test = test

    def step(self, labels: Sequence[LabelAgreement], open_alerts: Mapping[str, Alert], now: datetime) -> list[Alert]:
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
        return Alert(
            alert_id=make_alert_id(route, AGREEMENT_KIND, now),
            route=route,
            kind=AGREEMENT_KIND,
            severity="warning",
            labels=dict(SERVICE_LABELS),
            window=int(self.test.recent / timedelta(minutes=1)),
            pending_since=now,
            starts_at=now,
            rate=found.recent,
            rate_interval=interval(found.recent, found.recent_labels),
            baseline=found.history,
            baseline_interval=interval(found.history, found.history_labels),
            delta=-found.drop,
            claims=found.recent_labels,
            onset=since,
            suspect_changes=version_suspects(labels, since),
            updated_at=now,
            expected=found.history,
            expected_basis=f"agreement on {found.history_labels} earlier labels; one-sided two-proportion "
            f"test p = {found.p_value:.2g}",
        )


class InstrumentAlerts:
    """The alert cycle's hook: at most every ``every``, test agreement per route and record what changed."""

    def __init__(
        self,
        watch: AgreementWatch,
        reviewed: Callable[[], list[ReviewedClaim]],
        alerts: AlertRecords,
        every: timedelta = timedelta(minutes=15),
    ):
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
