"""How the simulated failure families map onto issues: the simulator's ground truth against
whatever grouping the product made of the same failing claims (bench/clustering.py --demo,
tests/integration/test_demo_issues.py).

An issue should hold one failure mechanism, so each family should land mostly in one issue
(its largest issue's share of the family's claims), and that issue should be mostly that
family (its purity). A family also shows up, a little, on routes other than its home
route, about other topics: those claims may fairly form issues of their own, so the
home route's share of the family is reported next to the largest issue's share.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from services.client.simulate.generate import SimEvent


@dataclass(frozen=True)
class FamilyTruth:
    family: str
    route: str


@dataclass(frozen=True)
class FamilyCoverage:
    family: str
    claims: int
    issues: int  # distinct issues the family's claims landed in
    top_issue: str | None  # the issue holding most of them (None when all are unassigned)
    top_share: float  # share of the family's claims in top_issue
    top_purity: float  # share of top_issue's claims that come from this family
    unassigned_share: float  # claims in no issue (noise)
    home_route: str
    home_share: float  # share of the family's claims on its busiest route
    home_top_share: float  # share of the family's home-route claims in the one issue holding most of them


def failing_claim_families(sims: Iterable[SimEvent]) -> dict[str, FamilyTruth]:
    """Claim key ``{event_id}:{claim_idx}`` (the clustering's claim id) -> family and route, for
    every failing claim of the valid events; redeliveries count once."""
    out: dict[str, FamilyTruth] = {}
    for sim in sims:
        if sim.event is None:
            continue
        event_id, route = sim.event["event_id"], sim.event["route"]
        for idx, family in enumerate(sim.family_by_claim):
            if family is not None:
                out[f"{event_id}:{idx}"] = FamilyTruth(family, route)
    return out


def family_coverage(truth: Mapping[str, FamilyTruth], issue_of: Mapping[str, str | None]) -> list[FamilyCoverage]:
    """One row per family, largest family first. Claims missing from ``issue_of`` count as unassigned."""
    per_family: dict[str, Counter] = {}
    per_issue: dict[str, Counter] = {}
    routes: dict[str, Counter] = {}
    per_route: dict[tuple[str, str], Counter] = {}
    for key, t in truth.items():
        issue = issue_of.get(key)
        per_family.setdefault(t.family, Counter())[issue] += 1
        routes.setdefault(t.family, Counter())[t.route] += 1
        per_route.setdefault((t.family, t.route), Counter())[issue] += 1
        if issue is not None:
            per_issue.setdefault(issue, Counter())[t.family] += 1
    rows = []
    for family, landed in per_family.items():
        total = sum(landed.values())
        assigned = Counter({issue: n for issue, n in landed.items() if issue is not None})
        top, top_n = min(assigned.items(), key=lambda kv: (-kv[1], kv[0])) if assigned else (None, 0)
        home, home_n = min(routes[family].items(), key=lambda kv: (-kv[1], kv[0]))
        at_home = [n for issue, n in per_route[(family, home)].items() if issue is not None]
        rows.append(
            FamilyCoverage(
                family=family,
                claims=total,
                issues=len(assigned),
                top_issue=top,
                top_share=top_n / total,
                top_purity=per_issue[top][family] / sum(per_issue[top].values()) if top is not None else 0.0,
                unassigned_share=landed[None] / total,
                home_route=home,
                home_share=home_n / total,
                home_top_share=max(at_home, default=0) / home_n,
            )
        )
    return sorted(rows, key=lambda r: (-r.claims, r.family))


def format_coverage(rows: list[FamilyCoverage], names: Mapping[str, str] | None = None) -> str:
    """A plain-text table; ``names`` maps issue ids to issue names."""
    names = names or {}
    lines = [
        f"{'family':<20} {'claims':>6} {'issues':>6} {'largest':>7} {'purity':>6} {'noise':>5} "
        f"{'home route':<15} {'home':>5} {'at home':>7}  largest issue"
    ]
    for r in rows:
        lines.append(
            f"{r.family:<20} {r.claims:>6} {r.issues:>6} {r.top_share:>7.2f} {r.top_purity:>6.2f} "
            f"{r.unassigned_share:>5.2f} {r.home_route:<15} {r.home_share:>5.2f} {r.home_top_share:>7.2f}  "
            f"{names.get(r.top_issue, r.top_issue) if r.top_issue else '-'}"
        )
    return "\n".join(lines)
