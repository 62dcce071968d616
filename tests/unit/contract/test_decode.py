import orjson
import pytest

from services.contract.decode import Decoder, Rejection, validate_event, ContractError
from services.contract.model import VerdictEvent

from pathlib import Path
from tests.support.paths import FIXTURES

EXAMPLES = [orjson.loads(l) for l in (FIXTURES / "contract_examples.jsonl").read_bytes().splitlines()]
BASE = EXAMPLES[0]


def decode(obj) -> VerdictEvent | Rejection:
    return Decoder().decode(obj if isinstance(obj, bytes) else orjson.dumps(obj))


def test_contract_examples_are_valid():
    events = [decode(e) for e in EXAMPLES]
    assert all(isinstance(e, VerdictEvent) for e in events)
    first, abstention, count_only = events
    assert [c.verdict for c in first.claims] == ["contradicted", "supported", "unsupported"]  # 'unlinked' alias
    assert abstention.claims == [] and abstention.answer.action == "abstained"
    assert [c.verdict for c in count_only.claims] == ["supported", "supported", "unsupported"]
    assert count_only.observed_at.utcoffset().total_seconds() == 3600


@pytest.mark.parametrize("alias, canonical", [
    ("unlinked", "unsupported"), ("NOT_SUPPORTED", "unsupported"), ("nei", "unsupported"),
    ("Not_Enough_Info", "unsupported"), ("notenoughinfo", "unsupported"), ("neutral", "unsupported"),
    ("REFUTED", "contradicted"), ("contradiction", "contradicted"), ("Entailed", "supported"),
    ("entailment", "supported"), ("STALE", "stale"), ("No_Source", "no_source"), ("trivial", "trivial"),
])
def test_verdict_aliases_normalise(alias, canonical):
    event = decode({**BASE, "claims": [{"verdict": alias}]})
    assert event.claims[0].verdict == canonical


@pytest.mark.parametrize("mutation, rule, path", [
    ({"claims": [{"verdict": "supported"}, {"verdict": "supported"}, {"verdict": "maybe"}]}, "unknown_verdict", "claims[2].verdict"),
    ({"observed_at": "2026-11-21T09:14:03"}, "timestamp_without_offset", "observed_at"),
    ({"observed_at": "21/11/2026"}, "bad_timestamp", "observed_at"),
    ({"observed_at": 1763716443}, "wrong_type", "observed_at"),
    ({"route": ""}, "bad_route", "route"),
    ({"route": "billing faq"}, "bad_route", "route"),
    ({"route": "x" * 129}, "bad_route", "route"),
    ({"claims": "supported"}, "wrong_type", "claims"),
    ({"claims": [{"verdict": "supported", "score": "0.9"}]}, "wrong_type", "claims[0].score"),
    ({"claims": [{"verdict": "supported", "score": 1.5}]}, "out_of_range", "claims[0].score"),
    ({"query": {"answerable": "yes"}}, "wrong_type", "query.answerable"),
    ({"answer": {"action": "shipped"}}, "invalid_value", "answer.action"),
    ({"schema": "claimwatch.verdict/v2"}, "bad_schema", "schema"),
    ({"event_id": ""}, "bad_length", "event_id"),
    ({"attributes": {f"k{i}": "v" for i in range(33)}}, "too_many_items", "attributes"),
])
def test_bad_events_get_rule_and_path(mutation, rule, path):
    result = decode({**BASE, **mutation})
    assert isinstance(result, Rejection)
    assert (result.rule, result.problems[0].path) == (rule, path)
    assert result.reason.startswith(f"{path}: ")


def test_missing_required_field():
    for field in ("schema", "event_id", "trace_id", "observed_at", "route", "claims"):
        result = decode({k: v for k, v in BASE.items() if k != field})
        assert isinstance(result, Rejection) and result.rule == "missing_field"
        assert result.problems[0].path == field


def test_unknown_verdict_message_is_specific():
    result = decode({**BASE, "claims": [{"verdict": "supported"}] * 2 + [{"verdict": "maybe"}]})
    assert str(result.problems[0]) == "claims[2].verdict: unknown verdict 'maybe'"


@pytest.mark.parametrize("raw, rule", [
    (b"\xff\xfe{}", "not_utf8"), (b"{not json", "not_json"), (b"[1, 2]", "not_object"),
    (b"[" * 5000 + b"]" * 5000, "not_json"), (None, "empty"), (b"", "not_json"),
])
def test_undecodable_bytes(raw, rule):
    result = Decoder().decode(raw)
    assert isinstance(result, Rejection) and result.rule == rule


def test_oversize_is_refused_before_parsing():
    raw = b'{"pad": "' + b"x" * (1 << 20) + b'"}'
    result = Decoder().decode(raw)
    assert result.rule == "too_large" and "limit is 1048576" in result.reason
    assert Decoder(max_bytes=len(raw) + 1).decode(raw).rule == "missing_field"


def test_unknown_top_level_fields_are_ignored():
    assert isinstance(decode({**BASE, "future_field": {"x": 1}}), VerdictEvent)


def test_counts_per_rule_and_ids_kept():
    d = Decoder()
    d.decode(b"nope")
    d.decode(orjson.dumps({**BASE, "route": "a b"}))
    d.decode(orjson.dumps({**BASE, "route": "c d"}))
    assert d.counts == {"not_json": 1, "bad_route": 2}
    r = d.decode(orjson.dumps({**BASE, "claims": 3}))
    assert r.event_id == BASE["event_id"] and r.route == BASE["route"]


def test_validate_event_raises_with_reason():
    with pytest.raises(ContractError, match=r"claims\[0\]\.verdict: unknown verdict 'x'"):
        validate_event({**BASE, "claims": [{"verdict": "x"}]})
    assert validate_event(BASE).event_id == BASE["event_id"]
