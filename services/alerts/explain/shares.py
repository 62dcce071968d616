"""An alert explains itself: how much of the route's excess failing claims each issue accounts for.

Window W = [start, end] in whole minutes of event time: ``start`` is the alert's estimated onset (or,
without one, ``window`` minutes before it became active), ``end`` is when it resolved, or now.

  N, F     claims and failing claims on the route in W (minute buckets of rate_minute)
  b        the rate the alert expected (its time-of-day expectation; the route's own rate over the baseline
           period B when it has none)
  excess   E = F - b*N: the failing claims beyond what the baseline predicts

Issue i has c_i failing claims on the route in W (its members, by the members' event time). The
baseline's b*N expected failures are split by each issue's share of the route's failing claims in the
baseline period B = [start - baseline_minutes, start): s_i = c_i(B) / F(B). So

  contribution_i = c_i - b*N*s_i
  unclustered    = (F - sum c_i) - b*N*(1 - sum s_i)

and sum(contribution_i) + unclustered = F - b*N = E exactly; an issue's share is contribution_i / E
(shares add up to 1). An issue that failed at the same rate before the alert contributes about
nothing; a new one contributes all its claims; one that shrank contributes a negative amount. Without
failing claims in B the expected failures are split by the shares of W instead (s_i = c_i / F).

With sampled verification (sampling.rate < 1), N, F and c_i are the verified claims, while the alert's b is a
rate of the whole traffic (weighted). b is first brought to the verified sample's scale, b * (F/N) / (F_w/N_w)
with the window's weighted sums F_w, N_w, so that E / F is the traffic's relative excess (r_w - b) / r_w.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from services.core.numbers import plural

TOP = 3  # issues named in notifications; the API and the pages show up to SHOWN
SHOWN = 5


@dataclass(frozen=True)
class Contribution:
    """One issue's part of an alert's excess (``issue_id`` None: failing claims no issue holds)."""

    issue_id: str | None
    failed: int  # failing claims on the route in the window
    expected: float  # what the baseline predicts for it
    contribution: float  # failed - expected
    share: float | None  # contribution / the route's excess; None when there is no excess
    name: str = ""
    claim: dict[str, Any] | None = None  # a representative failing claim: claim_key, text, trace_id, verdict
    runbook_url: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "issue_id": self.issue_id,
            "name": self.name,
            "failed": self.failed,
            "expected": round(self.expected, 2),
            "contribution": round(self.contribution, 2),
            "share": None if self.share is None else round(self.share, 4),
            "claim": self.claim,
            "runbook_url": self.runbook_url,
        }


def _share(contribution: float, excess: float) -> float | None:
    return contribution / excess if excess > 0 else None


def decompose(
    claims: int,
    failed: int,
    baseline: float,
    window_counts: Mapping[str, int],
    baseline_counts: Mapping[str, int],
    baseline_failed: int,
) -> tuple[list[Contribution], Contribution]:
    """Contributions of every issue (largest first) and of the unclustered rest; they add up to
    ``failed - baseline * claims`` exactly (see the module docstring)."""
    expected = baseline * claims
    excess = failed - expected
    ids = sorted(set(window_counts) | set(baseline_counts))
    if baseline_failed > 0:
        base = {i: baseline_counts.get(i, 0) for i in ids}
        denominator = max(baseline_failed, sum(base.values()))
    else:
        base = {i: window_counts.get(i, 0) for i in ids}
        denominator = max(failed, sum(base.values()))
    parts = {i: base[i] / denominator if denominator else 0.0 for i in ids}
    issues = []
    for i in ids:
        c = int(window_counts.get(i, 0))
        e = expected * parts[i]
        issues.append(Contribution(i, c, e, c - e, _share(c - e, excess)))
    issues.sort(key=lambda x: (-x.contribution, -x.failed, x.issue_id))
    rest_failed = failed - sum(x.failed for x in issues)
    rest_expected = expected * (1 - sum(parts.values()))
    rest = excess - sum(x.contribution for x in issues)  # == rest_failed - rest_expected, without rounding drift
    return issues, Contribution(None, rest_failed, rest_expected, rest, _share(rest, excess), name="unclustered")


@dataclass(frozen=True)
class AlertExplanation:
    alert_id: str
    route: str
    start: datetime
    end: datetime
    claims: int
    failed: int
    baseline: float
    issues: tuple[Contribution, ...]  # every issue with claims on the route in the window or baseline, largest first
    unclustered: Contribution
    baseline_start: datetime | None = None
    pending: int = 0  # failing claims of the window no assignment has seen yet (clustering is on its way)

    @property
    def status(self) -> str:
        """Says the explanation is still filling in, while the window's unseen claims would change it: before any
        issue is named, or while they are at least a tenth of the window's failing claims."""
        if self.pending and (not self.top() or self.pending * 10 >= self.failed):
            return f"clustering {self.pending:,} failing claims of this window"
        return ""

    @property
    def expected(self) -> float:
        return self.baseline * self.claims

    @property
    def excess(self) -> float:
        return self.failed - self.expected

    def top(self, n: int = TOP) -> tuple[Contribution, ...]:
        """The ``n`` issues contributing most (positive contributions only)."""
        return tuple(c for c in self.issues if c.contribution > 0)[:n]

    def other_issues(self, n: int = TOP) -> Contribution | None:
        """Every issue not in ``top(n)``, as one part (None when there is none)."""
        shown = {c.issue_id for c in self.top(n)}
        rest = [c for c in self.issues if c.issue_id not in shown]
        if not rest:
            return None
        total = sum(c.contribution for c in rest)
        name = plural(len(rest), "other issue")
        return Contribution(
            None,
            sum(c.failed for c in rest),
            sum(c.expected for c in rest),
            total,
            _share(total, self.excess),
            name=name,
        )

    def parts(self, n: int = SHOWN) -> list[Contribution]:
        """What a reader sees: the top issues, the other issues together, and the unclustered rest. Their
        contributions add up to the excess, and their shares to 1."""
        other = self.other_issues(n)
        return [*self.top(n), *([other] if other else []), self.unclustered]

    def as_dict(self, n: int = SHOWN) -> dict[str, Any]:
        other = self.other_issues(n)
        return {
            "window": [self.start.isoformat(), self.end.isoformat()],
            "baseline_since": self.baseline_start.isoformat() if self.baseline_start else None,
            "claims": self.claims,
            "failed": self.failed,
            "baseline": self.baseline,
            "expected": round(self.expected, 2),
            "excess": round(self.excess, 2),
            "pending": self.pending,
            "status": self.status,
            "issues": [c.as_dict() for c in self.top(n)],
            "other_issues": other.as_dict() if other else None,
            "unclustered": self.unclustered.as_dict(),
        }


@dataclass(frozen=True)
class IssueAlert:
    """An alert one issue contributes to, as the issue page lists it."""

    alert_id: str
    route: str
    state: str
    share: float | None
    contribution: float
    failed: int
    window: tuple[str, str] = field(default=("", ""))
    state_text: str = ""  # as people read it: cleared (never fired), firing·acked (lifecycle.status.state_text)

    def as_dict(self) -> dict[str, Any]:
        return {
            "alert_id": self.alert_id,
            "route": self.route,
            "state": self.state,
            "state_text": self.state_text or self.state,
            "share": None if self.share is None else round(self.share, 4),
            "contribution": round(self.contribution, 2),
            "failed": self.failed,
            "window": list(self.window),
        }
