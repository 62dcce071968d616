"""Which production claims go to human review: a daily budget spread over strata (route x verdict x issue)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Protocol

from services.contract.model import FAILED_VERDICTS
from services.core.readmodel import closed

# What the review plan (services/review/planning.py) asks of each route's verdict class: (route, flagged) -> labels.
Needs = Mapping[tuple[str, bool], int]


class SamplingStore(Protocol):
    def stratum_sizes(self, since: datetime, until: datetime) -> dict[str, int]: ...
    def sample(self, since: datetime, until: datetime, quotas: Mapping[str, int], seed: int) -> list[dict]: ...
    def eval_claims(self) -> list[dict]: ...
    def enqueue(self, rows) -> int: ...
    def queued_between(self, since: datetime, until: datetime, origin: str) -> int: ...


def allocate(sizes: Mapping[str, int], budget: int) -> dict[str, int]:
    """Spread ``budget`` as evenly as the strata allow (small strata whole, the rest equal shares), so rare
    verdicts and routes are reviewed too. Deterministic: leftovers go to the largest strata, then by name."""
    quotas = dict.fromkeys(sizes, 0)
    left = max(0, min(budget, sum(sizes.values())))
    open_strata = sorted((s for s, n in sizes.items() if n > 0), key=lambda s: (sizes[s], s))
    while left and open_strata:
        share = left // len(open_strata)
        if share == 0:  # fewer units than strata: one each to the largest
            for s in sorted(open_strata, key=lambda s: (-sizes[s], s))[:left]:
                quotas[s] += 1
            break
        filled = []
        for s in open_strata:
            take = min(share, sizes[s] - quotas[s])
            quotas[s] += take
            left -= take
            if quotas[s] == sizes[s]:
                filled.append(s)
        open_strata = [s for s in open_strata if s not in filled]
    return {s: q for s, q in quotas.items() if q}


def verdict_class(stratum: str) -> tuple[str, bool]:
    """(route, whether the verifier flagged its claims) of a stratum, 'route|verdict|issue' (services/store/review.py
    makes them)."""
    route, verdict, _ = stratum.rsplit("|", 2)
    return route, verdict in FAILED_VERDICTS


def proportional(wanted: Mapping, total: int) -> dict:
    """``total`` split in proportion to ``wanted`` (largest remainders; ties by key, so deterministic)."""
    whole = sum(wanted.values())
    exact = {k: w * total / whole for k, w in wanted.items()}
    out = {k: int(x) for k, x in exact.items()}
    for k in sorted(exact, key=lambda k: (out[k] - exact[k], str(k)))[: total - sum(out.values())]:
        out[k] += 1
    return out


def allocate_by_need(sizes: Mapping[str, int], budget: int, needs: Needs) -> dict[str, int]:
    """Spend the budget where the review plan needs labels: each (route, verdict class) gets what it needs, or,
    when the budget falls short, the same fraction of it as every other (so the routes furthest from the width
    asked get the most); inside a class, ``allocate`` spreads its share over the class's strata. What the plans
    leave goes out as ``allocate`` does."""
    classes: dict[tuple[str, bool], dict[str, int]] = {}
    for stratum, n in sizes.items():
        if n > 0:
            classes.setdefault(verdict_class(stratum), {})[stratum] = n
    budget = max(0, min(budget, sum(sizes.values())))
    wanted = {c: min(needs.get(c, 0), sum(members.values())) for c, members in classes.items()}
    wanted = {c: n for c, n in wanted.items() if n > 0}
    shares = wanted if sum(wanted.values()) <= budget else proportional(wanted, budget)
    quotas: dict[str, int] = {}
    for c, share in shares.items():
        quotas.update(allocate(classes[c], share))
    for stratum, q in allocate(
        {s: n - quotas.get(s, 0) for s, n in sizes.items()}, budget - sum(quotas.values())
    ).items():
        quotas[stratum] = quotas.get(stratum, 0) + q
    return quotas


@closed
@dataclass(frozen=True)
class SampleResult:
    queued: int
    budget_left: int
    strata: dict[str, int]  # stratum -> claims queued now


def day_of(now: datetime) -> tuple[datetime, datetime]:
    start = datetime.combine(now.astimezone(UTC).date(), time(0), UTC)
    return start, start + timedelta(days=1)


class ReviewSampler:
    """Queues claims for review, each with the weight (1 / sampling probability) calibration needs."""

    def __init__(self, store: SamplingStore, daily_budget: int, reviewers_per_claim: int):
        self.store = store
        self.daily_budget = daily_budget
        self.reviewers_per_claim = reviewers_per_claim

    def sample(
        self, since: datetime, until: datetime, now: datetime, seed: int = 0, needs: Needs | None = None
    ) -> SampleResult:
        """Queue claims observed in [since, until) up to what is left of today's (UTC, by ``now``) budget: where
        ``needs`` (the review plan) asks for labels first, else evenly over strata."""
        day_start, day_end = day_of(now)
        left = max(0, self.daily_budget - self.store.queued_between(day_start, day_end, "production"))
        sizes = self.store.stratum_sizes(since, until)
        quotas = allocate_by_need(sizes, left, needs or {})
        rows = self.store.sample(since, until, quotas, seed)
        self.store.enqueue(
            self._queue_row(r, "production", sizes[r["stratum"]] / quotas[r["stratum"]], now) for r in rows
        )
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["stratum"]] = counts.get(r["stratum"], 0) + 1
        return SampleResult(len(rows), left - len(rows), counts)

    def enqueue_eval(self, now: datetime) -> int:
        """Queue the claims of approved eval items (outside the budget). They count for agreement, not for
        calibration: they were chosen, not sampled from traffic."""
        rows = self.store.eval_claims()
        return self.store.enqueue(self._queue_row(r, "eval", 0.0, now) for r in rows)

    def _queue_row(self, row: dict, origin: str, weight: float, now: datetime) -> dict:
        return {
            **{
                k: row[k]
                for k in (
                    "claim_key",
                    "event_id",
                    "claim_idx",
                    "route",
                    "verdict",
                    "issue_id",
                    "verifier_version",
                    "stratum",
                    "observed_at",
                )
            },
            "origin": origin,
            "weight": weight,
            "reviewers": self.reviewers_per_claim,
            "queued_at": now,
        }
