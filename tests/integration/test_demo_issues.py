"""The demo's simulated failure families become named issues, each family mostly one issue.

A short stream of the demo scenario (both regressions inside it) goes through the real
pipeline: the bundled MiniLM model, UMAP, HDBSCAN, the merge step, naming and tracking.
``python bench/clustering.py --splits "" --demo 300`` prints the same table for the demo's
full five hours.
"""

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from clustering.config import DEFAULT_CONFIG
from clustering.embed import CachedEmbedder, MemoryEmbeddingCache, SentenceTransformerEmbedder
from clustering.pipeline import IssuePipeline
from clustering.records import FailingClaim
from clustering.track import IssueTracker
from services.client.simulate import FAMILIES, Scenario, generate
from services.client.simulate.coverage import failing_claim_families, family_coverage, format_coverage
from services.contract.decode import validate_event

START = datetime(2026, 11, 21, 9, tzinfo=UTC)
MINUTES = 60


@dataclass
class DemoIssues:
    rows: list  # FamilyCoverage per family
    issues: dict  # issue_id -> IssueRecord
    truth: dict  # claim id -> FamilyTruth
    issue_of: dict  # claim id -> issue_id or None
    claims: int


@pytest.fixture(scope="module")
def demo():
    scenario = Scenario.demo(regression_at=40, corpus_change_at=45)
    sims = [s for s in generate(scenario, START, MINUTES, seed=11) if s.event is not None and not s.duplicate]
    truth = failing_claim_families(sims)
    claims = [c for s in sims for c in FailingClaim.from_event(validate_event(s.event))]
    embedder = CachedEmbedder(
        SentenceTransformerEmbedder(DEFAULT_CONFIG.model, backend=DEFAULT_CONFIG.backend), MemoryEmbeddingCache()
    )
    now = START + timedelta(minutes=MINUTES)
    run = IssuePipeline.from_config(DEFAULT_CONFIG, embedder).fit(claims, now)
    tracker = IssueTracker(DEFAULT_CONFIG)
    issues = {i.issue_id: i for i in tracker.match([], run, now)}
    issue_of = {a["id"]: a["issue_id"] for a in run.assignments(tracker.cluster_issue_ids_)}
    rows = family_coverage(truth, issue_of)
    print(format_coverage(rows, {k: f"{i.name} — {i.subtitle}" for k, i in issues.items()}))  # shown on failure
    return DemoIssues(rows, issues, truth, issue_of, len(claims))


def largest_issue(demo: DemoIssues, family: str, route: str) -> tuple[str | None, float, int]:
    """(issue, its share, claims) for one family's claims on one route."""
    landed = Counter(demo.issue_of.get(k) for k, t in demo.truth.items() if (t.family, t.route) == (family, route))
    total = sum(landed.values())
    landed.pop(None, None)
    issue, n = landed.most_common(1)[0] if landed else (None, 0)
    return issue, n / total, total


def test_every_family_lands_mostly_in_one_issue(demo):
    assert {r.family for r in demo.rows} == set(FAMILIES)
    for r in demo.rows:
        # the family's home route (one failure on one topic) is one issue, not a spray of islands
        assert r.home_top_share >= 0.8, r
        # its other routes are other topics (or, for stale sources, another cause): they may be issues of their own
        assert r.top_share >= 0.8 * r.home_share, r
        assert r.unassigned_share <= 0.1, r


def test_each_failure_on_each_route_is_one_issue(demo):
    groups = Counter((t.family, t.route) for t in demo.truth.values())
    checked = 0
    for (family, route), n in groups.items():
        if n >= 60:
            issue, share, _ = largest_issue(demo, family, route)
            assert share >= 0.8, (family, route, n, share, demo.issues[issue].name if issue else None)
            checked += 1
    assert checked >= len(FAMILIES) + 1  # every home route, and the corpus regression on parcel-status


def test_each_family_issue_is_that_family_and_names_its_route(demo):
    assert len({r.top_issue for r in demo.rows}) == len(demo.rows)  # no two families share their main issue
    for r in demo.rows:
        name, subtitle = demo.issues[r.top_issue].name, demo.issues[r.top_issue].subtitle
        assert r.top_purity >= 0.9, r
        assert r.home_route in subtitle, (r.family, name, subtitle)
        # no prompt changes in the demo: a prompt in a subtitle would be one its route always runs
        assert "prompt=" not in subtitle, subtitle
    titles = [i.name for i in demo.issues.values()]
    assert len(set(titles)) == len(titles)  # titles tell issues apart


def test_the_corpus_regression_is_an_issue_named_after_the_new_corpus(demo):
    # stale sources: a steady trickle on hr-policy, and a burst on parcel-status after its corpus update
    before, _, _ = largest_issue(demo, "stale_sources", "hr-policy")
    after, share, _ = largest_issue(demo, "stale_sources", "parcel-status")
    assert after != before and share >= 0.8
    name, subtitle = demo.issues[after].name, demo.issues[after].subtitle
    assert name.endswith('" from a superseded source'), name
    assert "stale" in subtitle and "parcel-status" in subtitle and "corpus=carrier-docs@2026-11-15" in subtitle, (
        subtitle
    )


def test_the_issue_list_is_short(demo):
    # the families' main issues lead the list: together they hold most failing claims
    assert sum(demo.issues[r.top_issue].size for r in demo.rows) >= 0.6 * demo.claims
    sizeable = [i for i in demo.issues.values() if i.size >= 0.01 * demo.claims]
    assert len(sizeable) <= 3 * len(demo.rows), sorted(i.name for i in sizeable)
