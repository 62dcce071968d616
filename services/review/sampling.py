"""Which production claims go to human review: a daily budget spread over strata (route x verdict x issue, and
the verifier's score band where claims carry scores)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Protocol, TypeVar

from services.contract.model import FAILED_VERDICTS
from services.core.readmodel import closed
from services.core.score_bands import UNSCORED, band_label, parse_stratum_verdict, prior_wrong

K = TypeVar("K")
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


def stratum_parts(stratum: str) -> tuple[str, str, int]:
    """(route, verdict, score band) of a stratum, 'route|verdict|issue' or 'route|verdict#band|issue' when the
    claims are scored (services/store/review.py makes them)."""
    route, verdict, _ = stratum.rsplit("|", 2)
    return (route, *parse_stratum_verdict(verdict))


def score_band(stratum: str) -> str | None:
    """The score band a stratum samples ('0.85-0.95'), None when its claims carry no score."""
    band_no = stratum_parts(stratum)[2]
    return None if band_no == UNSCORED else band_label(band_no)


def verdict_class(stratum: str) -> tuple[str, bool]:
    """(route, whether the verifier flagged its claims) of a stratum."""
    route, verdict, _ = stratum_parts(stratum)
    return route, verdict in FAILED_VERDICTS


def neyman_split(total: int, sizes: Mapping[K, int], spreads: Mapping[K, float]) -> dict[K, int]:
    """``total`` over strata in proportion to size x spread (Neyman), none above its size: a stratum that would
    get more than it has gets all of it and the rest is split again."""
    quotas: dict[K, int] = {}
    open_strata = {s for s, n in sizes.items() if n > 0}
    left = min(total, sum(sizes[s] for s in open_strata))
    while left > 0 and open_strata:
        wanted = {s: sizes[s] * spreads[s] for s in open_strata}
        if sum(wanted.values()) <= 0:
            wanted = {s: float(sizes[s]) for s in open_strata}
        share = proportional(wanted, left)
        full = {s for s in open_strata if share[s] >= sizes[s] - quotas.get(s, 0)}
        if not full:
            for s, q in share.items():
                quotas[s] = quotas.get(s, 0) + q
            break
        for s in full:
            left -= sizes[s] - quotas.get(s, 0)
            quotas[s] = sizes[s]
        open_strata -= full
    return {s: q for s, q in quotas.items() if q}


class LabelledClaim(Protocol):
    """What band learning reads of a settled label (services/review/calibration.py's SettledLabel)."""

    @property
    def route(self) -> str: ...
    @property
    def weight(self) -> float: ...
    @property
    def verifier_failed(self) -> bool: ...
    @property
    def human_failed(self) -> bool: ...
    @property
    def band(self) -> int: ...


# (route, verifier flagged, score band) -> (settled labels, weighted share on which the verdict was wrong)
BandKnowledge = Mapping[tuple[str, bool, int], tuple[int, float]]
MIN_CLASS_SHARE = 0.1  # of a route's scored labels, kept by each verdict class
PRIOR_LABELS = 10.0  # the band's prior (score_bands.prior_wrong) counts as this many labels


def band_knowledge(labels: Iterable[LabelledClaim]) -> dict[tuple[str, bool, int], tuple[int, float]]:
    """What the settled labels say of each route's scored bands: how many there are, how often the verdict was
    wrong."""
    found: dict[tuple[str, bool, int], list[float]] = {}
    for c in labels:
        if c.band != UNSCORED and c.weight > 0:
            cell = found.setdefault((c.route, c.verifier_failed, c.band), [0, 0.0, 0.0])
            cell[0] += 1
            cell[1] += c.weight
            cell[2] += c.weight * (c.human_failed != c.verifier_failed)
    return {k: (int(n), wrong / w) for k, (n, w, wrong) in found.items()}


def band_spread(band_no: int, labels: int, wrong: float) -> float:
    """σ of a label in the band: its labels' wrong share, shrunk towards the band's prior (1 - its middle score)
    by PRIOR_LABELS labels."""
    u = (labels * wrong + PRIOR_LABELS * prior_wrong(band_no)) / (labels + PRIOR_LABELS)
    return math.sqrt(u * (1 - u))


def by_confidence(
    quotas: Mapping[str, int], sizes: Mapping[str, int], known: BandKnowledge | None = None
) -> dict[str, int]:
    """Each route's labels among its scored strata spread again the Neyman way, over (verdict, band) cells: in
    proportion to a cell's claims times the spread of one label there (``band_spread``: learned from the labels
    ``known``, else where the verifier is that sure), so the bands it is least sure of get the most. The route's
    labels ``known`` count towards that split: new ones go where it lacks most. Inside a cell, in proportion to
    its strata's (issues') sizes. Strata without scores keep their quotas."""
    known = known or {}
    by_route: dict[str, dict[tuple[bool, int], dict[str, int]]] = {}
    for stratum, n in sizes.items():
        route, verdict, band_no = stratum_parts(stratum)
        if band_no != UNSCORED and n > 0:
            by_route.setdefault(route, {}).setdefault((verdict in FAILED_VERDICTS, band_no), {})[stratum] = n
    scored = {s for cells in by_route.values() for members in cells.values() for s in members}
    out = {s: q for s, q in quotas.items() if s not in scored}
    for route, cells in by_route.items():
        total = sum(quotas.get(s, 0) for members in cells.values() for s in members)
        size = {c: sum(members.values()) for c, members in cells.items()}
        have = {c: known.get((route, *c), (0, 0.0))[0] for c in cells}
        spread = {c: band_spread(c[1], *known.get((route, *c), (0, 0.0))) for c in cells}
        whole = sum(size[c] * spread[c] for c in cells)
        target = {c: (total + sum(have.values())) * size[c] * spread[c] / whole for c in cells}
        lacking = {c: max(0.0, target[c] - have[c]) / size[c] for c in cells}
        weight = lacking if any(lacking.values()) else spread
        for side, n in class_split(total, size, weight).items():
            for c, m in neyman_split(n, {c: size[c] for c in cells if c[0] == side}, weight).items():
                out.update(neyman_split(m, cells[c], dict.fromkeys(cells[c], 1.0)))
    return out


def class_split(total: int, size: Mapping[tuple[bool, int], int], weight: Mapping) -> dict[bool, int]:
    """``total`` over the two verdict classes as the Neyman split over their cells has it, each class keeping at
    least MIN_CLASS_SHARE of it (or all it has): calibration needs labels of both."""
    sizes = {side: sum(n for c, n in size.items() if c[0] == side) for side in (True, False)}
    wanted = {side: sum(n * weight[c] for c, n in size.items() if c[0] == side) for side in (True, False)}
    split = neyman_split(total, sizes, {side: wanted[side] / sizes[side] if sizes[side] else 0.0 for side in sizes})
    for side in (True, False):
        short = min(sizes[side], math.ceil(MIN_CLASS_SHARE * total)) - split.get(side, 0)
        if short > 0:
            split[side] = split.get(side, 0) + short
            split[not side] -= short
    return split


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
        self,
        since: datetime,
        until: datetime,
        now: datetime,
        seed: int = 0,
        needs: Needs | None = None,
        known: BandKnowledge | None = None,
    ) -> SampleResult:
        """Queue claims observed in [since, until) up to what is left of today's (UTC, by ``now``) budget: where
        ``needs`` (the review plan) asks for labels first, else evenly over strata; inside a route's scored
        strata, where the verifier is least sure (``by_confidence``, learning from the labels ``known``)."""
        day_start, day_end = day_of(now)
        left = max(0, self.daily_budget - self.store.queued_between(day_start, day_end, "production"))
        sizes = self.store.stratum_sizes(since, until)
        quotas = by_confidence(allocate_by_need(sizes, left, needs or {}), sizes, known)
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
                    "score",
                )
            },
            "origin": origin,
            "weight": weight,
            "reviewers": self.reviewers_per_claim,
            "queued_at": now,
        }
