"""Per-claim verdicts on OpenTelemetry spans (OTLP/JSON) -> verdict events -> chDB rates."""

from __future__ import annotations

import copy
import io

import orjson
import pytest

from services.client.adapters.convert import convert_file
from services.client.adapters.otel import to_events
from services.contract.decode import validate_event
from services.contract.errors import RecordError
from services.contract.otlp import claim_attributes
from services.store.retention import KEEP_EVERYTHING
from services.store.writer import EventWriter
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "adapters" / "otel.jsonl"
LINES = [orjson.loads(line) for line in FIXTURE.read_bytes().splitlines()]


@pytest.fixture(scope="module")
def store(tmp_path_factory, store_templates):
    # fixed event times must not age past a TTL
    s = store_templates.fresh(tmp_path_factory.mktemp("otel-store") / "clickhouse", KEEP_EVERYTHING)
    yield s
    s.close()


def otlp(attributes: dict, *, events: list | None = None, trace_id: str = "4BF92F3577B34DA6A3CE929D0E0E4736") -> dict:
    """One OTLP/JSON request holding one span with these attributes."""

    def any_value(v):
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        return {"stringValue": v}

    span = {
        "traceId": trace_id,
        "spanId": "00f067aa0ba902b7",
        "name": "answer",
        "startTimeUnixNano": "1795255200000000000",
        "endTimeUnixNano": "1795255201512000000",
        "attributes": [{"key": k, "value": any_value(v)} for k, v in attributes.items()],
        "events": events or [],
    }
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]}


def test_fixture_round_trip_rates_equal_the_span_verdicts(store):
    out = io.BytesIO()
    report = convert_file("otel", FIXTURE, out, route="billing-assistant")
    events = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert report.ok and report.lines == 2 and len(events) == 4  # LLM and retriever spans carry no verdicts
    EventWriter(store).write([validate_event(e) for e in events])
    row = store.query(
        "SELECT sum(events) AS events, sum(claims) AS claims, sum(failed) AS failed, sum(supported) AS supported, "
        "sum(contradicted) AS contradicted, sum(unsupported) AS unsupported, sum(overreach) AS overreach, "
        "sum(abstained) AS abstained FROM rate_minute WHERE dim = '' AND route = 'billing-assistant'"
    )[0]
    assert row == {
        "events": 4,
        "claims": 7,
        "failed": 3,
        "supported": 4,
        "contradicted": 1,
        "unsupported": 1,
        "overreach": 1,
        "abstained": 1,
    }


def test_span_fields_map_onto_the_event():
    [event] = list(to_events(LINES[0], route="billing-assistant", line=1))
    assert event["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert event["observed_at"] == "2026-11-21T10:00:02.480000Z"
    assert event["query"] == {"text": "When is my invoice due?"}
    assert event["answer"]["action"] == "served"
    assert event["versions"] == {"model": "gen-2026-10", "prompt": "billing-v7", "verifier": "nli-judge@2.1"}
    assert event["attributes"] == {
        "openinference.span.kind": "CHAIN",
        "service.name": "billing-assistant",
        "otel.span_name": "RetrievalQA",
    }
    assert event["claims"][1] == {
        "text": "Late payments incur a 10% fee.",
        "verdict": "contradicted",
        "score": 0.9,
        "chunk_id": "inv-02#3",
        "span": "a late fee of 2% per month",
    }
    assert [c["verdict"] for c in event["claims"]] == ["supported", "contradicted", "unsupported"]


def test_span_events_and_zero_claim_spans():
    # Only the first span names its own route; without --route the second one is refused.
    with pytest.raises(RecordError) as caught:
        to_events(LINES[1], route=None, line=2)
    assert caught.value.field.endswith("spans[1].attributes[claimwatch.route]")
    events = to_events(LINES[1], route="billing-assistant", line=2)
    assert [len(e["claims"]) for e in events] == [2, 0, 2]
    assert events[0]["claims"] == [
        {"text": "You can be billed in EUR.", "verdict": "supported", "chunk_id": "cur-01#0"},
        {"text": "You can be billed in USD.", "verdict": "supported", "chunk_id": "cur-01#0"},
    ]
    assert events[1]["answer"]["action"] == "abstained"


def test_event_ids_are_derived_from_trace_and_span():
    first = to_events(LINES[0], route="billing-assistant", line=1)[0]["event_id"]
    assert to_events(copy.deepcopy(LINES[0]), route="billing-assistant", line=7)[0]["event_id"] == first
    explicit = to_events(
        otlp({**claim_attributes([{"verdict": "supported"}]), "claimwatch.event_id": "ev-1"}), route="r", line=1
    )
    assert explicit[0]["event_id"] == "ev-1"


def test_claim_attributes_round_trip_through_a_span():
    claims = [
        {"text": "Invoices are due in 14 days.", "verdict": "supported", "score": 0.9, "chunk_id": "inv#1"},
        {"verdict": "not_supported"},
    ]
    attrs = claim_attributes(claims, route="billing-faq", action="served", verifier="nli@2")
    assert all(isinstance(v, (str, int, float, bool)) for v in attrs.values())  # valid OTel attribute values
    [event] = to_events(otlp(attrs), route=None, line=1)
    assert event["route"] == "billing-faq" and event["versions"] == {"verifier": "nli@2"}
    assert event["claims"] == [claims[0], {"verdict": "unsupported"}]


@pytest.mark.parametrize(
    "attributes, events, trace_id, field_end, message",
    [
        (
            {"claimwatch.claims.0.verdict": "maybe"},
            None,
            None,
            "attributes[claimwatch.claims.0.verdict]",
            "unknown label 'maybe'; accepted: contradicted",
        ),
        (
            {"claimwatch.claims.0.text": "t"},
            None,
            None,
            "attributes[claimwatch.claims.0.verdict]",
            "required field is missing",
        ),
        (
            {"claimwatch.claims.count": 2, "claimwatch.claims.0.verdict": "supported"},
            None,
            None,
            "attributes[claimwatch.claims.count]",
            "says 2 but 1 claims are attached",
        ),
        (
            {"claimwatch.claims.0.verdict": "supported"},
            [
                {
                    "name": "claimwatch.claim",
                    "attributes": [{"key": "claimwatch.claim.verdict", "value": {"stringValue": "stale"}}],
                }
            ],
            None,
            "spans[0]",
            "both as attributes and as span events",
        ),
        ({"claimwatch.claims.0.verdict": "supported"}, None, "W/nyF3eztNqmzpKQ4ODkc2", "traceId", "not 32 hex digits"),
        (
            {"claimwatch.claims.0.verdict": "supported", "claimwatch.claims.0.score": 3.0},
            None,
            None,
            "event.claims[0].score",
            "less than or equal to 1",
        ),
    ],
)
def test_bad_spans_name_the_line_and_the_attribute(attributes, events, trace_id, field_end, message):
    record = otlp(attributes, events=events, **({"trace_id": trace_id} if trace_id else {}))
    with pytest.raises(RecordError) as caught:
        to_events(record, route="r", line=4)
    assert caught.value.line == 4
    assert caught.value.field.endswith(field_end)
    assert message in caught.value.message


def test_spans_without_verdicts_make_no_events():
    assert to_events(otlp({"openinference.span.kind": "LLM", "llm.model_name": "m"}), route="r", line=1) == []


def test_a_span_route_that_disagrees_with_the_given_route_is_refused():
    with pytest.raises(RecordError) as caught:
        to_events(LINES[1], route="other-route", line=2)
    assert caught.value.rule == "route_conflict"
    assert "the record says 'billing-assistant' but --route is 'other-route'" in caught.value.message


def test_a_logs_line_of_evaluation_results_converts_as_the_intake_maps_it():
    record = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "claimwatch.route", "value": {"stringValue": "billing-faq"}}]},
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": "1764000000000000000",
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "eventName": "gen_ai.evaluation.result",
                                "attributes": [
                                    {"key": "gen_ai.evaluation.name", "value": {"stringValue": "nli-judge"}},
                                    {"key": "gen_ai.evaluation.score.label", "value": {"stringValue": "refuted"}},
                                ],
                            },
                            {"timeUnixNano": "1764000000000000000", "body": {"stringValue": "an ordinary log"}},
                        ]
                    }
                ],
            }
        ]
    }
    [event] = to_events(record, route=None, line=3)
    assert (event["route"], event["claims"]) == (
        "billing-faq",
        [{"verdict": "contradicted", "labeler": "verifier:nli-judge"}],
    )
