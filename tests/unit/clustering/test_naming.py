from dataclasses import replace
from datetime import datetime, timezone

from clustering.config import DEFAULT_CONFIG
from clustering.embed import HashingEmbedder
from clustering.naming import SEPARATOR, Facets, IssueNamer, VersionShares
from clustering.pipeline import IssuePipeline
from clustering.records import FailingClaim

CLUSTERS = [
    ["the refund window for annual plans is 30 days", "annual plan refunds take 30 days",
     "refund window of the annual plan", "the plan refund window is long"],
    ["the parcel arrives on friday by courier", "courier delivers the parcel friday",
     "parcel delivery by courier on friday", "the plan says the parcel comes friday"],
    ["the api rate limit is 500 requests", "rate limit of the api per key", "api requests above the rate limit",
     "the plan has an api rate limit"],
]


def vocabulary(texts):
    return {w for t in texts for w in t.split()}


def test_keywords_are_the_words_that_set_a_cluster_apart():
    keywords = IssueNamer(n_keywords=3).keywords(CLUSTERS)
    for mine, words in zip(CLUSTERS, keywords):
        others = set().union(*(vocabulary(c) for c in CLUSTERS if c is not mine))
        flat = set(" ".join(words).split())
        assert flat, words
        assert flat <= vocabulary(mine)
        assert not flat & others, f"{words} uses words other clusters share"
    assert "refund window" in keywords[0] or "refund" in " ".join(keywords[0])


def test_placeholders_and_stop_words_never_become_keywords():
    texts = [["the <num> <date> <amount> refund is due", "<num> <date> refund due <id>"],
             ["the <num> parcel <date> is late", "<num> <date> parcel late <id>"]]
    words = " ".join(" ".join(k) for k in IssueNamer().keywords(texts)).split()
    assert not {"num", "date", "amount", "id", "the", "is"} & set(words)


def test_name_prefixes_the_dominant_verdict_and_appends_route_and_stage():
    namer = IssueNamer()
    members = [{"verdict": "contradicted", "route": "billing-faq", "stage": "claim_generation", "versions": {}}] * 4
    facets = namer.facets(members, VersionShares.of(members))
    name = namer.name(("refund windows",), facets).name
    assert name == f"contradicted refund windows{SEPARATOR}billing-faq{SEPARATOR}claim_generation"


def test_mixed_facets_are_left_out_rather_than_guessed():
    namer = IssueNamer(facet_min_share=0.6)
    members = [{"verdict": v, "route": r, "stage": None, "versions": {}}
               for v, r in [("stale", "a"), ("unsupported", "b"), ("stale", "c"), ("overreach", "d")]]
    facets = namer.facets(members, VersionShares.of(members))
    assert facets == Facets(verdict=None, route=None, stage=None, versions=())
    assert namer.name(("x",), facets).name == "x"


def test_a_version_the_issue_concentrates_on_is_named_one_everyone_shares_is_not():
    namer = IssueNamer()
    inside = [{"verdict": "stale", "route": "r", "stage": "s", "versions": {"corpus": "c-2", "model": "m1"}}] * 5
    outside = [{"verdict": "stale", "route": "r", "stage": "s", "versions": {"corpus": "c-1", "model": "m1"}}] * 15
    facets = namer.facets(inside, VersionShares.of(inside + outside))
    assert facets.versions == (("corpus", "c-2"),)
    assert namer.name(("old policy",), facets).name.endswith("corpus=c-2")


def test_issue_names_from_the_pipeline_contain_their_distinctive_words():
    tails = ["online", "by mail", "in europe", "for teams", "on mobile", "at night", "for students", "in store"]
    claims = []
    for i in range(16):
        claims.append(FailingClaim(f"r{i}", f"annual plans are refundable for {i} weeks {tails[i % 8]}",
                                   route="billing-faq", verdict="contradicted", stage="claim_generation"))
        claims.append(FailingClaim(f"k{i}", f"the kubernetes operator restarts pods every {i} minutes "
                                            f"{tails[(i + 3) % 8]}",
                                   route="ops-docs", verdict="unsupported", stage="evidence_admission"))
    config = replace(DEFAULT_CONFIG, umap_min_points=10**9)
    run = IssuePipeline.from_config(config, HashingEmbedder()).fit(claims, datetime(2026, 11, 21, tzinfo=timezone.utc))
    names = sorted(c.name for c in run.clusters_)
    assert len(names) == 2
    billing = next(n for n in names if "billing-faq" in n)
    ops = next(n for n in names if "ops-docs" in n)
    assert billing.startswith("contradicted ") and billing.endswith("claim_generation")
    assert any(w in billing for w in ("annual", "refundable", "plans", "weeks"))
    assert any(w in ops for w in ("kubernetes", "operator", "restarts", "pods"))
    assert ops.startswith("unsupported ") and "evidence_admission" in ops


def test_empty_or_stop_word_only_clusters_get_no_keywords_but_a_name():
    namer = IssueNamer()
    assert namer.keywords([["the the"], ["and or"]]) == [(), ()]
    assert namer.name((), Facets(None, None, None, ())).name == "unnamed failures"
    assert replace(Facets("stale", None, None, ()), verdict="stale").verdict == "stale"
