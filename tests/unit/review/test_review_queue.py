"""The review queue on the real embedded store: sampling, reservation, blindness, spans, adjudication."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta

import pytest

from services.core.errors import Conflict, NotFound
from services.review.queue import ReviewQueue, winners
from services.review.sampling import ReviewSampler, allocate, allocate_by_need, verdict_class
from services.store.review import ReviewRepository
from tests.support.review_world import T0, answer, write_answers

RESERVE = timedelta(minutes=10)


@pytest.fixture
def repo(store):
    write_answers(store, [answer(i) for i in range(3)])  # 6 claims: 3 supported, 3 contradicted
    return ReviewRepository(store)


def queue_all(repo, budget=100, reviewers=2, seed=0):
    return ReviewSampler(repo, budget, reviewers).sample(T0 - timedelta(hours=1), T0 + timedelta(hours=1), T0, seed)


@pytest.mark.parametrize(
    "sizes, budget, expected",
    [
        ({"a": 100, "b": 100}, 10, {"a": 5, "b": 5}),
        ({"a": 2, "b": 100, "c": 100}, 10, {"a": 2, "b": 4, "c": 4}),
        ({"a": 2, "b": 3}, 10, {"a": 2, "b": 3}),
        ({"a": 5, "b": 5, "c": 5}, 2, {"a": 1, "b": 1}),
        ({"a": 1, "b": 5, "c": 9}, 2, {"b": 1, "c": 1}),
        ({"a": 5}, 0, {}),
    ],
)
def test_allocate_spreads_the_budget_evenly_over_strata(sizes, budget, expected):
    assert allocate(sizes, budget) == expected


SIZES = {"a|supported|": 100, "a|contradicted|": 20, "b|supported|": 100, "b|contradicted|i-1": 5, "b|stale|": 5}


@pytest.mark.parametrize(
    "budget, needs, expected",
    [
        # no plan: as allocate
        (10, {}, {"a|supported|": 2, "a|contradicted|": 2, "b|supported|": 2, "b|contradicted|i-1": 2, "b|stale|": 2}),
        # the budget short of the needs: each class the same fraction of its need
        (10, {("a", False): 30, ("a", True): 10}, {"a|supported|": 8, "a|contradicted|": 2}),
        (12, {("a", False): 30, ("b", False): 10}, {"a|supported|": 9, "b|supported|": 3}),
        # needs met: the rest as allocate spreads it
        (
            50,
            {("a", False): 30, ("a", True): 10},
            {"a|supported|": 32, "a|contradicted|": 12, "b|supported|": 2, "b|contradicted|i-1": 2, "b|stale|": 2},
        ),
        # a class's share spread over its strata; a need beyond what the window holds is capped
        (10, {("b", True): 40}, {"b|contradicted|i-1": 5, "b|stale|": 5}),
    ],
)
def test_allocate_by_need_spends_where_the_plan_needs_labels(budget, needs, expected):
    assert allocate_by_need(SIZES, budget, needs) == expected


def test_a_stratum_s_verdict_class_survives_bars_in_the_route_name():
    assert verdict_class("eu|billing|overreach|iss-1") == ("eu|billing", True)
    assert verdict_class("billing|supported|") == ("billing", False)


def test_the_sampler_follows_the_needs_it_is_given(repo):
    result = ReviewSampler(repo, 3, 2).sample(
        T0 - timedelta(hours=1), T0 + timedelta(hours=1), T0, needs={("billing-faq", True): 3}
    )
    assert result.strata == {"billing-faq|contradicted|": 3}
    assert all(repo.queued(f"ev-billing-faq-{i}:1")["weight"] == pytest.approx(1.0) for i in range(3))


def test_sampling_is_stratified_weighted_and_within_the_daily_budget(repo):
    result = queue_all(repo, budget=4)
    assert result.queued == 4 and result.budget_left == 0
    assert result.strata == {"billing-faq|supported|": 2, "billing-faq|contradicted|": 2}
    rows = [repo.queued(f"ev-billing-faq-{i}:{k}") for i in range(3) for k in range(2)]
    queued = [r for r in rows if r]
    assert len(queued) == 4 and all(r["weight"] == pytest.approx(1.5) for r in queued)  # 3 claims, 2 drawn
    assert all(r["verifier_version"] == "nli@1" and r["origin"] == "production" for r in queued)
    again = queue_all(repo, budget=4)
    assert again.queued == 0, "the day's budget is spent"


def test_two_reviewers_never_share_a_slot_and_no_reviewer_gets_a_claim_twice(repo):
    queue_all(repo, budget=1, reviewers=2)
    queue = ReviewQueue(repo, RESERVE, "guide@1")
    ann = queue.next("ann", T0)
    assert queue.next("ann", T0).slot == ann.slot, "a reviewer holding a slot gets it back"
    bob = queue.next("bob", T0)
    assert bob.claim_key == ann.claim_key and bob.slot != ann.slot
    with pytest.raises(NotFound):
        queue.next("cid", T0)  # both slots of the only claim are held
    queue.label(ann.slot, "ann", "contradicted", "", T0)
    with pytest.raises(NotFound):
        queue.next("ann", T0 + timedelta(minutes=1))  # labelled it already; the other slot is bob's


def test_one_person_under_two_spellings_never_fills_two_slots(repo):
    """Review compares names as sign-off does: NFKC, case-folded, invisible characters dropped."""
    queue_all(repo, budget=1, reviewers=2)
    queue = ReviewQueue(repo, RESERVE, "guide@1")
    alice = queue.next("Alice", T0)
    assert queue.next("alice", T0).slot == alice.slot  # the same person's held slot, not the second one
    queue.label(alice.slot, "ａｌｉｃｅ", "contradicted", "", T0)
    for spelling in ("alice", "ALICE\u200b"):
        with pytest.raises(NotFound):
            queue.next(spelling, T0 + timedelta(minutes=1))  # labelled it already, under any spelling


def test_a_reservation_times_out_and_the_slot_goes_to_someone_else(repo):
    queue_all(repo, budget=1, reviewers=1)
    queue = ReviewQueue(repo, RESERVE, "guide@1")
    ann = queue.next("ann", T0)
    with pytest.raises(NotFound):
        queue.next("bob", T0 + timedelta(minutes=9))
    bob = queue.next("bob", T0 + timedelta(minutes=11))
    assert bob.claim_key == ann.claim_key
    with pytest.raises(Conflict, match="expired"):
        queue.label(ann.slot, "ann", "supported", "", T0 + timedelta(minutes=11))
    queue.label(bob.slot, "bob", "supported", "", T0 + timedelta(minutes=12))


def test_a_late_reservation_never_wins_over_a_live_one():
    t = T0
    rows = [
        {"claim_key": "c", "slot_no": 0, "token": "a", "reserved_at": t, "expires_at": t + RESERVE},
        {
            "claim_key": "c",
            "slot_no": 0,
            "token": "b",
            "reserved_at": t + timedelta(minutes=1),
            "expires_at": t + timedelta(minutes=11),
        },
        {
            "claim_key": "c",
            "slot_no": 0,
            "token": "c",
            "reserved_at": t + timedelta(minutes=10),
            "expires_at": t + timedelta(minutes=20),
        },
    ]
    assert winners(rows[:2])[("c", 0)]["token"] == "a"
    assert winners(rows)[("c", 0)]["token"] == "c", "b lost to a and stays lost after a expires"


def test_labels_are_blind_until_given_then_revealed(repo):
    queue_all(repo, budget=6, reviewers=2)
    queue = ReviewQueue(repo, RESERVE, "guide@7")
    ann = queue.next("ann", T0)
    seen = {k: v for k, v in asdict(ann).items() if k != "chunks"}
    assert not {"verdict", "span", "labels", "others"} & set(seen)
    assert not any(word in repr(seen) for word in ("contradicted", "supported", "nli@1")), seen
    assert (
        ann.question.startswith("question") and ann.chunks[0].chunk_id == "refund-1" and ann.claim.startswith("claim")
    )
    with pytest.raises(Conflict, match="hidden"):
        queue.reveal(ann.claim_key, "bob")
    revealed = queue.label(ann.slot, "ann", "unlinked", "", T0 + timedelta(minutes=1))
    assert revealed.label == "unsupported" and revealed.verifier_verdict in {"supported", "contradicted"}
    assert revealed.others == () and revealed.settled is None and revealed.guide_version == "guide@7"
    bob = queue.next("bob", T0 + timedelta(minutes=2))
    assert bob.claim_key == ann.claim_key, "a partly labelled claim is finished first"
    assert "unsupported" not in repr(bob) and "'ann'" not in repr(bob)
    second = queue.label(bob.slot, "bob", "unsupported", "within 14 days of purchase", T0 + timedelta(minutes=3))
    assert [(o.reviewer, o.label) for o in second.others] == [("ann", "unsupported")]
    assert second.settled == "unsupported" and second.chunk_id == "refund-1"


def test_a_span_must_be_quoted_from_an_evidence_chunk_and_labels_use_the_guide(repo):
    queue_all(repo, budget=1, reviewers=1)
    queue = ReviewQueue(repo, RESERVE, "guide@1")
    ann = queue.next("ann", T0)
    with pytest.raises(ValueError, match="verbatim"):
        queue.label(ann.slot, "ann", "supported", "refunds within 30 days", T0)
    with pytest.raises(ValueError, match="annotation guide"):
        queue.label(ann.slot, "ann", "no_source", "", T0)
    with pytest.raises(ValueError, match="unknown verdict"):
        queue.label(ann.slot, "ann", "maybe", "", T0)
    with pytest.raises(Conflict, match="reserved for ann"):
        queue.label(ann.slot, "bob", "supported", "", T0)
    with pytest.raises(NotFound):
        queue.label("nope", "ann", "supported", "", T0)
    done = queue.label(ann.slot, "ann", "supported", "A processing fee of 5% applies.", T0)
    assert done.chunk_id == "refund-1"
    with pytest.raises(Conflict, match="labelled"):
        queue.label(ann.slot, "ann", "contradicted", "", T0)


def test_an_adjudicator_settles_a_disputed_claim(repo):
    queue_all(repo, budget=1, reviewers=2)
    queue = ReviewQueue(repo, RESERVE, "guide@1")
    ann, bob = queue.next("ann", T0), queue.next("bob", T0)
    queue.label(ann.slot, "ann", "supported", "", T0)
    assert queue.label(bob.slot, "bob", "overreach", "", T0).settled is None
    with pytest.raises(Conflict, match="labelled .* as a reviewer, so cannot settle it"):  # one side's second vote
        queue.adjudicate(ann.claim_key, " Bob", "overreach", "", T0 + timedelta(minutes=5))
    settled = queue.adjudicate(ann.claim_key, "carol", "overreach", "", T0 + timedelta(minutes=5))
    assert settled.settled == "overreach" and settled.role == "adjudicator"


def test_eval_items_claims_can_be_queued_outside_the_budget(store, repo):
    store.insert(
        "eval_items",
        [
            {
                "item_id": "it-1",
                "query": "q",
                "state": "approved",
                "origin_event_id": "ev-billing-faq-1",
                "proposed_at": "2026-11-21 09:00:00.000",
                "version": 1,
            }
        ],
    )
    assert ReviewSampler(repo, 0, 2).enqueue_eval(T0) == 2
    assert repo.queued("ev-billing-faq-1:0")["origin"] == "eval"


def test_claims_whose_answer_is_gone_are_skipped(store, repo):
    queue_all(repo, budget=6, reviewers=1)
    store.command("ALTER TABLE events DELETE WHERE event_id != 'ev-billing-faq-2' SETTINGS mutations_sync = 2")
    queue = ReviewQueue(repo, RESERVE, "guide@1")
    assert queue.next("ann", T0).claim_key.startswith("ev-billing-faq-2:")
