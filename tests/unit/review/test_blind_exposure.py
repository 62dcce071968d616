"""Blind review stays blind (issue 51): a read that shows a claim's verdict while a reviewer holds the claim marks
the reservation exposed, and the label made on it is kept but fills no slot and counts in no agreement."""

from __future__ import annotations

from datetime import timedelta

from services.core.clock import utcnow
from services.review.queue import ReviewQueue
from services.review.sampling import ReviewSampler
from services.store.issues import IssueRepository
from services.store.review import ReviewRepository
from services.store.traces import TraceRepository
from tests.support.review_world import T0, answer, write_answers

RESERVE = timedelta(minutes=10)
KEY, TRACE = "ev-billing-faq-0:0", "tr-billing-faq-0"


def one_queued_claim(store) -> tuple[ReviewRepository, ReviewQueue]:
    write_answers(store, [answer(0, verdicts=("contradicted",))])
    repo = ReviewRepository(store)
    ReviewSampler(repo, 10, 2).sample(T0 - timedelta(hours=1), T0 + timedelta(hours=1), T0, 0)
    issues = IssueRepository(store, dict, dict)
    issues.save_members(
        [
            {
                "claim_key": KEY,
                "issue_id": "iss-refunds",
                "probability": 0.9,
                "source": "batch",
                "config_name": "c",
                "x": 0.0,
                "y": 0.0,
                "observed_at": T0,
            }
        ]
    )
    return repo, ReviewQueue(repo, RESERVE, "guide@1")


def test_issue_members_shown_while_a_claim_is_held_make_its_label_not_blind(store):
    repo, queue = one_queued_claim(store)
    now = utcnow()  # a reservation is live by the store's clock, as in production
    ann = queue.next("ann", now)
    shown = IssueRepository(store, dict, dict).members("iss-refunds", 50)
    assert [(m["claim_key"], m["verdict"]) for m in shown] == [(KEY, "contradicted")]
    revealed = queue.label(ann.slot, "ann", "contradicted", "", now + timedelta(minutes=1))
    assert revealed.exposed_by == ("issue members",)
    assert repo.labelled() == [], "an exposed label counts in no agreement"
    assert [(r["reviewer"], r["labels"], r["exposed"]) for r in repo.reviewer_progress()] == [("ann", 1, 1)]
    bob, cid = queue.next("bob", now), queue.next("cid", now)  # both slots are still open
    assert {bob.claim_key, cid.claim_key} == {KEY} and bob.slot != cid.slot
    queue.label(bob.slot, "bob", "contradicted", "", now + timedelta(minutes=2))
    settled = queue.label(cid.slot, "cid", "contradicted", "", now + timedelta(minutes=2))
    assert settled.exposed_by == () and settled.settled == "contradicted"
    assert [who for who, *_ in repo.labelled()[0]["labels"]] == ["bob", "cid"]


def test_a_trace_shown_while_held_exposes_and_reads_outside_a_reservation_do_not(store):
    repo, queue = one_queued_claim(store)
    traces = TraceRepository(store)
    traces.events(TRACE, 10, 0, 100, ["contradicted"])  # nobody holds the claim yet: nothing to expose
    now = utcnow()
    ann = queue.next("ann", now)
    done = queue.label(ann.slot, "ann", "contradicted", "", now)
    traces.events(TRACE, 10, 0, 100, ["contradicted"])  # ann labelled it already: her label stays blind
    assert done.exposed_by == () and repo.reviewer_progress()[0]["exposed"] == 0
    bob = queue.next("bob", now)
    traces.events(TRACE, 10, 0, 100, ["contradicted"])
    assert queue.label(bob.slot, "bob", "supported", "", now).exposed_by == ("trace",)
    assert [who for who, *_ in repo.labelled()[0]["labels"]] == ["ann"]
