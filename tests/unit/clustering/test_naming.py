from dataclasses import replace
from datetime import UTC, datetime

import pytest

from clustering.config import DEFAULT_CONFIG
from clustering.embed import HashingEmbedder
from clustering.naming import PHRASES, SEPARATOR, TITLE_MAX_CHARS, Facets, IssueNamer, VersionShares, quoted
from clustering.pipeline import IssuePipeline
from clustering.records import FailingClaim

CLUSTERS = [
    [
        "the refund window for annual plans is 30 days",
        "annual plan refunds take 30 days",
        "refund window of the annual plan",
        "the plan refund window is long",
    ],
    [
        "the parcel arrives on friday by courier",
        "courier delivers the parcel friday",
        "parcel delivery by courier on friday",
        "the plan says the parcel comes friday",
    ],
    [
        "the api rate limit is 500 requests",
        "rate limit of the api per key",
        "api requests above the rate limit",
        "the plan has an api rate limit",
    ],
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
    texts = [
        ["the <num> <date> <amount> refund is due", "<num> <date> refund due <id>"],
        ["the <num> parcel <date> is late", "<num> <date> parcel late <id>"],
    ]
    words = " ".join(" ".join(k) for k in IssueNamer().keywords(texts)).split()
    assert not {"num", "date", "amount", "id", "the", "is"} & set(words)


def test_title_quotes_the_claim_phrased_by_its_verdict_and_the_subtitle_holds_keywords_route_stage():
    namer = IssueNamer()
    members = [{"verdict": "contradicted", "route": "billing-faq", "stage": "claim_generation", "versions": {}}] * 4
    facets = namer.facets(members, VersionShares.of(members))
    named = namer.name(("refund windows",), facets, "Annual plans are refundable for 30 days.", "billing-terms")
    assert named.name == '"annual plans are refundable for <num> days" contradicts billing-terms'
    assert named.subtitle == f"refund windows{SEPARATOR}contradicted{SEPARATOR}billing-faq{SEPARATOR}claim_generation"
    assert namer.name((), facets, "refunds take 30 days").name == '"refunds take <num> days" contradicts its source'
    phrased = {v: namer.name((), replace(facets, verdict=v), "the robot vacuum empties itself").name for v in PHRASES}
    assert phrased == {
        "contradicted": '"the robot vacuum empties itself" contradicts its source',
        "unsupported": '"the robot vacuum empties itself" has no support',
        "stale": '"the robot vacuum empties itself" from a superseded source',
        "overreach": '"the robot vacuum empties itself" overstates its source',
        "no_source": '"the robot vacuum empties itself" with no retrieved source',
    }


def test_a_long_claim_is_cut_at_a_word_boundary_and_volatile_tokens_are_masked():
    text = (
        'Order #48213 placed on 2026-11-02 by jane@example.com ships "today" with express courier '
        "and arrives within 2 days at no cost"
    )
    cut = quoted(text)
    assert cut.endswith("…") and len(cut) <= TITLE_MAX_CHARS + 1
    assert cut == "order <id> placed on <date> by <email> ships 'today' with…"
    assert quoted("  The plan is free.  ") == "the plan is free"


def test_titles_are_distinct_even_when_two_issues_share_their_most_representative_claim():
    namer = IssueNamer()
    facts = [[{"verdict": "unsupported", "route": "a", "stage": None, "versions": {}}] * n for n in (3, 5, 4)]
    reps = [
        [
            {"text": "the plan is free", "verdict": "unsupported"},
            {"text": "plans cost nothing", "verdict": "unsupported"},
        ],
        [{"text": "the plan is free", "verdict": "unsupported"}],
        [{"text": "the plan is free", "verdict": "unsupported"}],
    ]
    texts = [["free plan", "plan free"], ["free trial", "trial free"], ["free tier", "tier free"]]
    names = namer.name_all(texts, facts, [f for c in facts for f in c], reps)
    titles = [n.name for n in names]
    assert len(set(titles)) == 3
    assert titles[1] == '"the plan is free" has no support'  # the largest issue keeps its own claim
    assert titles[0] == '"plans cost nothing" has no support'  # the next exemplar
    assert titles[2].startswith('"the plan is free" has no support (') and "tier" in titles[2]
    assert [n.name for n in namer.name_all(texts, facts, [f for c in facts for f in c], reps)] == titles


def test_a_claim_with_the_issues_verdict_titles_it_before_a_more_central_one_without():
    namer = IssueNamer()
    facts = [[{"verdict": "stale", "route": "a", "stage": None, "versions": {}}] * 4]
    reps = [
        [
            {"text": "the parcel ships monday", "verdict": "unsupported"},
            {"text": "returns are accepted for a year", "verdict": "stale"},
        ]
    ]
    assert namer.name_all([["x y"]], facts, facts[0], reps)[0].name == (
        '"returns are accepted for a year" from a superseded source'
    )


def test_mixed_facets_are_left_out_rather_than_guessed():
    namer = IssueNamer(facet_min_share=0.6)
    members = [
        {"verdict": v, "route": r, "stage": None, "versions": {}}
        for v, r in [("stale", "a"), ("unsupported", "b"), ("stale", "c"), ("overreach", "d")]
    ]
    facets = namer.facets(members, VersionShares.of(members))
    assert facets == Facets(verdict=None, route=None, stage=None, versions=())
    assert namer.name(("x",), facets).name == "x" and namer.name(("x",), facets).subtitle == "x"
    assert namer.name(("x",), facets, "the plan is free").name == '"the plan is free"'


def test_a_version_the_issue_concentrates_on_is_named_one_everyone_shares_is_not():
    namer = IssueNamer()
    inside = [{"verdict": "stale", "route": "r", "stage": "s", "versions": {"corpus": "c-2", "model": "m1"}}] * 5
    outside = [{"verdict": "stale", "route": "r", "stage": "s", "versions": {"corpus": "c-1", "model": "m1"}}] * 15
    facets = namer.facets(inside, VersionShares.of(inside + outside))
    assert facets.versions == (("corpus", "c-2"),)
    assert namer.name(("old policy",), facets).subtitle.endswith("corpus=c-2")


def test_issue_names_from_the_pipeline_contain_their_distinctive_words():
    tails = ["online", "by mail", "in europe", "for teams", "on mobile", "at night", "for students", "in store"]
    claims = []
    for i in range(16):
        claims.append(
            FailingClaim(
                f"r{i}",
                f"annual plans are refundable for {i} weeks {tails[i % 8]}",
                route="billing-faq",
                verdict="contradicted",
                stage="claim_generation",
            )
        )
        claims.append(
            FailingClaim(
                f"k{i}",
                f"the kubernetes operator restarts pods every {i} minutes {tails[(i + 3) % 8]}",
                route="ops-docs",
                verdict="unsupported",
                stage="evidence_admission",
            )
        )
    config = replace(DEFAULT_CONFIG, umap_min_points=10**9)
    run = IssuePipeline.from_config(config, HashingEmbedder()).fit(claims, datetime(2026, 11, 21, tzinfo=UTC))
    names = sorted(c.name for c in run.clusters_)
    assert len(names) == 2 and len(set(names)) == 2
    billing = next(c for c in run.clusters_ if "billing-faq" in c.subtitle)
    ops = next(c for c in run.clusters_ if "ops-docs" in c.subtitle)
    # the title quotes a member claim, normalised, in the verdict's phrasing
    assert billing.name.startswith('"annual plans are refundable for <num> weeks') and billing.name.endswith(
        '" contradicts its source'
    )
    assert ops.name.startswith('"the kubernetes operator restarts pods every <num> minutes') and ops.name.endswith(
        '" has no support'
    )
    # the subtitle keeps what the old names said: keywords, verdict, route, stage
    assert billing.subtitle.endswith(f"{SEPARATOR}contradicted{SEPARATOR}billing-faq{SEPARATOR}claim_generation")
    assert any(w in billing.subtitle.split(SEPARATOR)[0] for w in ("annual", "refundable", "plans", "weeks"))
    assert any(w in ops.subtitle.split(SEPARATOR)[0] for w in ("kubernetes", "operator", "restarts", "pods"))
    assert f"{SEPARATOR}unsupported{SEPARATOR}" in ops.subtitle and "evidence_admission" in ops.subtitle
    again = IssuePipeline.from_config(config, HashingEmbedder()).fit(claims[::-1], datetime(2026, 11, 21, tzinfo=UTC))
    assert sorted(c.name for c in again.clusters_) == names  # deterministic


def test_empty_or_stop_word_only_clusters_get_no_keywords_but_a_name():
    namer = IssueNamer()
    assert namer.keywords([["the the"], ["and or"]]) == [(), ()]
    assert namer.name((), Facets(None, None, None, ())).name == "unnamed failures"
    assert namer.name((), Facets("stale", None, None, ()), "  ").name == "stale"
    assert replace(Facets("stale", None, None, ()), verdict="stale").verdict == "stale"


@pytest.mark.slow
def test_real_text_titles_quote_a_member_claim_and_never_repeat():
    """CLINC150 test split (CC BY 3.0, tests/fixtures/clinc150/LICENSE.md): eight intents, each given a verdict,
    clustered with the real model and UMAP; every issue's title quotes one of its own members."""
    from clustering.embed import CachedEmbedder, MemoryEmbeddingCache, SentenceTransformerEmbedder
    from clustering.naming import quoted
    from tests.unit.clustering.test_cluster_pipeline import load_clinc

    intents = ["translate", "book_flight", "credit_score", "alarm", "recipe", "pto_request", "car_rental", "weather"]
    verdicts = list(PHRASES)
    rows = load_clinc(set(intents), 30)
    claims = [
        FailingClaim(
            r["id"],
            r["text"],
            question=r["text"],
            route=r["domain"],
            verdict=verdicts[intents.index(r["intent"]) % len(verdicts)],
            source_id=f"{r['domain']}-faq",
        )
        for r in rows
    ]
    text_of = {c.id: c.text for c in claims}
    embedder = CachedEmbedder(SentenceTransformerEmbedder(), MemoryEmbeddingCache())
    now = datetime(2026, 11, 21, tzinfo=UTC)
    run = IssuePipeline.from_config(DEFAULT_CONFIG, embedder).fit(claims, now)
    assert len(run.clusters_) >= 6, run.summary()
    titles = [c.name for c in run.clusters_]
    assert len(set(titles)) == len(titles), titles
    for c in run.clusters_:
        quoted_claim = c.name.split('"')[1]
        members = [quoted(text_of[m]) for m in c.member_ids]
        # the quoted claim is one of the members (cut at a word boundary when long), normalised
        assert any(
            m == quoted_claim or (quoted_claim.endswith("…") and m.startswith(quoted_claim[:-1])) for m in members
        ), (c.name, members[:5])
        assert set(quoted_claim.split()) & {w for t in members for w in t.split()}
        assert len(quoted_claim) <= TITLE_MAX_CHARS + 1 and c.subtitle and c.subtitle != c.name
    again = IssuePipeline.from_config(DEFAULT_CONFIG, embedder).fit(claims[::-1], now)
    assert sorted(c.name for c in again.clusters_) == sorted(titles)
    print("\n".join(titles))
