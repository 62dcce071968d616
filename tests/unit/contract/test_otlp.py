"""OTLP as verdict events: gen_ai.evaluation.result log records and span events, spans with claims; protobuf and JSON
read alike; a refused record is refused alone and reaches the worker's decoder as a dead letter under its rule."""

from __future__ import annotations

import gzip

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from services.contract import otlp
from services.contract import otlp_wire as wire
from services.contract.decode import Decoder, refused_record
from services.contract.model import VerdictEvent
from services.contract.rejection import Rejection

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
SPAN = bytes.fromhex("eee19b7ec3c1b174")
NANOS = 1_764_000_000_000_000_000  # 2025-11-24T16:00:00Z


def attrs(**values) -> list[KeyValue]:
    out = []
    for key, value in values.items():
        key = key.replace("__", ".")
        if isinstance(value, float):
            out.append(KeyValue(key=key, value=AnyValue(double_value=value)))
        elif isinstance(value, int):
            out.append(KeyValue(key=key, value=AnyValue(int_value=value)))
        else:
            out.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    return out


def evaluation(**values) -> LogRecord:
    return LogRecord(
        time_unix_nano=NANOS, trace_id=TRACE, span_id=SPAN, event_name=otlp.EVALUATION_EVENT, attributes=attrs(**values)
    )


def logs_request(*records: LogRecord, **resource) -> ExportLogsServiceRequest:
    scope = ScopeLogs(log_records=list(records))
    return ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(resource=Resource(attributes=attrs(**resource)), scope_logs=[scope])]
    )


def read_protobuf(request, signal: str) -> dict:
    return wire.read(wire.SIGNALS[signal], request.SerializeToString(), wire.PROTOBUF, None, 1 << 20)


JUDGED = dict(gen_ai__evaluation__name="nli-judge", claimwatch__route="billing-faq")


def test_an_evaluation_result_is_one_answer_as_its_evaluator_judged_it():
    record = evaluation(
        **JUDGED,
        gen_ai__evaluation__score__label="Contradiction",
        gen_ai__evaluation__score__value=0.82,
        claimwatch__claim__text="Refunds take 30 days.",
        gen_ai__response__model="gen-2026-11",
    )
    mapped = otlp.map_request(read_protobuf(logs_request(record, service__name="bot"), "logs"), "logs")
    assert (mapped.refused, mapped.ignored) == ([], 0)
    [event] = mapped.events
    assert event["trace_id"] == TRACE.hex() and event["route"] == "billing-faq"
    assert event["observed_at"].startswith("2025-11-24T16:00:00")
    assert event["claims"] == [
        {"text": "Refunds take 30 days.", "verdict": "contradicted", "score": 0.82, "labeler": "verifier:nli-judge"}
    ]
    assert event["versions"] == {"model": "gen-2026-11", "verifier": "nli-judge"}
    assert event["attributes"]["service.name"] == "bot"


def test_an_export_sent_twice_gives_the_same_event_ids_and_another_evaluator_another():
    first = otlp.map_request(
        read_protobuf(logs_request(evaluation(**JUDGED, gen_ai__evaluation__score__label="supported")), "logs"), "logs"
    )
    again = otlp.map_request(
        read_protobuf(logs_request(evaluation(**JUDGED, gen_ai__evaluation__score__label="supported")), "logs"), "logs"
    )
    other = {**JUDGED, "gen_ai__evaluation__name": "other-judge"}
    third = otlp.map_request(
        read_protobuf(logs_request(evaluation(**other, gen_ai__evaluation__score__label="supported")), "logs"), "logs"
    )
    assert first.events[0]["event_id"] == again.events[0]["event_id"] != third.events[0]["event_id"]


def test_a_score_on_another_scale_is_not_taken_for_a_confidence():
    record = evaluation(**JUDGED, gen_ai__evaluation__score__label="supported", gen_ai__evaluation__score__value=4.0)
    [event] = otlp.map_request(read_protobuf(logs_request(record), "logs"), "logs").events
    assert "score" not in event["claims"][0]


def test_several_claims_ride_on_one_evaluation_as_on_a_span():
    claims = otlp.claim_attributes([{"verdict": "supported"}, {"verdict": "overreach", "text": "always"}])
    record = LogRecord(
        time_unix_nano=NANOS,
        trace_id=TRACE,
        span_id=SPAN,
        event_name=otlp.EVALUATION_EVENT,
        attributes=attrs(**JUDGED) + [KeyValue(key=k, value=_any(v)) for k, v in claims.items()],
    )
    [event] = otlp.map_request(read_protobuf(logs_request(record), "logs"), "logs").events
    assert [c["verdict"] for c in event["claims"]] == ["supported", "overreach"]


def _any(value) -> AnyValue:
    return AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)


def test_the_route_may_come_from_the_resource_and_other_log_records_are_ignored():
    record = evaluation(gen_ai__evaluation__name="nli-judge", gen_ai__evaluation__score__label="supported")
    plain = LogRecord(time_unix_nano=NANOS, body=AnyValue(string_value="hello"))
    mapped = otlp.map_request(
        read_protobuf(logs_request(record, plain, claimwatch__route="from-resource"), "logs"), "logs"
    )
    assert [e["route"] for e in mapped.events] == ["from-resource"]
    assert mapped.ignored == 1


@pytest.mark.parametrize(
    "values, trace_id, rule, words",
    [
        (
            dict(claimwatch__route="r", gen_ai__evaluation__score__label="supported"),
            TRACE,
            "otlp.missing_field",
            "gen_ai.evaluation.name",
        ),
        (dict(JUDGED, gen_ai__evaluation__score__label="pass"), TRACE, "otlp.unknown_label", "'pass'"),
        (dict(JUDGED), TRACE, "otlp.missing_field", "the verdict"),
        (
            dict(gen_ai__evaluation__name="j", gen_ai__evaluation__score__label="supported"),
            TRACE,
            "otlp.missing_field",
            "claimwatch.route",
        ),
        (dict(JUDGED, gen_ai__evaluation__score__label="supported"), b"", "otlp.missing_field", "traceId"),
        (
            dict(JUDGED, claimwatch__route="no spaces allowed", gen_ai__evaluation__score__label="supported"),
            TRACE,
            "otlp.contract.",
            "route",
        ),
    ],
)
def test_a_record_that_cannot_be_an_event_is_refused_alone_with_its_rule(values, trace_id, rule, words):
    bad = LogRecord(
        time_unix_nano=NANOS,
        trace_id=trace_id,
        span_id=SPAN,
        event_name=otlp.EVALUATION_EVENT,
        attributes=attrs(**values),
    )
    good = evaluation(**JUDGED, gen_ai__evaluation__score__label="supported")
    mapped = otlp.map_request(read_protobuf(logs_request(good, bad), "logs"), "logs")
    assert len(mapped.events) == 1
    [refused] = mapped.refused
    assert refused.rule.startswith(rule) and words in refused.reason
    assert refused.path == "resourceLogs[0].scopeLogs[0].logRecords[1]"


def test_spans_carry_claims_and_evaluation_span_events():
    span = Span(
        trace_id=TRACE,
        span_id=SPAN,
        name="answer",
        end_time_unix_nano=NANOS,
        attributes=[
            KeyValue(key=k, value=_any(v))
            for k, v in otlp.claim_attributes([{"verdict": "supported"}, {"verdict": "stale"}], route="kb").items()
        ],
        events=[
            Span.Event(
                name=otlp.EVALUATION_EVENT,
                time_unix_nano=NANOS + 5,
                attributes=attrs(gen_ai__evaluation__name="judge-2", gen_ai__evaluation__score__label="refuted"),
            )
        ],
    )
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
    mapped = otlp.map_request(read_protobuf(request, "traces"), "traces")
    by_verifier = {e.get("versions", {}).get("verifier"): e for e in mapped.events}
    assert [c["verdict"] for c in by_verifier[None]["claims"]] == ["supported", "stale"]
    assert by_verifier["judge-2"]["claims"][0]["verdict"] == "contradicted"
    assert by_verifier["judge-2"]["route"] == "kb"  # the span's route
    assert {e["trace_id"] for e in mapped.events} == {TRACE.hex()}


def test_protobuf_and_json_read_alike_and_gzip_unpacks():
    request = logs_request(evaluation(**JUDGED, gen_ai__evaluation__score__label="supported"))
    from_protobuf = read_protobuf(request, "logs")
    as_json = orjson.dumps(from_protobuf)
    signal = wire.SIGNALS["logs"]
    assert (
        wire.read(signal, gzip.compress(as_json), "application/json; charset=utf-8", "gzip", 1 << 20) == from_protobuf
    )
    assert from_protobuf["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["traceId"] == TRACE.hex()


@pytest.mark.parametrize(
    "body, content_type, encoding, status, words",
    [
        (b"{}", "text/plain", None, 415, "application/x-protobuf"),
        (b"{}", "application/json", "br", 415, "gzip"),
        (b"\xff\x00garbage", "application/x-protobuf", None, 400, "not a protobuf"),
        (b"[1]", "application/json", None, 400, "not an OTLP request"),
        (b"not gzip", "application/json", "gzip", 400, "not gzip"),
        (gzip.compress(b" " * 5000, mtime=0), "application/json", "gzip", 413, "unpacks to over 4096"),
        (gzip.compress(b"{}", mtime=0)[:-6], "application/json", "gzip", 400, "ends early"),
    ],
    ids=["content-type", "content-encoding", "protobuf", "json", "gzip", "zip-bomb", "truncated"],
)
def test_a_body_otlp_refuses_whole_says_why(body, content_type, encoding, status, words):
    with pytest.raises(wire.WireError) as caught:
        wire.read(wire.SIGNALS["traces"], body, content_type, encoding, 4096)
    assert caught.value.status == status and words in str(caught.value)


def test_a_refused_record_reaches_the_worker_as_a_dead_letter_under_its_rule():
    bad = LogRecord(
        time_unix_nano=NANOS,
        trace_id=TRACE,
        event_name=otlp.EVALUATION_EVENT,
        attributes=attrs(claimwatch__route="billing-faq"),
    )
    [refused] = otlp.map_request(read_protobuf(logs_request(bad), "logs"), "logs").refused
    raw = refused_record(
        refused.rule, refused.path, refused.error.message, "/v1/logs", refused.record, refused.route, None
    )
    [(index, result)] = Decoder().decode_message(raw)
    assert isinstance(result, Rejection) and index is None
    assert (result.rule, result.route) == ("otlp.missing_field", "billing-faq")
    assert result.problems[0].path == "resourceLogs[0].scopeLogs[0].logRecords[0]"


@pytest.mark.parametrize("rule", ["schema.made_up", "otlp.", "otlp.UPPER", 7])
def test_a_refused_record_cannot_make_up_a_rule_to_count_under(rule):
    raw = orjson.dumps({"schema": "claimwatch.refused/v1", "rule": rule, "path": "$", "message": "m"})
    [(_, result)] = Decoder().decode_message(raw)
    assert isinstance(result, Rejection) and result.rule == "refused.bad_rule"


def test_a_valid_event_is_never_read_as_a_refused_record():
    [event] = otlp.map_request(
        read_protobuf(logs_request(evaluation(**JUDGED, gen_ai__evaluation__score__label="supported")), "logs"), "logs"
    ).events
    [(_, result)] = Decoder().decode_message(orjson.dumps(event))
    assert isinstance(result, VerdictEvent)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=12,
)
FIELDS = st.sampled_from(
    [
        "attributes",
        "events",
        "traceId",
        "spanId",
        "eventName",
        "timeUnixNano",
        "resource",
        "key",
        "value",
        "stringValue",
        "intValue",
        "arrayValue",
        "kvlistValue",
        "values",
        "name",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    record=st.dictionaries(FIELDS, JSON_VALUES, max_size=5),
    resource=JSON_VALUES,
    signal=st.sampled_from(["traces", "logs"]),
)
def test_any_json_in_a_record_is_taken_refused_or_ignored_never_an_error(record, resource, signal):
    top, scopes, items = otlp.SIGNALS[signal]
    request = {
        top: [{"resource": resource, scopes: [{items: [record, {**record, "eventName": otlp.EVALUATION_EVENT}]}]}]
    }
    mapped = otlp.map_request(request, signal)
    assert len(mapped.events) + len(mapped.refused) + mapped.ignored >= 2
