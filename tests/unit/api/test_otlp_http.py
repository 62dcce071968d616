"""The OTLP/HTTP intake's answers, as OTLP asks for them: partial success in the request's encoding, google.rpc.Status
on refusal, a token for every export, 503 (to retry) when the broker does not take it, and its own body limit.
(The intake against a live broker and the SDK's own exporters: tests/integration/test_otlp_intake.py.)"""

from __future__ import annotations

import gzip

import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from services.api.auth import new_token
from services.api.middleware import BodyLimit
from services.api.routers.otlp import IntakeUnavailable, router
from services.api.security import ApiPolicy, Gate
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.contract.otlp_wire import hex_ids
from services.contract.rejection import Rejection
from tests.unit.contract.test_otlp import JUDGED, LogRecord, attrs, evaluation, logs_request

TOKEN, TOKEN_HASH = new_token()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROTOBUF = {**AUTH, "Content-Type": "application/x-protobuf"}


class Intake:
    """Keeps what it was given, as the broker would; ``down`` makes it refuse, as a broker that is away."""

    def __init__(self, down: bool = False):
        self.down = down
        self.events: list[dict] = []
        self.refused: list[tuple[str | None, bytes]] = []

    def publish(self, events, refused) -> None:
        if self.down:
            raise IntakeUnavailable("the broker at 127.0.0.1:9 did not take the export")
        self.events += events
        self.refused += refused


def client(intake: Intake | None) -> TestClient:
    api = FastAPI()
    api.include_router(router(intake, Gate(ApiPolicy(token_hashes=(TOKEN_HASH,)))))
    api.add_middleware(BodyLimit, max_bytes=1024, wider={"/v1/": (8192, "otlp_max_body_bytes")})
    return TestClient(api)


def body(*records) -> bytes:
    return logs_request(*records).SerializeToString()


GOOD = evaluation(**JUDGED, gen_ai__evaluation__score__label="supported")
BAD = LogRecord(time_unix_nano=1, event_name="gen_ai.evaluation.result", attributes=attrs(claimwatch__route="kb"))


def test_an_export_puts_its_events_and_its_refused_records_on_the_topic_and_says_which_were_refused():
    intake = Intake()
    answer = client(intake).post("/v1/logs", content=body(GOOD, BAD), headers=PROTOBUF)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/x-protobuf"
    partial = ExportLogsServiceResponse.FromString(answer.content).partial_success
    assert partial.rejected_log_records == 1
    assert "1 of 2 log records with verdicts refused" in partial.error_message
    assert "logRecords[1]" in partial.error_message and "(otlp.missing_field)" in partial.error_message
    assert [e["route"] for e in intake.events] == ["billing-faq"]
    [(route, raw)] = intake.refused
    [(_, dead)] = Decoder().decode_message(raw)
    assert route == "kb" and isinstance(dead, Rejection) and dead.rule == "otlp.missing_field"
    [(_, event)] = Decoder().decode_message(orjson.dumps(intake.events[0]))
    assert isinstance(event, VerdictEvent)


def test_json_and_gzip_are_answered_in_json():
    intake = Intake()
    from google.protobuf.json_format import MessageToDict

    request = orjson.dumps(hex_ids(MessageToDict(logs_request(GOOD))))  # OTLP/JSON writes ids in hex
    answer = client(intake).post(
        "/v1/logs",
        content=gzip.compress(request),
        headers={**AUTH, "Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert answer.status_code == 200 and answer.json() == {}  # nothing refused: no partial success
    assert len(intake.events) == 1


def test_records_without_verdicts_are_ignored_with_a_warning_and_nothing_is_sent():
    intake = Intake()
    plain = LogRecord(time_unix_nano=1)
    answer = client(intake).post("/v1/logs", content=body(plain), headers=PROTOBUF)
    partial = ExportLogsServiceResponse.FromString(answer.content).partial_success
    assert partial.rejected_log_records == 0 and "1 log records carried no verdicts" in partial.error_message
    assert intake.events == [] and intake.refused == []


@pytest.mark.parametrize(
    "headers, status, words",
    [
        ({"Content-Type": "application/x-protobuf"}, 401, "bearer token"),
        ({"Content-Type": "application/x-protobuf", "Authorization": "Bearer cw_wrong"}, 403, "not one of"),
    ],
)
def test_an_export_needs_a_token(headers, status, words):
    intake = Intake()
    answer = client(intake).post("/v1/logs", content=body(GOOD), headers=headers)
    assert answer.status_code == status
    assert words in Status.FromString(answer.content).message
    assert intake.events == []


def test_a_broker_that_does_not_take_the_export_is_a_503_to_retry():
    for intake in (Intake(down=True), None):
        answer = client(intake).post("/v1/logs", content=body(GOOD), headers=PROTOBUF)
        assert answer.status_code == 503
        assert "broker" in Status.FromString(answer.content).message
    assert answer.headers.get("retry-after") is None  # no broker at all: retrying here will not help
    down = client(Intake(down=True)).post("/v1/logs", content=body(GOOD), headers=PROTOBUF)
    assert down.headers["retry-after"] == "5"


def test_the_intake_has_a_body_limit_of_its_own_and_a_bad_body_is_a_400():
    larger = body(*[GOOD] * 8)
    assert 1024 < len(larger) < 8192
    assert client(Intake()).post("/v1/logs", content=larger, headers=PROTOBUF).status_code == 200
    too_large = client(Intake()).post("/v1/logs", content=b"x" * 9000, headers=PROTOBUF)
    assert too_large.status_code == 413 and "otlp_max_body_bytes" in too_large.json()["detail"]
    bad = client(Intake()).post(
        "/v1/traces", content=b'{"resourceSpans": 5}', headers={**AUTH, "Content-Type": "application/json"}
    )
    assert bad.status_code == 400 and "resourceSpans" in bad.json()["message"]
