"""The traffic simulator: deterministic, shaped like real traffic, and honest about its ground truth."""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import random
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from difflib import SequenceMatcher

import numpy as np
import orjson
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

from services.client.simulate import (
    BAD_KINDS,
    FAMILIES,
    Regression,
    Route,
    Scenario,
    ScenarioError,
    expected_counts,
    generate,
    write_jsonl,
)
from services.client.simulate.corrupt import corrupt
from services.contract.decode import Decoder, Rejection
from services.contract.model import VERDICT_ALIASES, VerdictEvent
from tests.support.paths import ROOT

START = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MINUTES = 60
AT = 30  # both demo regressions start here in the shared sample


@pytest.fixture(scope="module")
def sample():
    scenario = Scenario.demo(regression_at=AT, corpus_change_at=AT)
    return scenario, list(generate(scenario, START, MINUTES, seed=5))


@pytest.fixture(scope="module")
def valid(sample):
    return [s for s in sample[1] if s.bad_rule is None and not s.duplicate]


def event_minute(event: dict) -> int:
    observed = datetime.fromisoformat(event["observed_at"])
    return int((observed - START).total_seconds() // 60)


def canonical(verdict: str) -> str:
    return VERDICT_ALIASES[verdict.lower()]  # the product's table, to cross-check the simulator's own


def failure_rate(events: list[dict]) -> tuple[float, float]:
    """Claim-level rate and its answer-level (cluster-robust) standard error."""
    checkable = np.array([sum(canonical(c["verdict"]) != "trivial" for c in e["claims"]) for e in events], float)
    failed = np.array(
        [sum(canonical(c["verdict"]) not in ("trivial", "supported") for c in e["claims"]) for e in events], float
    )
    rate = failed.sum() / checkable.sum()
    se = math.sqrt(((failed - rate * checkable) ** 2).sum()) / checkable.sum()
    return rate, se


# --- determinism and streaming ---------------------------------------------------------------


def test_same_seed_gives_identical_bytes_and_another_seed_does_not():
    scenario = Scenario.demo()
    first = [s.raw for s in generate(scenario, START, 4, seed=1)]
    again = [s.raw for s in generate(scenario, START, 4, seed=1)]
    other = [s.raw for s in generate(scenario, START, 4, seed=2)]
    assert first == again
    assert len(first) > 500
    assert first != other
    assert not set(first) & set(other)  # ids differ too, so two runs never collide in one store


def test_same_seed_gives_the_same_bytes_in_another_process():
    script = (
        "import hashlib, sys; from datetime import datetime, timezone; "
        "from services.client.simulate import Scenario, generate; h = hashlib.sha256(); "
        "[h.update(s.raw) for s in generate(Scenario.demo(), datetime(2026, 11, 21, 12, tzinfo=timezone.utc), 3, "
        "seed=1)]; "
        "print(h.hexdigest())"
    )
    digest = hashlib.sha256(b"".join(s.raw for s in generate(Scenario.demo(), START, 3, seed=1))).hexdigest()
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    assert out.stdout.strip() == digest


def test_generation_is_lazy_so_long_runs_stream():
    stream = generate(Scenario.demo(), START, 10**7, seed=1)  # 19 years: only possible lazily
    head = list(itertools.islice(stream, 200))
    assert len(head) == 200 and {s.minute for s in head} == {0}


def test_bad_arguments_are_refused_up_front_naming_the_argument():
    with pytest.raises(ScenarioError, match="start"):
        generate(Scenario.demo(), datetime(2026, 11, 21), 5)
    with pytest.raises(ScenarioError, match="minutes"):
        generate(Scenario.demo(), START, -1)
    with pytest.raises(ScenarioError, match=r"routes\[0\]\.base_rate"):
        Scenario(routes=(Route("a", 10, 1.5, {"sycophancy": 1}, {}),))
    with pytest.raises(ScenarioError, match=r"routes\[0\]\.name"):
        Scenario(routes=(Route("has space", 10, 0.1, {"sycophancy": 1}, {}),))
    with pytest.raises(ScenarioError, match=r"regressions\[0\]\.route"):
        Scenario.demo().replace(regressions=(Regression("nope", 5, {"model": "m2"}),))
    with pytest.raises(ScenarioError, match="families"):
        Scenario(routes=(Route("a", 10, 0.1, {"made_up": 1}, {}),))


# --- traffic shape ----------------------------------------------------------------------------


def test_route_volumes_follow_the_configured_ratio(sample, valid):
    scenario, _ = sample
    counts = Counter(s.event["route"] for s in valid)
    total_configured = sum(r.per_minute for r in scenario.routes)
    for route in scenario.routes:
        share = counts[route.name] / len(valid)
        assert share == pytest.approx(route.per_minute / total_configured, rel=0.1), route.name


@pytest.mark.slow
def test_volume_is_diurnal_with_the_peak_at_the_configured_hour():
    scenario = Scenario(
        routes=(Route("one", 6, 0.05, {"sycophancy": 1}, {"model": "m"}),),
        diurnal_amplitude=0.5,
        peak_hour=14,
        bad_fraction=0,
        duplicate_fraction=0,
        late_fraction=0,
    )
    day = datetime(2026, 11, 21, tzinfo=UTC)
    per_hour = Counter(
        datetime.fromisoformat(s.event["observed_at"]).astimezone(UTC).hour
        for s in generate(scenario, day, 24 * 60, seed=3)
    )
    assert per_hour.most_common(1)[0][0] in range(12, 17)
    assert per_hour[14] / per_hour[2] == pytest.approx(3.0, rel=0.3)  # (1 + a) / (1 - a)
    expected = [6 * 60 * (1 + 0.5 * math.cos(2 * math.pi * (h + 0.5 - 14) / 24)) for h in range(24)]
    assert np.corrcoef(expected, [per_hour[h] for h in range(24)])[0, 1] > 0.97


def test_answers_carry_one_to_eight_claims_and_abstentions_carry_none(sample, valid):
    scenario, _ = sample
    for route in scenario.routes:
        answered = [
            len(s.event["claims"])
            for s in valid
            if s.event["route"] == route.name and s.event["answer"]["action"] != "abstained"
        ]
        assert min(answered) == 1 and max(answered) <= 8
        assert np.mean(answered) == pytest.approx(route.mean_claims, rel=0.08), route.name
    assert max(len(s.event["claims"]) for s in valid) == 8
    abstained = [s for s in valid if s.event["answer"]["action"] == "abstained"]
    assert abstained and all(s.event["claims"] == [] for s in abstained)


def test_abstentions_include_correct_ones_and_over_refusals(sample, valid):
    scenario, _ = sample
    unanswerable = [s for s in valid if s.event["query"]["answerable"] is False]
    answerable = [s for s in valid if s.event["query"]["answerable"] is True]
    correct = sum(s.event["answer"]["action"] == "abstained" for s in unanswerable) / len(unanswerable)
    over = sum(s.event["answer"]["action"] == "abstained" for s in answerable) / len(answerable)
    assert correct == pytest.approx(scenario.correct_abstention, abs=0.03)
    assert over == pytest.approx(scenario.over_refusal, abs=0.006)
    assert all(s.event["query"]["query_type"] == "unanswerable" for s in unanswerable)


def test_claims_fail_together_within_an_answer(valid):
    # Beta-binomial propensity: answers with one failure hold more further failures than independence gives.
    answers = [
        [canonical(c["verdict"]) for c in s.event["claims"]]
        for s in valid
        if s.event["route"] == "parcel-status"
        and len(s.event["claims"]) >= 2
        and s.event["query"]["answerable"]
        and event_minute(s.event) < AT
    ]
    rate = np.mean([v not in ("supported", "trivial") for a in answers for v in a if v != "trivial"])
    pairs = [(a[0], a[1]) for a in answers if "trivial" not in a[:2]]
    both = np.mean([x != "supported" and y != "supported" for x, y in pairs])
    assert both > 2 * rate**2


# --- ground truth, families and wording -------------------------------------------------------


def test_every_failing_claim_records_its_family_and_nothing_else_does(valid):
    seen = Counter()
    for s in valid:
        claims = s.event["claims"]
        assert len(s.family_by_claim) == len(claims)
        for claim, family in zip(claims, s.family_by_claim):
            failed = canonical(claim["verdict"]) not in ("supported", "trivial")
            assert failed == (family is not None)
            seen[family] += 1
    assert set(FAMILIES) <= set(seen)


def test_family_evidence_and_signals_match_what_each_family_means(valid):
    checked = Counter()
    for s in valid:
        event = s.event
        if "evidence" not in event:
            continue  # a count-only producer
        chunks = {e["chunk_id"]: e for e in event["evidence"]}
        sources = {e.get("source_id") for e in event["evidence"]}
        for claim, family in zip(event["claims"], s.family_by_claim):
            verdict = canonical(claim["verdict"])
            if family == "stale_sources":
                assert verdict == "stale" and chunks[claim["chunk_id"]]["version"] < "2026"
            elif family == "cherry_picked":
                assert claim["chunk_id"] in event["signals"]["cherry_pick"]
                assert chunks[claim["chunk_id"]]["used"] is False and verdict == "contradicted"
            elif family == "sycophancy":
                assert event["signals"]["premise_similarity"] >= 0.85 and event["signals"]["support_delta"] >= 0.3
            elif family == "phantom_citation":
                assert verdict == "no_source" and claim["source_id"] not in sources and "chunk_id" not in claim
            elif family == "evidence_admission":
                assert event["first_failed_stage"] == "evidence_admission"
            elif family == "unstable_generation":
                assert event["signals"]["sample_disagreement"] >= 0.55
            elif family == "dropped_qualifiers":
                assert verdict == "overreach"
            elif family == "invented_numbers":
                assert verdict in ("unsupported", "contradicted") and claim["claim_type"] == "numeric"
            if family:
                checked[family] += 1
        if not any(s.family_by_claim):
            assert event["first_failed_stage"] == "passed"
        for chunk in event["evidence"]:
            for claim in event["claims"]:
                if claim.get("chunk_id") == chunk["chunk_id"] and claim.get("span"):
                    assert claim["span"] in chunk["text"]
    assert set(checked) == set(FAMILIES)


def test_families_have_distinct_wording_a_tfidf_classifier_recovers_them(valid):
    texts, labels = [], []
    for s in valid:
        for claim, family in zip(s.event["claims"], s.family_by_claim):
            if family and "text" in claim:
                texts.append(claim["text"])
                labels.append(family)
    assert len(texts) > 2000
    train, test = slice(0, None, 2), slice(1, None, 2)
    vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), token_pattern=r"[A-Za-z']+")
    x = vectorizer.fit_transform(texts)
    y = np.array(labels)
    # Nearest centroid by cosine similarity, as embedding-based clustering compares texts.
    centroids = normalize(np.vstack([np.asarray(x[train][y[train] == f].mean(axis=0)) for f in FAMILIES]))
    predicted = np.array(FAMILIES)[(x[test] @ centroids.T).argmax(axis=1)]
    accuracy = (predicted == y[test]).mean()
    assert accuracy >= 0.9
    per_family = {f: (predicted[y[test] == f] == f).mean() for f in FAMILIES}
    assert min(per_family.values()) >= 0.85, per_family


def test_questions_are_varied_and_sycophantic_questions_carry_the_premise(valid):
    questions = [s.event["query"]["text"] for s in valid if "text" in s.event["query"]]
    assert len(set(questions)) > 1000
    checked = 0
    for s in valid:
        families = [f for f in s.family_by_claim if f]
        if families and families[0] == "sycophancy" and s.event["query"]["answerable"] and "text" in s.event["query"]:
            claim = s.event["claims"][s.family_by_claim.index("sycophancy")]["text"]
            question = s.event["query"]["text"]
            common = SequenceMatcher(None, claim, question).find_longest_match(0, len(claim), 0, len(question))
            assert common.size >= 20, (claim, question)  # the answer restates the user's premise
            checked += 1
    assert checked > 20


def test_some_producers_send_verdict_aliases(valid):
    sent = Counter(c["verdict"] for s in valid for c in s.event["claims"])
    assert {"unlinked", "REFUTED", "entailment"} & set(sent)
    aliased = sum(
        n
        for v, n in sent.items()
        if v not in ("supported", "unsupported", "contradicted", "overreach", "stale", "no_source", "trivial")
    )
    assert 0.05 < aliased / sum(sent.values()) < 0.15


# --- the contract: valid events decode, bad ones are rejected for the labelled rule ----------


def test_valid_events_all_decode_and_keys_are_the_route(valid):
    decoder = Decoder()
    for s in valid:
        result = decoder.decode(s.raw)
        assert isinstance(result, VerdictEvent), getattr(result, "reason", None)
        assert s.key == result.route.encode()
        assert b"\n" not in s.raw


def test_bad_fraction_is_as_requested_and_each_label_is_the_decoders_rule(sample):
    scenario, events = sample
    bad = [s for s in events if s.bad_rule]
    assert len(bad) / len(events) == pytest.approx(scenario.bad_fraction, abs=0.006)
    assert {s.bad_rule for s in bad} == set(BAD_KINDS)
    decoder = Decoder()
    for s in bad:
        result = decoder.decode(s.raw)
        assert isinstance(result, Rejection) and result.rule == s.bad_rule, (s.bad_rule, result)
        assert s.event is None and s.family_by_claim == ()
        assert b"\n" not in s.raw


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_every_variant_of_a_bad_kind_gets_the_decoders_rule(kind, valid):
    decoder = Decoder()
    sources = valid[:: max(1, len(valid) // (12 if kind == "too_large" else 300))]
    for i, source in enumerate(sources):
        raw, key = corrupt(kind, orjson.loads(source.raw), random.Random(i), (1 << 20) + 256)
        result = decoder.decode(raw)
        assert isinstance(result, Rejection) and result.rule == kind, (kind, result, raw[:200])
        if kind == "too_large":
            assert len(raw) > 1 << 20
        if kind == "not_utf8":
            with pytest.raises(UnicodeDecodeError):
                raw.decode("utf-8")


def test_claims_not_a_list_is_labelled_wrong_type():
    event = next(s for s in generate(Scenario.demo(), START, 1, seed=9) if s.event and s.event["claims"]).event
    for value in ({"c1": event["claims"][0]}, "supported,unlinked", 3):
        broken = dict(event, claims=value)
        assert Decoder().decode(orjson.dumps(broken)).rule == "wrong_type"


# --- delivery: duplicates, late events, timestamps --------------------------------------------


def test_duplicates_resend_the_same_bytes_and_are_counted_once(sample):
    scenario, events = sample
    first_raw = {}
    duplicates = 0
    for s in events:
        if s.bad_rule:
            continue
        if s.duplicate:
            duplicates += 1
            assert first_raw.get(s.event["event_id"]) == s.raw  # sent after the original, byte for byte
        else:
            assert s.event["event_id"] not in first_raw
            first_raw[s.event["event_id"]] = s.raw
    assert duplicates / len(first_raw) == pytest.approx(scenario.duplicate_fraction, rel=0.35)


def test_minutes_are_in_event_time_order_except_late_events_within_a_few_minutes(sample):
    scenario, events = sample
    by_minute = defaultdict(list)
    for s in events:
        by_minute[s.minute].append(s)
    assert sorted(by_minute) == list(range(MINUTES))
    late = 0
    for minute, batch in by_minute.items():
        on_time = [
            datetime.fromisoformat(s.event["observed_at"]) for s in batch if s.event and not s.late and not s.duplicate
        ]
        assert on_time == sorted(on_time)
        assert all(event_minute(s.event) == minute for s in batch if s.event and not s.late and not s.duplicate)
        for s in batch:
            if s.late and not s.duplicate:
                late += 1
                assert 1 <= minute - event_minute(s.event) <= scenario.max_late_minutes
    assert late > 0


def test_timestamps_carry_offsets_in_several_forms(valid):
    stamps = [s.event["observed_at"] for s in valid]
    forms = Counter(stamp[-6:] if stamp[-6] in "+-" else stamp[-1] for stamp in stamps)
    assert forms["Z"] > 0 and forms["+01:00"] > 0
    assert all(datetime.fromisoformat(t).utcoffset() is not None for t in stamps)
    assert len({s.event["event_id"] for s in valid}) == len(valid)


# --- regressions -------------------------------------------------------------------------------


def test_model_regression_raises_only_its_route_and_only_on_the_new_version(sample, valid):
    scenario, _ = sample
    for route in scenario.routes:
        events = [s.event for s in valid if s.event["route"] == route.name]
        before = [e for e in events if event_minute(e) < AT]
        after = [e for e in events if event_minute(e) >= AT]
        (r0, se0), (r1, se1) = failure_rate(before), failure_rate(after)
        se = math.hypot(se0, se1)
        if route.name == "billing-faq":
            assert r1 - r0 == pytest.approx(0.06, abs=max(0.02, 3 * se))
            assert {e["versions"]["model"] for e in before} == {"gen-2026-10"}
            assert {e["versions"]["model"] for e in after} == {"gen-2026-11"}
        elif route.name == "parcel-status":
            assert r1 - r0 == pytest.approx(0.05, abs=max(0.015, 3 * se))
            assert {e["versions"]["corpus"] for e in after} == {"carrier-docs@2026-11-15"}
            assert {e["versions"]["model"] for e in after} == {"gen-2026-10"}
        else:
            assert abs(r1 - r0) < 4 * se, route.name
            assert {tuple(sorted(e["versions"].items())) for e in events} == {tuple(sorted(route.versions.items()))}


def test_regression_failures_come_from_the_regressed_family(valid):
    def family_rates(route: str, after: bool) -> tuple[float, float]:
        """Failures of the regressed family and of all the others, per checkable claim."""
        events = [s for s in valid if s.event["route"] == route and (event_minute(s.event) >= AT) == after]
        checkable = sum(canonical(c["verdict"]) != "trivial" for s in events for c in s.event["claims"])
        families = [f for s in events for f in s.family_by_claim if f]
        regressed = {"billing-faq": "invented_numbers", "parcel-status": "stale_sources"}[route]
        return families.count(regressed) / checkable, (len(families) - families.count(regressed)) / checkable

    for route, increase in (("billing-faq", 0.06), ("parcel-status", 0.05)):
        (own0, rest0), (own1, rest1) = family_rates(route, False), family_rates(route, True)
        assert own1 - own0 == pytest.approx(increase, abs=0.02), route
        assert rest1 - rest0 == pytest.approx(0, abs=0.01), route


@pytest.mark.slow
def test_a_regression_changes_nothing_but_the_new_versions_traffic():
    def traffic(regression_at: int) -> dict[str, list]:
        out = defaultdict(list)
        for s in generate(Scenario.demo(regression_at=regression_at, corpus_change_at=None), START, 20, seed=6):
            if s.event:
                e = s.event
                out[e["route"]].append(
                    (
                        e["observed_at"],
                        e["query"].get("text"),
                        e["versions"]["model"],
                        tuple(canonical(c["verdict"]) for c in e["claims"]),
                    )
                )
        return out

    with_change, without = traffic(10), traffic(10**6)
    for route in ("parcel-status", "hr-policy", "product-search", "legal-terms"):
        assert with_change[route] == without[route], route
    billing, baseline = with_change["billing-faq"], without["billing-faq"]
    assert len(billing) == len(baseline)
    before = [b for b in billing if event_minute({"observed_at": b[0]}) < 10]
    assert before and before == [b for b in baseline if event_minute({"observed_at": b[0]}) < 10]
    changed = [(a, b) for a, b in zip(billing, baseline) if a != b]
    assert changed and all(a[2] == "gen-2026-11" for a, _ in changed)


def test_canary_share_puts_only_part_of_the_traffic_on_the_new_version():
    route = Route("r", 200, 0.05, {"sycophancy": 1}, {"model": "old", "corpus": "docs@2026-11-01"})
    scenario = Scenario(
        routes=(route,),
        regressions=(Regression("r", 0, {"model": "new"}, 0.08, "invented_numbers", share=0.3),),
        bad_fraction=0,
    )
    events = [s.event for s in generate(scenario, START, 40, seed=4) if not s.duplicate]
    new = [e for e in events if e["versions"]["model"] == "new"]
    old = [e for e in events if e["versions"]["model"] == "old"]
    assert len(new) / len(events) == pytest.approx(0.3, abs=0.03)
    (r_new, se_new), (r_old, se_old) = failure_rate(new), failure_rate(old)
    assert r_new - r_old == pytest.approx(0.08, abs=3 * math.hypot(se_new, se_old))
    assert r_old == pytest.approx(0.05, abs=3 * se_old)


# --- expected counts and files -----------------------------------------------------------------


def test_expected_counts_agree_with_decoding_every_message(sample):
    _, events = sample
    counts = expected_counts(events)
    decoder, seen = Decoder(), set()
    events_by_route, verdicts = Counter(), defaultdict(Counter)
    for s in events:
        result = decoder.decode(s.raw)
        if isinstance(result, Rejection) or result.event_id in seen:
            continue
        seen.add(result.event_id)
        events_by_route[result.route] += 1
        for claim in result.claims:
            verdicts[result.route][claim.verdict] += 1
    assert counts.events == dict(events_by_route)
    assert {r: {v: n for v, n in c.items() if n} for r, c in counts.verdicts.items()} == {
        r: dict(c) for r, c in verdicts.items()
    }
    assert counts.bad == decoder.counts
    assert counts.messages == len(events)
    assert counts.duplicates == sum(s.duplicate for s in events)
    rates = counts.as_rates()
    assert [r["rate"] for r in rates] == sorted((r["rate"] for r in rates), reverse=True)
    assert set(rates[0]) == {"route", "events", "claims", "failed", "rate", "verdicts"}
    assert sum(counts.families.values()) == sum(counts.failed(r) for r in counts.events)


def test_write_jsonl_writes_one_message_per_line_with_progress(tmp_path):
    events = list(generate(Scenario.demo(), START, 6, seed=8))
    reported = []
    path = tmp_path / "events.jsonl"
    assert write_jsonl(iter(events), path, progress=reported.append) == len(events)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and lines[:-1] == [s.raw for s in events]
    assert sum(reported) == len(events)


def test_regression_ramp_grows_the_new_versions_share():
    regression = Regression("billing-faq", 10, {"model": "m2"}, ramp_minutes=4, share=0.8)
    assert [regression.share_at(m) for m in (9, 10, 11, 13, 20)] == [0.0, 0.2, 0.4, 0.8, 0.8]


def test_late_and_duplicate_messages_never_spill_past_the_last_minute():
    minutes = 5
    scenario = Scenario.demo(late_fraction=0.3, duplicate_fraction=0.3)
    events = list(generate(scenario, START, minutes, seed=12))
    assert max(s.minute for s in events) == minutes - 1
    ids = [s.event["event_id"] for s in events if s.event and not s.duplicate]
    assert len(ids) == len(set(ids))
    assert (
        timedelta(minutes=minutes)
        > max(datetime.fromisoformat(s.event["observed_at"]) for s in events if s.event) - START
    )
