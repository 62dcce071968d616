"""Promotion workflow against the real embedded ClickHouse engine (chDB), one store per test."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from services.contract.decode import validate_event
from services.evalset.metrics import agreement, eval_report, gate
from services.evalset.promotion import (
    NearDuplicateError,
    PromotionError,
    PromotionService,
    TraceClaim,
    TraceRecord,
    item_id_for,
    load_label_pairs,
    load_outcomes,
    load_traces,
)
from services.store.evalset import EvalRepository
from services.store.retention import KEEP_EVERYTHING
from services.store.writer import EventWriter
from tests.support.eval_labels import add_human_labels

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
TABLES = ("eval_items", "gold_spans", "claim_labels", "eval_results", "eval_item_history")


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A deterministic embedder: hashed word counts. Same words in any order -> cosine 1."""
    out = np.zeros((len(texts), 256), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 256] += 1
    return out


class StepClock:
    def __init__(self):
        self.ticks = itertools.count()

    def __call__(self) -> datetime:
        return T0 + timedelta(seconds=next(self.ticks))


QUESTIONS = [
    "How long do I have to return an annual plan for a refund?",
    "Which countries does express shipping cover?",
    "Can I pause my subscription while travelling abroad?",
    "What is the fee for replacing a lost card?",
    "Does the warranty cover water damage on headphones?",
]


def trace(n: int, question: str | None = None, **overrides) -> TraceRecord:
    fields = dict(
        event_id=f"ev-{n}",
        trace_id=f"tr-{n}",
        route="billing-faq",
        question=question or QUESTIONS[n],
        query_type="lookup",
        answerable=True,
        stakes="high" if n % 2 else "medium",
        answer_text=f"answer {n}",
        corpus_version="policies@2026-11-01",
        claims=(
            TraceClaim(
                "Refunds within 30 days.",
                "numeric",
                "contradicted",
                "refunded within 14 days",
                "refund-policy",
                "verifier:nli-judge@2.1",
            ),
            TraceClaim(
                "A 5% fee applies.",
                "numeric",
                "supported",
                "A processing fee of 5% applies.",
                "refund-policy",
                "verifier:nli-judge@2.1",
            ),
            TraceClaim("It arrives the same day.", "attribute", "unlinked", "", "", "verifier:nli-judge@2.1"),
            TraceClaim(
                "Old rule says 10 days.", "numeric", "stale", "within 10 days (2024 policy)", "old-policy", "nli-judge"
            ),
            TraceClaim("Sure!", "other", "trivial", "", "", ""),
        ),
    )
    fields.update(overrides)
    return TraceRecord(**fields)


@pytest.fixture
def store(tmp_path, store_templates):
    store = store_templates.fresh(tmp_path / "ch", KEEP_EVERYTHING)  # fixed event times must not age past a TTL
    yield store
    store.close()


@pytest.fixture
def service(store):
    return PromotionService(EvalRepository(store), bag_of_words, clock=StepClock())


def snapshot(store) -> dict:
    return {t: store.query(f"SELECT * FROM {t} ORDER BY ALL") for t in TABLES}


def test_propose_copies_labels_spans_and_records_history(service, store):
    items = service.propose("iss-7", [trace(0), trace(1)], by="bob")
    assert [i.item_id for i in items] == [item_id_for("ev-0"), item_id_for("ev-1")]
    item = service.get(items[0].item_id)
    assert (item.state, item.proposed_by, item.origin_issue_id, item.origin_trace_id, item.version) == (
        "proposed",
        "bob",
        "iss-7",
        "tr-0",
        1,
    )
    assert item.query == QUESTIONS[0] and item.answerable is True and item.gold_answer is None
    labels = store.query(
        "SELECT claim_idx, verdict, labeler FROM claim_labels WHERE item_id = {id:String} ORDER BY claim_idx",
        {"id": item.item_id},
    )
    assert [(r["verdict"], r["labeler"]) for r in labels] == [
        ("contradicted", "verifier:nli-judge@2.1"),
        ("supported", "verifier:nli-judge@2.1"),
        ("unsupported", "verifier:nli-judge@2.1"),
        ("stale", "verifier:nli-judge"),
        ("trivial", "verifier:unknown"),
    ]
    spans = store.query(
        "SELECT source_id, span_text, required FROM gold_spans WHERE item_id = {id:String} ORDER BY span_idx",
        {"id": item.item_id},
    )
    # Spans of contradicted and supported claims are gold; the stale one is not.
    assert spans == [
        {"source_id": "refund-policy", "span_text": "refunded within 14 days", "required": 1},
        {"source_id": "refund-policy", "span_text": "A processing fee of 5% applies.", "required": 1},
    ]
    assert [(h.action, h.by) for h in service.history(item.item_id)] == [("proposed", "bob")]
    assert "from issue iss-7, trace tr-0" in service.history(item.item_id)[0].reason


def test_a_near_duplicate_is_refused_with_a_pointer_and_nothing_changes(service, store):
    first = service.propose("iss-7", [trace(0)], by="bob")[0]
    before = snapshot(store)
    reordered = "For a refund, how long do I have to return an annual plan?"
    with pytest.raises(
        NearDuplicateError,
        match=f"trace tr-9 is a near duplicate \\(cosine 1.000\\) of eval item {first.item_id} \\(proposed\\)",
    ) as err:
        service.propose("iss-8", [trace(1), trace(9, reordered)], by="bob")
    assert [(d.trace_id, d.item_id) for d in err.value.duplicates] == [("tr-9", first.item_id)]
    assert snapshot(store) == before  # trace 1 was not proposed either


def test_near_duplicates_within_one_request_and_the_same_trace_twice_are_refused(service):
    with pytest.raises(NearDuplicateError, match="proposed in this request"):
        service.propose("iss-7", [trace(0), trace(5, QUESTIONS[0].upper())], by="bob")
    service.propose("iss-7", [trace(0)], by="bob")
    with pytest.raises(NearDuplicateError, match=item_id_for("ev-0")):
        service.propose("iss-7", [trace(0, "a totally different wording now")], by="bob")


def test_the_threshold_is_configurable(store):
    default = PromotionService(EvalRepository(store), bag_of_words, clock=StepClock())
    default.propose("iss-7", [trace(0)], by="bob")
    close = "How long do I have to return an annual plan for a full refund?"  # cosine 0.964 with QUESTIONS[0]
    with pytest.raises(NearDuplicateError, match="cosine 0.964"):
        default.propose("iss-7", [trace(6, close)], by="bob")
    lenient = PromotionService(EvalRepository(store), bag_of_words, near_dup_threshold=0.97, clock=StepClock())
    assert [i.query for i in lenient.propose("iss-7", [trace(6, close)], by="bob")] == [close]
    with pytest.raises(PromotionError, match="near_dup_threshold must be in"):
        PromotionService(EvalRepository(store), bag_of_words, near_dup_threshold=0)


def test_approve_then_approving_twice_is_refused_and_changes_nothing(service, store):
    item = service.propose("iss-7", [trace(0)], by="bob")[0]
    approved = service.approve(item.item_id, by="carol", reason="clear regression exemplar")
    assert (approved.state, approved.reviewed_by, approved.version) == ("approved", "carol", 2)
    assert service.get(item.item_id) == approved
    before = snapshot(store)
    with pytest.raises(PromotionError, match="already approved by carol"):
        service.approve(item.item_id, by="dave")
    with pytest.raises(PromotionError, match="already approved"):
        service.reject(item.item_id, by="dave", reason="changed my mind")
    assert snapshot(store) == before
    assert [h.action for h in service.history(item.item_id)] == ["proposed", "approved"]


def test_self_approval_is_refused_unless_allowed(service, store):
    item = service.propose("iss-7", [trace(0)], by="bob")[0]
    before = snapshot(store)
    with pytest.raises(PromotionError, match="bob proposed item .* cannot approve it too"):
        service.approve(item.item_id, by="bob", reason="lgtm")
    assert snapshot(store) == before
    permissive = PromotionService(EvalRepository(store), bag_of_words, allow_self_approval=True, clock=StepClock())
    assert permissive.approve(item.item_id, by="bob").state == "approved"


def test_reject_needs_a_reason_and_is_final(service, store):
    item = service.propose("iss-7", [trace(0)], by="bob")[0]
    before = snapshot(store)
    for reason in ("", "   "):
        with pytest.raises(PromotionError, match="--reason"):
            service.reject(item.item_id, by="carol", reason=reason)
    assert snapshot(store) == before
    rejected = service.reject(item.item_id, by="carol", reason="answer was right; verifier mislabelled")
    assert (rejected.state, rejected.review_reason) == ("rejected", "answer was right; verifier mislabelled")
    with pytest.raises(PromotionError, match="already rejected"):
        service.approve(item.item_id, by="dave")
    assert [(h.action, h.by) for h in service.history(item.item_id)] == [("proposed", "bob"), ("rejected", "carol")]
    # A rejected item still blocks its near duplicates, and says so.
    with pytest.raises(NearDuplicateError, match=r"\(rejected\)"):
        service.propose("iss-7", [trace(8, QUESTIONS[0])], by="bob")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda s: s.approve("ei-nope", by="carol"), "no eval item 'ei-nope'"),
        (lambda s: s.reject("ei-nope", by="carol", reason="x"), "no eval item 'ei-nope'"),
        (lambda s: s.propose("iss-7", [], by="bob"), "no traces to propose"),
        (lambda s: s.propose("iss-7", [trace(0)], by=" "), "--by is required"),
        (lambda s: s.propose("", [trace(0)], by="bob"), "issue_id is required"),
        (lambda s: s.propose("iss-7", [trace(0, question=" ")], by="bob"), "trace tr-0: question text"),
        (lambda s: s.propose("iss-7", [trace(1), trace(1)], by="bob"), "listed twice"),
        (
            lambda s: s.propose("iss-7", [trace(0, claims=(TraceClaim("x", "other", "maybe"),))], by="bob"),
            "trace tr-0 claim 0: unknown verdict 'maybe'",
        ),
    ],
)
def test_bad_requests_get_specific_errors_and_change_nothing(service, store, call, message):
    service.propose("iss-1", [trace(4)], by="bob")
    before = snapshot(store)
    with pytest.raises(PromotionError, match=message):
        call(service)
    assert snapshot(store) == before


def test_export_writes_approved_items_atomically_and_records_it(service, store, tmp_path):
    a, b, c = service.propose("iss-7", [trace(0), trace(1), trace(2)], by="bob")
    service.approve(a.item_id, by="carol", reason="ok")
    service.approve(c.item_id, by="carol", reason="ok")
    service.reject(b.item_id, by="carol", reason="duplicate in spirit")
    add_human_labels(EvalRepository(store), a.item_id, {2: "supported"}, by="carol", at=T0)
    out = tmp_path / "eval.jsonl"
    out.write_text("old content\n")
    assert service.export(out, by="ci") == 2
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["item_id"] for r in records) == sorted([a.item_id, c.item_id])
    first = next(r for r in records if r["item_id"] == a.item_id)
    assert first["query"] == QUESTIONS[0] and first["answerable"] is True and first["gold_answer"] is None
    assert first["origin"] == {"issue_id": "iss-7", "trace_id": "tr-0", "event_id": "ev-0", "route": "billing-faq"}
    assert [s["span_text"] for s in first["gold_spans"]] == [
        "refunded within 14 days",
        "A processing fee of 5% applies.",
    ]
    assert len(first["claim_labels"]) == 6 and {"human:carol", "verifier:nli-judge@2.1"} <= {
        label["labeler"] for label in first["claim_labels"]
    }
    assert [h.action for h in service.history(a.item_id)] == ["proposed", "approved", "exported"]
    assert [h.action for h in service.history(b.item_id)] == ["proposed", "rejected"]
    assert list(tmp_path.glob(".eval.jsonl.*")) == []


@pytest.mark.parametrize("target", ["proc", "parent_is_a_file", "missing_parent", "is_a_directory"])
def test_export_to_an_unwritable_path_changes_nothing(service, store, tmp_path, target):
    item = service.propose("iss-7", [trace(0)], by="bob")[0]
    service.approve(item.item_id, by="carol", reason="ok")
    (tmp_path / "a_file").write_text("keep me\n")
    (tmp_path / "a_dir").mkdir()
    path = {
        "proc": Path("/proc/claimwatch-eval.jsonl"),
        "parent_is_a_file": tmp_path / "a_file" / "eval.jsonl",
        "missing_parent": tmp_path / "nope" / "eval.jsonl",
        "is_a_directory": tmp_path / "a_dir",
    }[target]
    before, files = snapshot(store), sorted(p.name for p in tmp_path.rglob("*") if "ch" not in p.parts)
    with pytest.raises(
        PromotionError, match=f"cannot write the export to {re.escape(str(path))}: .*choose a writable --out"
    ):
        service.export(path)
    assert snapshot(store) == before
    assert sorted(p.name for p in tmp_path.rglob("*") if "ch" not in p.parts) == files  # no temp file left behind
    assert (tmp_path / "a_file").read_text() == "keep me\n"


def contract_event(n: int, verdicts: list[str], question: str, answerable: bool = True, action: str = "served") -> dict:
    return {
        "schema": "claimwatch.verdict/v1",
        "event_id": f"e-{n}",
        "trace_id": f"t-{n}",
        "observed_at": f"2026-11-21T09:{n:02d}:00Z",
        "route": "billing-faq",
        "query": {"text": question, "query_type": "lookup", "stakes": "high", "answerable": answerable},
        "answer": {"text": "Annual plans can be refunded within 30 days.", "action": action},
        "versions": {"corpus": "policies@2026-11-01", "model": "gen-2026-10"},
        "claims": [
            {
                "claim_id": f"c{i}",
                "text": f"claim {i}",
                "claim_type": "numeric",
                "verdict": v,
                "span": f"span {i}",
                "source_id": "refund-policy",
                "labeler": "verifier:nli-judge@2.1",
            }
            for i, v in enumerate(verdicts)
        ],
    }


def test_stored_traces_feed_promotion_and_the_eval_metrics(service, store):
    verdicts = [["supported", "contradicted"], ["supported", "supported", "unlinked"], ["supported", "trivial"], []]
    events = [
        contract_event(n, v, QUESTIONS[n], answerable=n != 3, action="abstained" if n == 3 else "served")
        for n, v in enumerate(verdicts)
    ]
    EventWriter(store).write([validate_event(e) for e in events])
    with pytest.raises(PromotionError, match="unknown trace ids: t-404"):
        load_traces(EvalRepository(store), ["t-0", "t-404"])
    traces = load_traces(EvalRepository(store), ["t-0", "t-1", "t-2", "t-3"])
    assert traces[1].claims[2] == TraceClaim(
        "claim 2", "numeric", "unsupported", "span 2", "refund-policy", "verifier:nli-judge@2.1"
    )
    assert (traces[3].answerable, traces[3].action, traces[0].corpus_version) == (
        False,
        "abstained",
        "policies@2026-11-01",
    )
    items = service.propose("iss-7", traces, by="bob")
    for item in items:
        service.approve(item.item_id, by="carol", reason="ok")
    add_human_labels(EvalRepository(store), items[0].item_id, {0: "supported", 1: "supported"}, by="dave", at=T0)

    outcomes = load_outcomes(EvalRepository(store))
    assert sorted(o.verdicts for o in outcomes) == sorted(
        tuple(v)
        for v in [
            ["supported", "contradicted"],
            ["supported", "supported", "unsupported"],
            ["supported", "trivial"],
            [],
        ]
    )
    report = eval_report(outcomes, n_boot=200)
    assert report.faithfulness.value == pytest.approx(4 / 6)
    assert report.abstention.correct_abstention.value == 1.0 and report.abstention.over_refusal.value == 0.0
    assert not gate(report, min_faithfulness=4 / 6 + 1e-9).passed and gate(report, min_faithfulness=4 / 6 - 1e-9).passed

    human = load_outcomes(EvalRepository(store), labeler="human")
    assert [o.verdicts for o in human if o.verdicts] == [("supported", "supported")]
    pairs = load_label_pairs(EvalRepository(store))
    assert [(p.claim_idx, p.verifier, p.human, p.stakes) for p in pairs] == [
        (0, "supported", "supported", "high"),
        (1, "contradicted", "supported", "high"),
    ]
    assert agreement(pairs, n_boot=50).confusion == ((0, 1), (0, 1))


@pytest.mark.parametrize("disguised", ["Bob", "BOB", "bob\u200b", "\u200bb\u00adob", "ｂｏｂ", " bob "])
def test_self_approval_compares_normalised_names(service, disguised):
    item = service.propose("iss-7", [trace(0)], by="bob")[0]
    with pytest.raises(PromotionError, match="cannot approve it too"):
        service.approve(item.item_id, by=disguised, reason="lgtm")


def test_approval_stores_the_name_as_given(service):
    item = service.propose("iss-7", [trace(0)], by="bob")[0]
    assert service.approve(item.item_id, by="Carol").reviewed_by == "Carol"
