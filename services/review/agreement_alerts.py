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

import numpy as np

from services.alerts.lifecycle.alert import Alert, make_alert_id
from services.alerts.lifecycle.kinds import AGREEMENT_KIND, SERVICE_LABELS
from services.alerts.lifecycle.records import AlertRecords
from services.alerts.lifecycle.transitions import merge, resolve
from services.core.stats import wilson
from services.rates.intervals import Interval
from services.review.confidence import auroc
from services.review.labels import ReviewedClaim


@dataclass(frozen=True)
class LabelAgreement:
    route: str
    settled_at: datetime
    verifier_version: str
    agreed: bool
    score: float | None = None  # the verifier's confidence in its verdict


def label_agreements(claims: Iterable[ReviewedClaim]) -> list[LabelAgreement]:
    """Every claim humans settled (production or eval), with whether the verifier was on their side."""
    return [
        LabelAgreement(c.route, c.settled_at, c.verifier_version, c.verifier_failed == c.human_failed, c.score)
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


@dataclass(frozen=True)
class VersionScores:
    """What one verifier version's scored labels on a route say: agreement, mean score, their gap (calibration in
    the large) and the AUROC of score for right vs wrong verdicts, with standard errors."""

    version: str
    labels: int
    agreement: float
    mean_score: float
    gap_se: float
    auroc: float | None
    auroc_se: float | None

    @property
    def gap(self) -> float:
        return self.agreement - self.mean_score

    @classmethod
    def of(cls, version: str, labels: Sequence[LabelAgreement]) -> VersionScores:
        agreed = [float(x.agreed) for x in labels]
        scores = [float(x.score or 0.0) for x in labels]
        n = len(labels)
        gaps = [a - s for a, s in zip(agreed, scores)]
        mean_gap = sum(gaps) / n
        gap_se = math.sqrt(sum((g - mean_gap) ** 2 for g in gaps) / max(n - 1, 1) / n)
        n_right = int(sum(agreed))
        n_wrong = n - n_right
        a = se = None
        if n_right and n_wrong:
            a = float(auroc(np.array(scores), np.array(agreed), np.ones(n)))
            q1, q2 = a / (2 - a), 2 * a * a / (1 + a)  # Hanley and McNeil (1982)
            variance = a * (1 - a) + (n_right - 1) * (q1 - a * a) + (n_wrong - 1) * (q2 - a * a)
            se = math.sqrt(max(variance, 0.0) / (n_right * n_wrong))
        return cls(version, n, sum(agreed) / n, sum(scores) / n, gap_se, a, se)


@dataclass(frozen=True)
class ScoreShift:
    before: VersionScores
    after: VersionScores
    p_value: float
    significant: bool
    what: str  # how the scores stopped meaning what they did

    @property
    def expected(self) -> float:
        """The agreement the new version's scores would promise had they kept the old version's meaning."""
        return min(1.0, max(0.0, self.after.mean_score + self.before.gap))


class ScoreShiftTest:
    """Whether a route's newest verifier version's scores still mean what the version before's did: its labels'
    agreement at their scores (the gap between agreement and mean score, two-sample z) and how well the score
    tells right verdicts from wrong (AUROC, Hanley–McNeil standard errors), each side with ``min_labels``
    scored labels. Significant when the gap moved either way, or the AUROC fell, by ``min_shift`` with p < alpha
    (Bonferroni over the two)."""

    def __init__(self, alpha: float = 0.01, min_shift: float = 0.05, min_labels: int = 30):
        self.alpha = alpha
        self.min_shift = min_shift
        self.min_labels = min_labels

    def test(self, labels: Sequence[LabelAgreement]) -> ScoreShift | None:
        scored = [x for x in labels if x.score is not None]
        if not scored:
            return None
        newest = max(scored, key=lambda x: x.settled_at).verifier_version
        by_version: dict[str, list[LabelAgreement]] = {}
        for x in scored:
            by_version.setdefault(x.verifier_version, []).append(x)
        older = [v for v in by_version if v != newest and len(by_version[v]) >= self.min_labels]
        if len(by_version[newest]) < self.min_labels or not older:
            return None
        previous = max(older, key=lambda v: max(x.settled_at for x in by_version[v]))
        before, after = VersionScores.of(previous, by_version[previous]), VersionScores.of(newest, by_version[newest])
        found = []  # (one-sided p, moved by at least min_shift, what)
        se = math.hypot(before.gap_se, after.gap_se)
        if se > 0:
            z = (after.gap - before.gap) / se
            found.append(
                (
                    2 * NormalDist().cdf(-abs(z)),  # either way: over- or under-confident
                    abs(after.gap - before.gap) >= self.min_shift,
                    f"{before.version}'s labels agreed {100 * before.agreement:.0f}% at a mean score of "
                    f"{before.mean_score:.2f}; {after.version}'s agree {100 * after.agreement:.0f}% at "
                    f"{after.mean_score:.2f}",
                )
            )
        if before.auroc is not None and after.auroc is not None and before.auroc_se and after.auroc_se:
            z = (after.auroc - before.auroc) / math.hypot(before.auroc_se, after.auroc_se)
            found.append(
                (
                    NormalDist().cdf(z),
                    before.auroc - after.auroc >= self.min_shift,
                    f"its score tells right verdicts from wrong with AUROC {after.auroc:.2f} "
                    f"({before.version}: {before.auroc:.2f})",
                )
            )
        if not found:
            return None
        p_value = min(p for p, _, _ in found) * len(found)
        moved = [what for p, big, what in found if big and p * len(found) < self.alpha]
        return ScoreShift(before, after, min(1.0, p_value), bool(moved), "; ".join(moved or [w for _, _, w in found]))


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
    """One `verifier_agreement` alert per route: fires (warning) while agreement has dropped significantly, or
    while the newest verifier version's scores no longer mean what the version before's did; resolves after."""

    def __init__(self, test: AgreementDropTest, shift: ScoreShiftTest | None = None):
        self.test = test
        self.shift = shift or ScoreShiftTest(test.alpha, test.min_drop, test.min_labels)

    def step(self, labels: Sequence[LabelAgreement], open_alerts: Mapping[str, Alert], now: datetime) -> list[Alert]:
        """The alerts whose state changed, or whose figures did, at ``now``."""
        changed = []
        for route in sorted({x.route for x in labels} | set(open_alerts)):
            mine = [x for x in labels if x.route == route]
            found = self.test.test(mine, now)
            previous = open_alerts.get(route)
            if found is not None and found.significant:
                changed.append(merge(previous, self._observed(route, found, mine, now)))
                continue
            shifted = self.shift.test(mine)
            if shifted is not None and shifted.significant:
                changed.append(merge(previous, self._shifted(route, shifted, mine, now)))
            elif previous is not None:
                changed.append(resolve(previous, now))
        return changed

    def _shifted(self, route: str, found: ScoreShift, labels: Sequence[LabelAgreement], now: datetime) -> Alert:
        after, before = found.after, found.before
        spread = Z95 * before.gap_se
        return _alert(
            route,
            now,
            min(x.settled_at for x in labels if x.verifier_version == after.version),
            (after.agreement, after.labels),
            (found.expected, Interval(max(0.0, found.expected - spread), min(1.0, found.expected + spread))),
            labels,
            f"verifier {after.version}'s scores no longer mean what {before.version}'s did: {found.what} "
            f"(p = {found.p_value:.2g}); its calibrated rates lean on a score it may not have earned",
        )

    def _observed(self, route: str, found: AgreementDrop, labels: Sequence[LabelAgreement], now: datetime) -> Alert:
        return _alert(
            route,
            now,
            now - self.test.recent,
            (found.recent, found.recent_labels),
            (found.history, _wilson(found.history, found.history_labels)),
            labels,
            f"agreement on {found.history_labels} earlier labels; one-sided two-proportion "
            f"test p = {found.p_value:.2g}",
        )


Z95 = NormalDist().inv_cdf(0.975)


def _wilson(share: float, n: int) -> Interval:
    return Interval(*(float(x) for x in wilson(share, n, Z95)))


def _alert(
    route: str,
    now: datetime,
    since: datetime,
    agreement: tuple[float, int],
    expected: tuple[float, Interval],
    labels: Sequence[LabelAgreement],
    basis: str,
) -> Alert:
    """A route's `verifier_agreement` alert: the labels' agreement since ``since`` (share, labels) against what
    was expected of it."""
    (rate, n), (baseline, baseline_interval) = agreement, expected
    return Alert(
        alert_id=make_alert_id(route, AGREEMENT_KIND, now),
        route=route,
        kind=AGREEMENT_KIND,
        severity="warning",
        labels=dict(SERVICE_LABELS),
        window=int((now - since) / timedelta(minutes=1)),
        pending_since=now,
        starts_at=now,
        rate=rate,
        rate_interval=_wilson(rate, n),
        baseline=baseline,
        baseline_interval=baseline_interval,
        delta=rate - baseline,
        claims=n,
        onset=since,
        suspect_changes=version_suspects(labels, since),
        updated_at=now,
        expected=baseline,
        expected_basis=basis,
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
