import json
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from sklearn.metrics import normalized_mutual_info_score

from clustering.cluster import NOISE
from clustering.config import DEFAULT_CONFIG
from clustering.embed import CachedEmbedder, HashingEmbedder, MemoryEmbeddingCache, SentenceTransformerEmbedder
from clustering.pipeline import STAGES, IssuePipeline
from clustering.records import FailingClaim
from tests.support.paths import FIXTURES

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
SMALL = replace(DEFAULT_CONFIG, umap_min_points=10**9)  # no UMAP where the test is not about it
CLINC = FIXTURES / "clinc150" / "clinc150-test.jsonl"


def fit(claims, config=SMALL, embedder=None, progress=None):
    return IssuePipeline.from_config(config, embedder or HashingEmbedder(), progress).fit(claims, NOW)


def refund_and_parcel(n=20):
    refund = [
        FailingClaim(
            f"r{i:02d}",
            f"annual plans can be refunded within {i} days of purchase "
            f"{['online', 'by phone', 'in store', 'for members'][i % 4]}",
        )
        for i in range(n)
    ]
    parcel = [
        FailingClaim(
            f"p{i:02d}",
            f"the courier delivers parcel {i}-77 on friday {['morning', 'evening', 'at noon', 'late'][i % 4]}",
        )
        for i in range(n)
    ]
    return refund + parcel


def test_empty_input_gives_an_empty_result_and_says_so():
    run = fit([])
    assert run.clusters_ == [] and run.assignments() == []
    assert run.summary()["claims"] == 0
    assert any("no failing claims" in note for note in run.notes)


def test_a_single_claim_stays_unassigned_with_a_clear_note():
    run = fit([FailingClaim("only", "the refund window is 30 days")])
    assert run.assignments() == [{"id": "only", "issue_id": None, "probability": 0.0}]
    assert any("only 1 embeddable claim" in note and "at least" in note for note in run.notes)


def test_identical_claims_form_one_issue():
    claims = [FailingClaim(f"c{i}", f"The refund window is {i} days.") for i in range(12)]  # equal once normalised
    run = fit(claims)
    assert len(run.clusters_) == 1 and run.clusters_[0].size == 12
    assert any("identical after normalisation" in note for note in run.notes)


def test_a_few_identical_claims_below_the_minimum_stay_noise():
    run = fit([FailingClaim(f"c{i}", "same text") for i in range(3)])
    assert run.clusters_ == [] and run.count("noise") == 3


def test_claims_without_text_are_kept_and_counted_not_dropped():
    claims = refund_and_parcel() + [FailingClaim("blank", "   "), FailingClaim("none", None)]
    run = fit(claims)
    lines = {a["id"]: a for a in run.assignments()}
    assert set(lines) == {c.id for c in claims}
    assert lines["blank"]["issue_id"] is None and lines["none"]["issue_id"] is None
    summary = run.summary()
    assert summary["unembedded"] == 2
    assert summary["clustered"] + summary["attached"] + summary["noise"] + summary["unembedded"] == len(claims)
    assert any("not embedded" in note for note in run.notes)


def test_huge_and_non_english_texts_get_notes_that_say_what_to_do():
    claims = refund_and_parcel() + [
        FailingClaim("huge", "refund " * 2000),
        FailingClaim("ru", "Годовой план можно вернуть в течение тридцати дней после покупки"),
    ]
    run = fit(claims)
    notes = " ".join(run.notes)
    assert "truncated" in notes and "Send atomic claims" in notes
    assert "not english" in notes and "multilingual" in notes
    assert {p.claim_id for p in run.problems} == {"huge", "ru"}


def test_repeated_ids_keep_the_first_and_say_so():
    claims = refund_and_parcel() + [FailingClaim("r00", "something else entirely")]
    run = fit(claims)
    assert len(run.claims) == 40
    assert any("repeated an id" in note for note in run.notes)


def test_progress_reports_every_stage_and_timings_are_recorded():
    seen = []
    run = fit(refund_and_parcel(), progress=lambda stage, done, total, seconds: seen.append((stage, done, total)))
    finished = [stage for stage, done, total in seen if done == total]
    assert [s for s in STAGES if s in finished] == list(STAGES)
    assert set(run.timings_) == set(STAGES) and all(t >= 0 for t in run.timings_.values())


def test_two_families_become_two_named_issues_with_exemplars():
    run = fit(refund_and_parcel())
    assert len(run.clusters_) == 2
    refund_words = {"annual", "plans", "refunded", "purchase", "days"}
    parcel_words = {"courier", "delivers", "parcel", "friday"}
    for c in run.clusters_:
        words = set(" ".join(c.keywords).split())
        assert words and (words <= refund_words or words <= parcel_words), c.name
        assert all(w in c.subtitle for w in words)
        assert c.name.startswith('"') and set(c.name.split()) & (refund_words | parcel_words), c.name
    assert {frozenset(" ".join(c.keywords).split()) <= refund_words for c in run.clusters_} == {True, False}
    for c in run.clusters_:
        assert 1 <= len(c.exemplar_ids) <= 5 and set(c.exemplar_ids) <= set(c.member_ids)
        assert len(set(c.exemplar_ids)) == len(c.exemplar_ids)


def test_a_fit_sample_smaller_than_the_input_still_labels_everyone():
    run = fit(refund_and_parcel(), config=replace(SMALL, fit_sample_size=24))
    assert any("deterministic sample of 24" in note for note in run.notes)
    assert run.count("attached") >= 16 and run.count("noise") + run.count("unembedded") == 0


def test_result_does_not_depend_on_arrival_order():
    claims = refund_and_parcel()
    a, b = fit(claims), fit(claims[::-1])
    assert a.assignments() == b.assignments()


def load_clinc(intents, per_intent):
    rows = [json.loads(line) for line in CLINC.read_text().splitlines()]
    picked = [r for r in rows if r["split"] == "test" and r["intent"] in intents]
    kept, count = [], Counter()
    for r in picked:
        if count[r["intent"]] < per_intent:
            kept.append(r)
            count[r["intent"]] += 1
    return kept


@pytest.mark.slow
def test_real_model_and_umap_recover_intents():
    rows = load_clinc({"translate", "book_flight", "credit_score", "alarm", "recipe"}, 30)
    claims = [FailingClaim(r["id"], r["text"], question=r["text"], route=r["domain"]) for r in rows]
    embedder = CachedEmbedder(SentenceTransformerEmbedder(), MemoryEmbeddingCache())
    run = fit(claims, config=DEFAULT_CONFIG, embedder=embedder)
    assert run.reducer_.skipped_ is False  # 150 claims: UMAP ran
    labels = {a["id"]: a["issue_id"] or "noise" for a in run.assignments()}
    truth = {r["id"]: r["intent"] for r in rows}
    ids = sorted(truth)
    nmi = normalized_mutual_info_score([truth[i] for i in ids], [labels[i] for i in ids])
    assert nmi >= 0.8, run.summary()
    assert run.summary()["noise_fraction"] <= 0.1
    # a second fit reuses every cached vector
    misses = embedder.misses_
    again = fit(claims, config=DEFAULT_CONFIG, embedder=embedder)
    assert embedder.misses_ == misses and again.assignments() == run.assignments()


def test_noise_label_is_the_constant():
    run = fit([FailingClaim("a", "x y z")])
    assert run.labels_.tolist() == [NOISE] and np.all(run.probabilities_ == 0)


@pytest.mark.parametrize("n", [2, 5])
def test_tiny_inputs_do_not_crash(n):
    run = fit([FailingClaim(f"c{i}", f"claim number {i} about topic {'ab'[i % 2]}") for i in range(n)])
    assert len(run.assignments()) == n


# Sentry-style: a named configuration is never edited in place. Changing a parameter of
# a named configuration must fail here; add a new dated configuration instead.
PINNED = {"clustering@2026-11-21": "f482b26acebb5b14", "clustering@2026-11-21b": "e2ce71889c85d2b6"}


def test_named_configurations_are_pinned():
    from clustering.config import CONFIGS

    assert {name: config.fingerprint for name, config in CONFIGS.items()} == PINNED


def test_other_model_or_fields_make_a_new_named_configuration():
    from clustering.config import config_from_settings, get_config

    assert config_from_settings() is get_config("clustering@2026-11-21b") is DEFAULT_CONFIG
    assert config_from_settings(name="clustering@2026-11-21") is get_config("clustering@2026-11-21")
    other = config_from_settings(model="/models/multilingual", fields=["claim"])
    assert other.name.startswith("clustering@2026-11-21b+") and other.fields == ("claim",)
    assert other.fingerprint != DEFAULT_CONFIG.fingerprint
    with pytest.raises(ValueError, match="already exists with other parameters"):
        DEFAULT_CONFIG.with_overrides("clustering@2026-11-21", min_samples=9)
    with pytest.raises(KeyError, match="unknown clustering configuration"):
        get_config("clustering@1999-01-01")


def test_rich_progress_shows_each_stage_with_its_time():
    import io

    from rich.console import Console

    from clustering.progress import RichStageProgress

    out = io.StringIO()
    with RichStageProgress(Console(file=out, width=120, force_terminal=False)) as progress:
        fit(refund_and_parcel(), progress=progress)
    text = out.getvalue()
    assert all(stage in text for stage in STAGES)
    assert set(progress.timings) <= set(STAGES) and "cluster" in progress.timings


def test_the_umap_neighbourhood_grows_with_the_input():
    from clustering.reduce import UmapReducer

    reducer = UmapReducer(15, neighbors_fraction=0.002)
    assert [reducer.neighbors_for(n) for n in (100, 4500, 7500, 15000)] == [15, 15, 15, 30]
    assert UmapReducer(15).neighbors_for(15000) == 15  # the first configuration: fixed


def test_a_name_lists_the_version_an_issue_concentrates_on_not_every_version_its_route_runs():
    from clustering.naming import IssueNamer, VersionShares

    def claims(route, n, **versions):
        return [{"verdict": "stale", "route": route, "stage": "evidence_admission", "versions": versions}] * n

    before = claims("parcel", 60, corpus="docs@1", prompt="p7")
    after = claims("parcel", 20, corpus="docs@2", prompt="p7")
    other_route = claims("hr", 200, corpus="handbook@1", prompt="hr3")
    shares = VersionShares.of(before + after + other_route)
    namer = IssueNamer()
    # against all claims, prompt=p7 (a fifth of them) would look concentrated; against parcel's own, it is not
    assert namer.facets(after, shares).versions == (("corpus", "docs@2"),)
    assert namer.facets(other_route, shares).versions == ()
    assert namer.facets(before, shares).versions == ()  # docs@1 is 75% of parcel: lift 1.33 < 1.5
