"""The traces list's search over stored claims (TraceRepository.search, through TraceService.search): each filter,
one row per trace counting its matched claims, newest first, paging with the total, the 31-day bound, and blind
review's guard on the verdicts a page shows. Constructed answers, written by the real writer into a real store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.contract.decode import Decoder
from services.contract.model import FAILED_VERDICT_ORDER, VerdictEvent
from services.core.clock import utcnow
from services.issues.traces import TraceService
from services.store.convert import ch_time
from services.store.exposure import exposed_by
from services.store.traces import TraceRepository, TraceSearch
from services.store.writer import EventWriter

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=10)


def event(event_id: str, trace_id: str, at: datetime, route: str, model: str, claims) -> VerdictEvent:
    decoded = Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": event_id,
                "trace_id": trace_id,
                "observed_at": at.isoformat(),
                "route": route,
                "query": {"text": "How long do refunds take?"},
                "answer": {"text": "An answer.", "action": "served"},
                "versions": {"model": model, "prompt": "p-7"},
                "claims": [{"text": text, "verdict": verdict} for text, verdict in claims],
            }
        )
    )
    assert isinstance(decoded, VerdictEvent), decoded
    return decoded


EVENTS = [
    event(
        "ev-1",
        "tr-1",
        T0 + timedelta(minutes=1),
        "billing-faq",
        "gen-2026-10",
        [("Refunds take 14 days.", "supported"), ("A fee of 5% applies.", "contradicted")],
    ),
    event(
        "ev-2",
        "tr-2",
        T0 + timedelta(minutes=2),
        "billing-faq",
        "gen-2026-11",
        [("Refunds take 30 days.", "unsupported"), ("Plans renew yearly.", "supported")],
    ),
    event(  # the same trace answered again
        "ev-3",
        "tr-2",
        T0 + timedelta(minutes=3),
        "billing-faq",
        "gen-2026-11",
        [("REFUNDS take 30 days.", "supported")],
    ),
    event(
        "ev-4",
        "tr-3",
        T0 + timedelta(minutes=4),
        "parcel-status",
        "gen-2026-11",
        [("Parcels arrive in 2 days.", "no_source")],
    ),
    event(  # two days before: outside the default range
        "ev-old", "tr-old", T0 - timedelta(days=2), "billing-faq", "gen-2026-10", [("Refunds take 14 days.", "stale")]
    ),
]


@pytest.fixture
def traces(store):
    EventWriter(store).write(EVENTS)
    return TraceService(TraceRepository(store))


def ids(page) -> list[str]:
    return [t.trace_id for t in page.traces]


def test_each_filter_keeps_the_traces_with_a_matching_claim(traces):
    assert ids(traces.search(NOW)) == ["tr-3", "tr-2", "tr-1"]  # the last 24 hours, newest first
    assert ids(traces.search(NOW, route="parcel-status")) == ["tr-3"]
    assert ids(traces.search(NOW, verdicts=["unsupported"])) == ["tr-2"]
    assert ids(traces.search(NOW, verdicts=["refuted", "no_source"])) == ["tr-3", "tr-1"]  # an alias, and any of them
    assert ids(traces.search(NOW, verdicts=["failed"])) == ["tr-3", "tr-2", "tr-1"]  # any failed verdict
    assert ids(traces.search(NOW, versions=["model=gen-2026-11"])) == ["tr-3", "tr-2"]
    assert ids(traces.search(NOW, versions=["model=gen-2026-11", "prompt=p-7"], route="billing-faq")) == ["tr-2"]
    assert ids(traces.search(NOW, versions=["model=gen-2026-11", "prompt=p-8"])) == []
    assert ids(traces.search(NOW, text="refunds TAKE")) == ["tr-2", "tr-1"]  # without case
    assert ids(traces.search(NOW, text="5%")) == ["tr-1"]
    assert ids(traces.search(NOW, text="refunds", verdicts=["supported"], route="billing-faq")) == ["tr-2", "tr-1"]
    # the time range: since and until as lengths back from now or RFC 3339 times; until is not included
    assert ids(traces.search(NOW, text="refunds", since="3d")) == ["tr-2", "tr-1", "tr-old"]
    assert ids(traces.search(NOW, since="2026-11-21T09:02:00Z", until="2026-11-21T09:04:00Z")) == ["tr-2"]
    assert ids(traces.search(NOW, since="510s", until="7m")) == ["tr-2"]
    assert ids(traces.search(NOW, until="2026-11-19T10:00:00+00:00", text="refunds")) == ["tr-old"]  # 24 h before


def test_a_row_counts_the_traces_matched_claims_and_shows_a_failed_one(traces):
    both = traces.search(NOW, text="refunds").traces[0]
    assert (both.trace_id, both.route, both.first_observed_at) == ("tr-2", "billing-faq", T0 + timedelta(minutes=2))
    assert (both.events, both.claims, both.failed) == (2, 2, 1)  # two answers, each with a refunds claim
    assert both.verdicts == ["supported", "unsupported"]  # in the contract's order
    assert (both.claim.claim_key, both.claim.text, both.claim.verdict, both.claim.failed) == (
        "ev-2:0",
        "Refunds take 30 days.",
        "unsupported",
        True,
    )
    whole = next(t for t in traces.search(NOW).traces if t.trace_id == "tr-2")
    assert (whole.events, whole.claims, whole.failed) == (2, 3, 1)
    first = traces.search(NOW, verdicts=["supported"], route="billing-faq").traces
    assert [(t.trace_id, t.claims, t.failed, t.claim.claim_key) for t in first] == [
        ("tr-2", 2, 0, "ev-2:1"),  # none failed: the earliest
        ("tr-1", 1, 0, "ev-1:0"),
    ]


def test_the_claim_a_row_shows_has_text_when_one_has(traces, store):
    EventWriter(store).write(
        [event("ev-5", "tr-5", NOW - timedelta(minutes=1), "faq", "m", [("", "supported"), ("Hi.", "supported")])]
    )
    assert [
        (t.trace_id, t.claims, t.claim.claim_key, t.claim.text) for t in traces.search(NOW, route="faq").traces
    ] == [("tr-5", 2, "ev-5:1", "Hi.")]


def test_pages_keep_the_order_and_say_the_total(traces):
    first, second = traces.search(NOW, limit=2), traces.search(NOW, limit=2, offset=2)
    assert (ids(first), first.total, first.next_offset, first.after) == (["tr-3", "tr-2"], 3, 2, 1)
    assert (ids(second), second.total, second.next_offset, second.after) == (["tr-1"], 3, None, 0)
    past = traces.search(NOW, limit=2, offset=10)
    assert (ids(past), past.total) == ([], 3)
    assert (first.since, first.until) == (NOW - timedelta(hours=24), NOW)
    assert traces.search(NOW, text="nothing like it").total == 0


def test_a_range_over_31_days_and_bad_filters_are_refused_in_plain_words(traces, store):
    with pytest.raises(ValueError, match=r"^the time range from since to until is 32\.0 days; .* at most 31 days"):
        traces.search(NOW, since="32d")
    with pytest.raises(ValueError, match="at most 31 days"):  # the store's own bound, whoever asks
        TraceRepository(store).search(TraceSearch(T0 - timedelta(days=40), T0), 10, 0, FAILED_VERDICT_ORDER)
    assert ids(traces.search(NOW, since="31d", text="refunds")) == ["tr-2", "tr-1", "tr-old"]
    refusals = {
        "unknown verdict 'wrong': use one of supported, unsupported, contradicted, overreach, stale, no_source, "
        "trivial, or failed (any failed verdict)": {"verdicts": ["wrong"]},
        "version 'model': give key=value, e.g. model=gen-2026-11": {"versions": ["model"]},
        "version model is given twice (a and b); a claim has one of them": {"versions": ["model=a", "model=b"]},
        "since 'yesterday' is not a time: give a length back from now": {"since": "yesterday"},
        "must come before until": {"since": "1h", "until": "2h"},
        "limit 101: give 1 to 100 traces a page": {"limit": 101},
    }
    for message, given in refusals.items():
        with pytest.raises(ValueError) as refused:
            traces.search(NOW, **given)
        assert message in str(refused.value), (given, str(refused.value))


def test_a_page_marks_the_live_reservations_of_the_claims_it_shows_exposed(traces, store):
    live = ch_time(utcnow() + timedelta(minutes=10))  # reservations live by the store's clock
    store.insert(
        "review_reservations",
        [
            {"token": t, "claim_key": k, "slot_no": 0, "reviewer": r, "reserved_at": ch_time(T0), "expires_at": live}
            for t, k, r in (("t-ann", "ev-2:0", "ann"), ("t-bob", "ev-1:1", "bob"), ("t-cid", "ev-old:0", "cid"))
        ],
    )
    traces.search(NOW, verdicts=["unsupported"])  # shows ev-2:0 only
    assert exposed_by(store, "ev-2:0", "ann") == ["trace"]
    assert exposed_by(store, "ev-1:1", "bob") == [] and exposed_by(store, "ev-old:0", "cid") == []
    traces.search(NOW, route="billing-faq", limit=1)  # the page holds tr-2 alone
    assert exposed_by(store, "ev-1:1", "bob") == []
    traces.search(NOW, text="fee")  # tr-1's matched claim is ev-1:1
    assert exposed_by(store, "ev-1:1", "bob") == ["trace"] and exposed_by(store, "ev-old:0", "cid") == []
