import orjson
import pytest

from services.contract.decode import ContractError, Decoder, Rejection, validate_event
from services.contract.model import (
    MAX_CLAIMS,
    MAX_EVIDENCE,
    MAX_KEY_CHARS,
    MAX_LABEL_CHARS,
    MAX_TEXT_CHARS,
    MAX_VERSION_KEYS,
    VerdictEvent,
)
from tests.support.paths import FIXTURES

EXAMPLES = [orjson.loads(line) for line in (FIXTURES / "contract_examples.jsonl").read_bytes().splitlines()]
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


@pytest.mark.parametrize(
    "alias, canonical",
    [
        ("unlinked", "unsupported"),
        ("NOT_SUPPORTED", "unsupported"),
        ("nei", "unsupported"),
        ("Not_Enough_Info", "unsupported"),
        ("notenoughinfo", "unsupported"),
        ("neutral", "unsupported"),
        ("REFUTED", "contradicted"),
        ("contradiction", "contradicted"),
        ("Entailed", "supported"),
        ("entailment", "supported"),
        ("STALE", "stale"),
        ("No_Source", "no_source"),
        ("trivial", "trivial"),
    ],
)
def test_verdict_aliases_normalise(alias, canonical):
    event = decode({**BASE, "claims": [{"verdict": alias}]})
    assert event.claims[0].verdict == canonical


@pytest.mark.parametrize(
    "mutation, rule, path",
    [
        (
            {"claims": [{"verdict": "supported"}, {"verdict": "supported"}, {"verdict": "maybe"}]},
            "unknown_verdict",
            "claims[2].verdict",
        ),
        ({"observed_at": "2026-11-21T09:14:03"}, "timestamp_without_offset", "observed_at"),
        ({"observed_at": "21/11/2026"}, "bad_timestamp", "observed_at"),
        ({"observed_at": 1763716443}, "wrong_type", "observed_at"),
        ({"route": ""}, "bad_route", "route"),
        ({"route": "billing faq"}, "bad_route", "route"),
        ({"route": "x" * 129}, "bad_route", "route"),
        ({"sampling": {"rate": 0}}, "out_of_range", "sampling.rate"),
        ({"sampling": {"rate": 1.5}}, "out_of_range", "sampling.rate"),
        ({"sampling": {"rate": "0.5"}}, "wrong_type", "sampling.rate"),
        ({"route": "."}, "route.dot_segment", "route"),
        ({"route": ".."}, "route.dot_segment", "route"),
        ({"claims": "supported"}, "wrong_type", "claims"),
        ({"claims": [{"verdict": "supported", "score": "0.9"}]}, "wrong_type", "claims[0].score"),
        ({"claims": [{"verdict": "supported", "score": 1.5}]}, "out_of_range", "claims[0].score"),
        ({"query": {"answerable": "yes"}}, "wrong_type", "query.answerable"),
        ({"answer": {"action": "shipped"}}, "invalid_value", "answer.action"),
        ({"schema": "claimwatch.verdict/v2"}, "bad_schema", "schema"),
        ({"event_id": ""}, "bad_length", "event_id"),
        ({"attributes": {f"k{i}": "v" for i in range(33)}}, "attributes.too_many", "attributes"),
        # Shape bounds (issue 23, H1/H2): one event must not multiply the cost of every slice query and page.
        ({"versions": {f"k{i}": "v" for i in range(MAX_VERSION_KEYS + 1)}}, "versions.too_many", "versions"),
        ({"versions": {"k" * (MAX_KEY_CHARS + 1): "v"}}, "too_long", "versions." + "k" * 64),
        ({"versions": {"model": "v" * (MAX_LABEL_CHARS + 1)}}, "too_long", "versions.model"),
        ({"claims": [{"verdict": "supported"}] * (MAX_CLAIMS + 1)}, "claims.too_many", "claims"),
        ({"evidence": [{"chunk_id": "c"}] * (MAX_EVIDENCE + 1)}, "evidence.too_many", "evidence"),
        (
            {"signals": {"cherry_pick": ["c"] * (MAX_EVIDENCE + 1)}},
            "signals.cherry_pick.too_many",
            "signals.cherry_pick",
        ),
        ({"query": {"text": "q" * (MAX_TEXT_CHARS + 1)}}, "too_long", "query.text"),
        ({"claims": [{"verdict": "supported", "span": "s" * (MAX_TEXT_CHARS + 1)}]}, "too_long", "claims[0].span"),
        ({"event_id": "e" * 129}, "too_long", "event_id"),
    ],
)
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


@pytest.mark.parametrize(
    "raw, rule",
    [
        (b"\xff\xfe{}", "not_utf8"),
        (b"{not json", "not_json"),
        (b"[1, 2]", "not_object"),
        (b"[" * 5000 + b"]" * 5000, "not_json"),
        (None, "empty"),
        (b"", "not_json"),
    ],
)
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


# ---- batch envelopes: {"schema": "claimwatch.verdicts/v1", "events": [...]} -------------


def envelope(events, **over) -> bytes:
    return orjson.dumps({"schema": "claimwatch.verdicts/v1", "events": events, **over})


def test_single_event_message_decodes_to_one_unindexed_result():
    [(index, event)] = Decoder().decode_message(orjson.dumps(BASE))
    assert index is None and isinstance(event, VerdictEvent) and event.event_id == BASE["event_id"]
    [(index, rejection)] = Decoder().decode_message(orjson.dumps({**BASE, "route": "a b"}))
    assert index is None and (rejection.rule, rejection.problems[0].path) == ("bad_route", "route")


def test_good_envelope_decodes_every_event_with_its_index():
    events = [{**BASE, "event_id": f"e{i}"} for i in range(3)] + EXAMPLES[1:]
    decoded = Decoder().decode_message(envelope(events))
    assert [i for i, _ in decoded] == [0, 1, 2, 3, 4]
    assert [e.event_id for _, e in decoded] == ["e0", "e1", "e2", EXAMPLES[1]["event_id"], EXAMPLES[2]["event_id"]]


def test_bad_events_in_an_envelope_are_rejected_alone_with_their_index_rule_and_path():
    events = [{**BASE, "event_id": f"e{i}"} for i in range(8)]
    events[1] = {**events[1], "claims": [{"verdict": "maybe"}]}
    events[4] = {**events[4], "observed_at": "2026-11-21T09:14:03"}
    events[6] = [1, 2]
    decoder = Decoder()
    decoded = decoder.decode_message(envelope(events, producer="p-1"))  # unknown envelope fields are ignored
    rejected = {i: (r.rule, r.problems[0].path, r.event_id) for i, r in decoded if isinstance(r, Rejection)}
    assert rejected == {
        1: ("unknown_verdict", "claims[0].verdict", "e1"),
        4: ("timestamp_without_offset", "observed_at", "e4"),
        6: ("not_object", "$", None),
    }
    assert [e.event_id for _, e in decoded if isinstance(e, VerdictEvent)] == ["e0", "e2", "e3", "e5", "e7"]
    assert decoder.counts == {"unknown_verdict": 1, "timestamp_without_offset": 1, "not_object": 1}


@pytest.mark.parametrize(
    "doc, rule, path, says",
    [
        (
            {"schema": "claimwatch.verdicts/v2", "events": [BASE]},
            "envelope.bad_schema",
            "schema",
            "'claimwatch.verdicts/v1'",
        ),
        ({"events": [BASE]}, "envelope.bad_schema", "schema", "got None"),
        ({"schema": "claimwatch.verdicts/v1"}, "envelope.events.missing", "events", "needs an 'events' list"),
        (
            {"schema": "claimwatch.verdicts/v1", "events": {"0": BASE}},
            "envelope.events.wrong_type",
            "events",
            "got dict",
        ),
        ({"schema": "claimwatch.verdicts/v1", "events": None}, "envelope.events.wrong_type", "events", "got NoneType"),
        ({"schema": "claimwatch.verdicts/v1", "events": []}, "envelope.events.empty", "events", "1 to 1000"),
        (
            {"schema": "claimwatch.verdicts/v1", "events": [{"verdict": 1}] * 1001},
            "envelope.events.too_many",
            "events",
            "holds 1001 events; the limit is 1000",
        ),
    ],
)
def test_malformed_envelope_is_one_rejection_with_a_specific_rule(doc, rule, path, says):
    decoder = Decoder()
    [(index, rejection)] = decoder.decode_message(orjson.dumps(doc))
    assert index is None and isinstance(rejection, Rejection)
    assert (rejection.rule, rejection.problems[0].path) == (rule, path) and says in rejection.reason
    assert decoder.counts == {rule: 1}


@pytest.mark.parametrize(
    "raw, rule",
    [
        (b'{"schema": "claimwatch.verdicts/v1", "events": [', "not_json"),
        (b'{"schema": "claimwatch.verdicts/v1", "events": ["caf\xe9"]}', "not_utf8"),
        (None, "empty"),
    ],
)
def test_undecodable_envelope_bytes_keep_the_message_rules(raw, rule):
    [(index, rejection)] = Decoder().decode_message(raw)
    assert index is None and rejection.rule == rule


def test_envelope_over_the_size_limit_is_refused_whole_before_parsing():
    events = [{**BASE, "event_id": f"e{i}", "answer": {"text": "x" * 2000}} for i in range(600)]
    raw = envelope(events)
    assert len(raw) > 1 << 20
    [(index, rejection)] = Decoder().decode_message(raw)
    assert index is None and rejection.rule == "too_large" and f"message is {len(raw)} bytes" in rejection.reason
    assert len(Decoder(max_bytes=len(raw)).decode_message(raw)) == 600


def test_an_event_carrying_an_events_field_stays_one_event():
    [(index, event)] = Decoder().decode_message(orjson.dumps({**BASE, "events": [1]}))
    assert index is None and isinstance(event, VerdictEvent)


def test_decode_refuses_an_envelope_as_one_event():
    assert Decoder().decode(envelope([BASE])).rule == "bad_schema"


@pytest.mark.parametrize("route", ["...", ".well-known", "a/..", "v1.2"])
def test_routes_with_dots_that_are_not_whole_dot_segments_are_accepted(route):
    assert isinstance(decode({**BASE, "route": route}), VerdictEvent)


def test_a_dot_segment_route_says_why():
    result = decode({**BASE, "route": ".."})
    assert (
        result.reason == "route: route '..' is a URL dot segment, which links drop; use a name with a letter or digit"
    )
