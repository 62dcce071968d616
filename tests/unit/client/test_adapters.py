"""Adapters: source record -> events -> the real chDB engine -> rates equal the counts the source implied.

Expected figures are counted by hand from the fixtures in tests/fixtures/adapters/,
not computed by the code under test.
"""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from services.client.adapters import FORMATS, get_adapter
from services.client.adapters.convert import ConversionError, convert_file, convert_records, load_events
from services.contract.decode import validate_event
from services.contract.errors import RecordError
from services.store.retention import KEEP_EVERYTHING
from services.store.writer import EventWriter
from tests.support.paths import FIXTURES

FIXTURES = FIXTURES / "adapters"
NOW = datetime(2026, 11, 21, 14, 0, tzinfo=UTC)
RATE_COLUMNS = (
    "events",
    "claims",
    "failed",
    "supported",
    "unsupported",
    "contradicted",
    "overreach",
    "stale",
    "no_source",
    "trivial",
)


@pytest.fixture(scope="module")
def store(tmp_path_factory, store_templates):
    # fixed event times must not age past a TTL
    s = store_templates.fresh(tmp_path_factory.mktemp("adapters-store") / "clickhouse", KEEP_EVERYTHING)
    yield s
    s.close()


def rates(store, route: str) -> dict:
    sums = ", ".join(f"sum({c}) AS {c}" for c in RATE_COLUMNS)
    rows = store.query(f"SELECT {sums} FROM rate_minute WHERE dim = '' AND route = {{route:String}}", {"route": route})
    return rows[0]


def convert(fmt: str, route: str | None, **kwargs) -> tuple[list[dict], object]:
    out = io.BytesIO()
    report = convert_file(fmt, FIXTURES / f"{fmt.replace('-', '_')}.jsonl", out, route=route, now=NOW, **kwargs)
    return [orjson.loads(line) for line in out.getvalue().splitlines()], report


def ingest(store, events: list[dict]) -> None:
    EventWriter(store).write([validate_event(e) for e in events])


def expect(
    events, claims, failed, supported, unsupported=0, contradicted=0, overreach=0, stale=0, no_source=0, trivial=0
) -> dict:
    return dict(
        events=events,
        claims=claims,
        failed=failed,
        supported=supported,
        unsupported=unsupported,
        contradicted=contradicted,
        overreach=overreach,
        stale=stale,
        no_source=no_source,
        trivial=trivial,
    )


# fmt, --route, {route: figures the source implies}
ROUND_TRIPS = [
    ("judge-card", "billing-faq", {"billing-faq": expect(8, 18, 7, 11, unsupported=4, contradicted=3)}),
    ("pipeline", "returns", {"returns": expect(5, 13, 6, 7, unsupported=2, contradicted=1, overreach=2, stale=1)}),
    (
        "monitor-record",
        None,
        {
            "parcel-status": expect(5, 16, 2, 14, unsupported=1, contradicted=1, trivial=1),
            "checkout-help": expect(3, 10, 4, 6, unsupported=2, stale=1, no_source=1),
        },
    ),
    ("fever", "wiki-facts", {"wiki-facts": expect(8, 8, 4, 4, unsupported=2, contradicted=2)}),
    ("faithfulness", "support-rag", {"support-rag": expect(6, 14, 4, 10, unsupported=4)}),
]


@pytest.mark.slow
@pytest.mark.parametrize("fmt, route, expected", ROUND_TRIPS, ids=[r[0] for r in ROUND_TRIPS])
def test_round_trip_rates_equal_the_source_counts(store, fmt, route, expected):
    events, report = convert(fmt, route)
    assert report.ok and report.written and report.events == len(events)
    ingest(store, events)
    for name, figures in expected.items():
        assert rates(store, name) == figures
    # Converting again gives the same event ids: re-sent, they are counted once.
    again, _ = convert(fmt, route)
    assert [e["event_id"] for e in again] == [e["event_id"] for e in events]
    ingest(store, again)
    for name, figures in expected.items():
        assert rates(store, name) == figures


def test_judge_card_rate_mismatch_is_reported_not_trusted():
    events, report = convert("judge-card", "billing-faq")
    assert report.warnings == [
        "line 6: hallucination_rate says 0.0 but the claims give 1/2 = 0.500; "
        "the events carry the per-claim verdicts, not the stated figure"
    ]
    assert [c["verdict"] for c in events[5]["claims"]] == ["supported", "unsupported"]


def test_faithfulness_score_mismatch_and_gate_contradiction_are_reported():
    _, report = convert("faithfulness", "support-rag")
    assert [w.split(":")[0] for w in report.warnings] == ["line 5"]
    _, report = convert("monitor-record", None)
    assert report.warnings == ["line 7: first_failed_stage is 'passed' but verdict_counts hold 1 failed claim(s)"]


def test_count_only_records_carry_only_verdicts():
    events, _ = convert("monitor-record", None)
    assert events[0]["claims"] == [{"verdict": "supported"}] * 3 + [{"verdict": "unsupported"}]
    assert "query" not in events[0] or "text" not in events[0]["query"]
    assert events[0]["versions"] == {
        "corpus": "carriers@2026-11-20",
        "model": "gen-2026-10",
        "verifier": "serving-gate@1.4",
    }


def test_pipeline_keeps_spans_evidence_and_scores():
    events, _ = convert("pipeline", "returns")
    first = events[0]
    assert first["trace_id"] == "req-5521"
    assert first["claims"][1] == {
        "claim_id": "c2",
        "text": "Sale items can be returned within 30 days.",
        "claim_type": "numeric",
        "verdict": "contradicted",
        "score": 0.91,
        "chunk_id": "ret-02#1",
        "source_id": "returns-policy",
        "span": "within 14 days",
        "labeler": "verifier:claimcheck@3.2",
    }
    assert first["claims"][0]["score"] == 0.94  # from classify, as decide has none
    assert [e["chunk_id"] for e in first["evidence"]] == ["ret-02#1"]


def test_fever_uses_the_prediction_then_the_gold_label():
    events, _ = convert("fever", "wiki-facts")
    assert events[0]["claims"][0]["labeler"] == "verifier:nli-fever@1.3"
    assert events[6]["claims"][0] == {
        "claim_id": "c1",
        "text": "Ada Lovelace owned a cat named Puff.",
        "verdict": "unsupported",
        "labeler": "human:fever",
    }
    assert events[3]["observed_at"] == "2026-11-21T09:30:00Z"
    assert events[0]["observed_at"] == "2026-11-21T14:00:00Z"  # no time in FEVER: the conversion time
    assert [e["chunk_id"] for e in events[1]["evidence"]] == ["Mount_Everest#1", "Andes#0"]


def write_lines(path: Path, records: list) -> Path:
    path.write_bytes(b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in records))
    return path


JUDGE = {"card_id": "jc-1", "created_at": "2026-11-21T09:00:00Z", "claims": [{"text": "t", "label": "supported"}]}
MONITOR = {
    "request_id": "r-1",
    "ts": "2026-11-21T09:00:00Z",
    "route": "billing-faq",
    "verdict_counts": {"supported": 1},
}


@pytest.mark.parametrize(
    "fmt, record, field, message",
    [
        (
            "judge-card",
            {**JUDGE, "claims": [{"text": "t", "label": "mostly_true"}]},
            "claims[0].label",
            "unknown label 'mostly_true'; accepted: contradicted, supported, unsupported",
        ),
        ("judge-card", {**JUDGE, "claims": [{"label": "supported"}]}, "claims[0].text", "required field is missing"),
        ("judge-card", {**JUDGE, "created_at": "2026-11-21T09:00:00"}, "created_at", "has no offset"),
        ("judge-card", {**JUDGE, "card_id": 1.5}, "card_id", "expected a string or an integer"),
        (
            "pipeline",
            {
                "run_id": "r",
                "finished_at": "2026-11-21T09:00:00Z",
                "stages": {
                    "extract": [{"claim_id": "c1", "text": "t"}],
                    "decide": [{"claim_id": "c1", "verdict": "PARTIAL"}],
                },
            },
            "stages.decide[claim c1].verdict",
            "unknown label 'PARTIAL'; accepted: contradicted, overreach, stale, supported, unlinked",
        ),
        (
            "pipeline",
            {
                "run_id": "r",
                "finished_at": "2026-11-21T09:00:00Z",
                "stages": {
                    "extract": [{"claim_id": "c1", "text": "t"}, {"claim_id": "c2", "text": "u"}],
                    "decide": [{"claim_id": "c1", "verdict": "SUPPORTED"}],
                },
            },
            "stages.decide",
            "claim 'c2' has no verdict",
        ),
        (
            "pipeline",
            {
                "run_id": "r",
                "finished_at": "2026-11-21T09:00:00Z",
                "stages": {
                    "extract": [{"claim_id": "c1", "text": "t"}],
                    "decide": [{"claim_id": "c9", "verdict": "SUPPORTED"}],
                },
            },
            "stages.decide",
            "claim 'c9' was never extracted",
        ),
        ("pipeline", {"run_id": "r", "finished_at": "2026-11-21T09:00:00Z"}, "stages", "required field is missing"),
        (
            "monitor-record",
            {**MONITOR, "verdict_counts": {"hallucinated": 2}},
            "verdict_counts.hallucinated",
            "unknown label 'hallucinated'; accepted: contradicted, contradiction, entailed",
        ),
        (
            "monitor-record",
            {**MONITOR, "verdict_counts": {"supported": -1}},
            "verdict_counts.supported",
            "out of range",
        ),
        (
            "monitor-record",
            {**MONITOR, "verdict_counts": {"supported": "3"}},
            "verdict_counts.supported",
            "expected an integer, got str",
        ),
        (
            "monitor-record",
            {**MONITOR, "verdict_counts": {"supported": 10**6}},
            "verdict_counts.supported",
            "out of range",
        ),
        (
            "monitor-record",
            {**MONITOR, "first_failed_stage": "generation"},
            "event.first_failed_stage",
            "contract rule",
        ),
        (
            "fever",
            {"id": 1, "claim": "c", "label": "TRUE"},
            "label",
            "unknown label 'TRUE'; accepted: not enough info, refutes, supports",
        ),
        ("fever", {"id": 1, "claim": "c"}, "predicted_label", "required field is missing"),
        ("fever", {"id": 1, "label": "SUPPORTS"}, "claim", "required field is missing"),
        (
            "fever",
            {"id": 1, "claim": "c", "label": "SUPPORTS", "evidence": [[[1, 2, "Page"]]]},
            "evidence[0][0]",
            "expected [annotation_id",
        ),
        (
            "faithfulness",
            {"statements": [{"statement": "s", "verdict": True}]},
            "statements[0].verdict",
            "unknown label True; accepted: 0, 1",
        ),
        (
            "faithfulness",
            {"statements": [{"statement": "s", "verdict": "1"}]},
            "statements[0].verdict",
            "accepted: 0, 1",
        ),
        ("faithfulness", {"statements": [{"verdict": 1}]}, "statements[0].statement", "required field is missing"),
    ],
)
def test_bad_records_name_the_line_and_the_field(tmp_path, fmt, record, field, message):
    path = write_lines(tmp_path / "in.jsonl", [record] if fmt != "judge-card" else [JUDGE, record])
    route = None if fmt == "monitor-record" else "billing-faq"
    out = tmp_path / "out.jsonl"
    report = convert_file(fmt, path, out, route=route, now=NOW)
    assert not report.written and not out.exists()
    [failure] = report.failures
    assert failure.line == (2 if fmt == "judge-card" else 1)
    assert failure.field == field
    assert message in failure.message


def test_nothing_is_half_written(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("previous content\n")
    bad = {**JUDGE, "card_id": "jc-2", "claims": [{"text": "t", "label": "maybe"}]}
    path = write_lines(tmp_path / "in.jsonl", [JUDGE, bad, b"{not json", {**JUDGE, "card_id": "jc-3"}])
    report = convert_file("judge-card", path, out, route="billing-faq")
    assert out.read_text() == "previous content\n"
    assert [(f.line, f.rule) for f in report.failures] == [(2, "unknown_label"), (3, "not_json")]
    assert "nothing was written" in report.summary()

    report = convert_file("judge-card", path, out, route="billing-faq", keep_good=True)
    assert report.written and report.events == 2 and len(report.failures) == 2
    assert [orjson.loads(line)["trace_id"] for line in out.read_text().splitlines()] == ["jc-1", "jc-3"]


def test_mixed_formats_are_refused_even_with_keep_good(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", [JUDGE, MONITOR, {**JUDGE, "card_id": "jc-2"}])
    out = io.StringIO()
    report = convert_file("judge-card", path, out, route="billing-faq", keep_good=True)
    assert not report.written and out.getvalue() == ""
    [failure] = report.failures
    assert (failure.line, failure.rule) == (2, "mixed_format")
    assert "looks like a monitor-record record, not judge-card" in failure.message


def test_a_line_by_line_format_field_allows_mixing(tmp_path):
    path = write_lines(
        tmp_path / "in.jsonl",
        [
            {**JUDGE, "format": "judge-card"},
            {**MONITOR, "format": "monitor-record"},
            {**MONITOR, "request_id": "r-2", "format": "fever"},
        ],
    )
    out = io.StringIO()
    report = convert_file(None, path, out, route="billing-faq", format_field="format", keep_good=True)
    assert report.formats == {"judge-card": 1, "monitor-record": 1}
    assert [(f.line, f.field) for f in report.failures] == [(3, "predicted_label")]
    assert len(out.getvalue().splitlines()) == 2
    report = convert_file(
        None, write_lines(tmp_path / "b.jsonl", [JUDGE]), io.StringIO(), route="r", format_field="format"
    )
    assert [(f.field, f.rule) for f in report.failures] == [("format", "missing_field")]


def test_lines_that_are_already_verdict_events_are_pointed_at_produce(tmp_path):
    event = {
        "schema": "claimwatch.verdict/v1",
        "event_id": "e",
        "trace_id": "t",
        "observed_at": "2026-11-21T09:00:00Z",
        "route": "r",
        "claims": [],
    }
    report = convert_file("judge-card", write_lines(tmp_path / "in.jsonl", [event]), io.BytesIO(), route="r")
    assert "already a claimwatch verdict event" in report.failures[0].message


def test_duplicate_source_ids_are_warned_about(tmp_path):
    path = write_lines(tmp_path / "in.jsonl", [JUDGE, JUDGE])
    report = convert_file("judge-card", path, io.BytesIO(), route="billing-faq")
    assert report.ok and report.warnings == [
        "line 2: same event_id as line 1 (same source record id); it is counted once downstream"
    ]


def test_route_rules(tmp_path):
    report = convert_file("monitor-record", write_lines(tmp_path / "m.jsonl", [MONITOR]), io.BytesIO(), route="other")
    assert report.failures[0].rule == "route_conflict" and "drop --route" in report.failures[0].message
    report = convert_file("judge-card", write_lines(tmp_path / "j.jsonl", [JUDGE]), io.BytesIO(), route=None)
    assert (report.failures[0].field, report.failures[0].message) == (
        "route",
        "this format carries no route; pass one (--route ROUTE)",
    )
    report = convert_file("judge-card", write_lines(tmp_path / "k.jsonl", [JUDGE]), io.BytesIO(), route="bad route")
    assert report.failures[0].field == "event.route"


def test_formats_without_time_need_a_conversion_time(tmp_path):
    path = write_lines(tmp_path / "f.jsonl", [{"id": 1, "claim": "c", "label": "SUPPORTS"}])
    report = convert_file("fever", path, io.BytesIO(), route="wiki-facts")
    assert report.failures[0].field == "observed_at" and "now=" in report.failures[0].message


# What the tools emit at the least: no id, no time (the monitor record names no route either).
MINIMAL = {
    "judge-card": {
        "claims": [{"text": "t", "label": "unsupported", "evidence_phrase": None}],
        "hallucination_rate": 1.0,
        "decision_basis": "retrieved policy",
    },
    "pipeline": {
        "stages": {"extract": [{"claim_id": "c1", "text": "t"}], "decide": [{"claim_id": "c1", "verdict": "UNLINKED"}]}
    },
    "monitor-record": {"verdict_counts": {"supported": 1, "unsupported": 1}},
    "fever": {"claim": "c", "predicted_label": "REFUTES"},
    "faithfulness": {"statements": [{"statement": "s", "verdict": 0}]},
}
NAMESPACE = uuid.UUID("0b7c4d1e-6f0a-5c1b-9a57-c1a1a1c0ffee")  # fixed forever: ids must not change between releases


def content_id(fmt: str, record: dict, line: int) -> str:
    """The documented rule, written out: uuid5 of format, SHA-256 of the sorted-key JSON, line number."""
    digest = hashlib.sha256(
        json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()[:32]
    return str(uuid.uuid5(NAMESPACE, f"{fmt}/sha256:{digest}@{line}"))


@pytest.mark.parametrize("fmt", MINIMAL)
def test_records_without_id_or_time_convert_with_ids_from_content_and_line(tmp_path, fmt):
    record = MINIMAL[fmt]
    reordered = b"  " + json.dumps(dict(reversed(record.items())), indent=None).encode()  # same content, other bytes
    path = write_lines(tmp_path / "in.jsonl", [record, record, b"", reordered])
    out = io.BytesIO()
    report = convert_file(fmt, path, out, route="r", now=NOW)
    events = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert (
        report.ok and report.warnings == [] and (report.stamped, report.stamped_at) == (3, "2026-11-21T14:00:00.000Z")
    )
    assert [e["event_id"] for e in events] == [content_id(fmt, record, n) for n in (1, 2, 4)]
    assert {e["observed_at"] for e in events} == {"2026-11-21T14:00:00Z"}
    again, _ = load_events(fmt, path, route="r", now=datetime(2027, 1, 1, tzinfo=UTC))
    assert [e["event_id"] for e in again] == [e["event_id"] for e in events]  # the time is no part of the id
    changed = convert_records(fmt, [{**record, "extra": 1}], route="r", now=NOW)[0]["event_id"]
    assert changed != events[0]["event_id"]


@pytest.mark.parametrize(
    "fmt, field",
    [
        ("judge-card", "card_id"),
        ("pipeline", "run_id"),
        ("monitor-record", "request_id"),
        ("fever", "id"),
        ("faithfulness", "sample_id"),
    ],
)
def test_an_own_id_gives_the_id_and_an_empty_one_counts_as_none(fmt, field):
    record = MINIMAL[fmt]
    [event] = convert_records(fmt, [{**record, field: "src-1"}], route="r", now=NOW)
    assert event["event_id"] == str(uuid.uuid5(NAMESPACE, f"{fmt}/src-1"))
    [event] = convert_records(fmt, [{**record, field: ""}], route="r", now=NOW)
    assert event["event_id"] == content_id(fmt, {**record, field: ""}, 1)


def test_an_id_cannot_be_derived_from_a_record_that_is_not_json():
    with pytest.raises(RecordError, match="line 1: id: missing, and the record is not JSON"):
        convert_records("fever", [{**MINIMAL["fever"], "extra": object()}], route="r", now=NOW)


def test_own_times_are_kept_and_not_counted_as_stamped():
    _, report = convert("judge-card", "billing-faq")
    assert report.stamped == 0
    record = {**MINIMAL["judge-card"], "created_at": "2026-11-21T09:00:00+01:00"}
    [event] = convert_records("judge-card", [record], route="r", now=NOW)
    assert event["observed_at"] == "2026-11-21T09:00:00+01:00"
    with pytest.raises(RecordError, match="created_at: required field is missing"):
        convert_records("judge-card", [MINIMAL["judge-card"]], route="r")  # from Python, the time is explicit


def test_load_events_for_produce(tmp_path):
    events, report = load_events("judge-card", FIXTURES / "judge_card.jsonl", route="billing-faq")
    assert report.written and len(events) == 8
    bad = write_lines(tmp_path / "bad.jsonl", [JUDGE, {"card_id": "x"}])
    events, report = load_events("judge-card", bad, route="billing-faq")
    assert events == [] and not report.written and report.failures[0].field == "claims"
    events, report = load_events("judge-card", bad, route="billing-faq", keep_good=True)
    assert len(events) == 1


def test_registry_and_arguments():
    assert set(FORMATS) == {"judge-card", "pipeline", "monitor-record", "fever", "faithfulness", "otel"}
    assert all(get_adapter(name).description for name in FORMATS)
    with pytest.raises(KeyError, match="use one of: judge-card"):
        get_adapter("ragas")
    with pytest.raises(ConversionError, match="unknown format 'ragas'"):
        convert_file("ragas", FIXTURES / "judge_card.jsonl", io.BytesIO(), route="r")
    with pytest.raises(ConversionError, match="cannot read"):
        convert_file("judge-card", FIXTURES / "missing.jsonl", io.BytesIO(), route="r")
    with pytest.raises(RecordError) as caught:
        convert_records("fever", [{"id": 1, "claim": "c", "label": "maybe"}], route="r", now=NOW)
    assert str(caught.value).startswith("line 1: label: unknown label 'maybe'")


def test_adapters_are_pure():
    record = orjson.loads((FIXTURES / "pipeline.jsonl").read_bytes().splitlines()[0])
    snapshot = orjson.dumps(record)
    adapter = get_adapter("pipeline")
    first = adapter.to_events(record, route="returns", line=1)
    assert adapter.to_events(record, route="returns", line=1) == first
    assert orjson.dumps(record) == snapshot
