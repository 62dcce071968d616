"""An application's own OpenTelemetry SDK exports verdicts to a live `claimwatch up` over OTLP/HTTP (protobuf, gzip):
spans with per-claim verdicts, and gen_ai.evaluation.result events. The stored counts are exact, an export sent twice
is counted once, and malformed records get OTLP partial success with reasons and are dead-lettered under their rule.

Real components: the Tansu broker, `claimwatch up` (worker, chDB, API), opentelemetry-sdk and
opentelemetry-exporter-otlp-proto-http as an application would configure them.
"""

from __future__ import annotations

import httpx
import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from services.api.auth import new_token
from services.app.broker import create_topics
from services.contract.otlp import claim_attributes
from tests.support.upstack import Up

SPAN_ROUTE, EVAL_ROUTE = "otel-spans", "otel-evals"
SPAN_CLAIMS = [  # the verdicts of each answer a span carries
    ["supported", "unsupported"],
    ["supported"],
    ["contradicted", "supported", "supported"],
    [],  # an abstention: zero claims, still an answer
    ["NEI", "supported"],  # an alias
    ["supported", "stale"],
]
EVALUATIONS = ["supported", "contradicted", "unsupported", "entailment", "supported"]


class Recording(requests.Session):
    """The exporter's HTTP session, keeping each answer so the test can read OTLP's partial success."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[requests.Response] = []

    def request(self, *args, **kwargs):
        answer = super().request(*args, **kwargs)
        self.answers.append(answer)
        return answer


def metric(up: Up, name: str) -> float:
    text = httpx.get(up.url + "/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


def stored(up: Up) -> dict[str, tuple[int, int]]:
    rates = up.get("/api/rates", window="all") or []
    return {r["route"]: (r["events"], r["claims"]) for r in rates if r["route"] in (SPAN_ROUTE, EVAL_ROUTE)}


def dead_letters(up: Up) -> dict[str, int]:
    return {d["reason"]: d["count"] for d in up.get("/api/dlq") or [] if d["reason"].startswith("otlp.")}


def export_traces(endpoint: str, token: str, session: Recording, kept: InMemorySpanExporter) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot", "claimwatch.route": SPAN_ROUTE}))
    exporter = OTLPSpanExporter(
        endpoint=f"{endpoint}/v1/traces",
        headers={"Authorization": f"Bearer {token}"},
        compression=Compression.Gzip,
        session=session,
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    provider.add_span_processor(BatchSpanProcessor(kept))
    tracer = provider.get_tracer("support-bot")
    for n, verdicts in enumerate(SPAN_CLAIMS):
        with tracer.start_as_current_span(f"answer-{n}") as span:
            claims = [{"verdict": v, "text": f"claim {n}.{i}"} for i, v in enumerate(verdicts)]
            span.set_attributes(claim_attributes(claims, action="abstained" if not claims else "served"))
            span.set_attribute("llm.model_name", "gen-2026-11")
    with tracer.start_as_current_span("retrieve"):  # no verdicts: ignored
        pass
    with tracer.start_as_current_span("bad-count") as span:
        span.set_attributes({**claim_attributes([{"verdict": "supported"}]), "claimwatch.claims.count": 3})
    with tracer.start_as_current_span("bad-verdict") as span:
        span.set_attributes(claim_attributes([{"verdict": "maybe"}]))
    provider.force_flush()
    provider.shutdown()


def export_evaluations(endpoint: str, token: str, session: Recording) -> None:
    tracer = TracerProvider().get_tracer("judge")
    provider = LoggerProvider(resource=Resource.create({"service.name": "judge"}))
    exporter = OTLPLogExporter(
        endpoint=f"{endpoint}/v1/logs", headers={"Authorization": f"Bearer {token}"}, session=session
    )
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    logger = provider.get_logger("judge")
    evaluation = {"gen_ai.evaluation.name": "nli-judge", "claimwatch.route": EVAL_ROUTE}
    for n, verdict in enumerate(EVALUATIONS):
        with tracer.start_as_current_span(f"judged-{n}"):
            logger.emit(
                event_name="gen_ai.evaluation.result",
                attributes={
                    **evaluation,
                    "gen_ai.evaluation.score.label": verdict,
                    "gen_ai.evaluation.score.value": 0.9,
                    "claimwatch.claim.text": f"evaluated claim {n}",
                },
            )
    with tracer.start_as_current_span("judged-bad"):
        logger.emit(event_name="gen_ai.evaluation.result", attributes={"claimwatch.route": EVAL_ROUTE})
        logger.emit(
            event_name="gen_ai.evaluation.result", attributes={**evaluation, "gen_ai.evaluation.score.label": "pass"}
        )
        logger.emit(body="an ordinary log line")  # no evaluation: ignored
    provider.force_flush()
    provider.shutdown()


def partial_success(session: Recording, response_type) -> tuple[int, str]:
    assert session.answers, "the exporter sent nothing"
    rejected, messages = 0, []
    for answer in session.answers:
        assert answer.status_code == 200, answer.text
        decoded = response_type.FromString(answer.content)
        fields = decoded.partial_success.ListFields()
        rejected += sum(v for f, v in fields if f.name.startswith("rejected"))
        messages.append(decoded.partial_success.error_message)
    return rejected, " | ".join(messages)


def test_the_opentelemetry_sdk_exports_verdicts_to_claimwatch_up(broker, topic_prefix, tmp_path):
    token, digest = new_token()
    create_topics(
        broker.bootstrap, [f"{topic_prefix}.verdicts", f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2
    )
    up = Up(
        tmp_path / "up",
        broker.bootstrap,
        topic_prefix,
        {"CLAIMWATCH_API__TOKEN_HASHES": f'["{digest}"]'},
    ).start()
    try:
        # Without a token an export is refused, as every change is.
        refused = httpx.post(
            up.url + "/v1/traces", content=b"{}", headers={"Content-Type": "application/json"}, timeout=10
        )
        assert refused.status_code == 401, refused.text
        assert "token" in refused.json()["message"]

        spans, logs, kept = Recording(), Recording(), InMemorySpanExporter()
        export_traces(up.url, token, spans, kept)
        export_evaluations(up.url, token, logs)

        rejected, message = partial_success(spans, ExportTraceServiceResponse)
        assert rejected == 2, message
        assert "otlp.count_mismatch" in message and "says 3 but 1 claims are attached" in message
        assert "otlp.unknown_label" in message and "'maybe'" in message
        assert "1 spans carried no verdicts" in message
        rejected, message = partial_success(logs, ExportLogsServiceResponse)
        assert rejected == 2, message
        assert "otlp.missing_field" in message and "gen_ai.evaluation.name" in message
        assert "otlp.unknown_label" in message and "'pass'" in message

        span_claims = sum(len(v) for v in SPAN_CLAIMS)
        expected = {SPAN_ROUTE: (len(SPAN_CLAIMS), span_claims), EVAL_ROUTE: (len(EVALUATIONS), len(EVALUATIONS))}
        up.wait_for(lambda: stored(up) == expected, 90, f"{expected} stored")
        want_dead = {"otlp.count_mismatch": 1, "otlp.unknown_label": 2, "otlp.missing_field": 1}
        up.wait_for(lambda: dead_letters(up) == want_dead, 60, f"dead letters {want_dead}")

        # An exporter's retry (the same spans again) is counted once.
        duplicates = metric(up, "claimwatch_duplicate_events_total")
        again = OTLPSpanExporter(endpoint=f"{up.url}/v1/traces", headers={"Authorization": f"Bearer {token}"})
        answered = [s for s in kept.get_finished_spans() if s.name.startswith("answer-")]
        assert again.export(answered).name == "SUCCESS"
        up.wait_for(
            lambda: metric(up, "claimwatch_duplicate_events_total") >= duplicates + len(SPAN_CLAIMS),
            60,
            "the retried spans to be read",
        )
        assert stored(up) == expected
        trace_id = format(answered[2].context.trace_id, "032x")
        shown = up.get(f"/api/traces/{trace_id}")
        verdicts = [c["verdict"] for c in shown["claims"]]
        assert sorted(verdicts) == sorted(SPAN_CLAIMS[2])
    finally:
        up.kill()
