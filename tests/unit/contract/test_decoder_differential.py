"""The msgspec decoder and the pydantic one it replaced (tests/support/pydantic_contract.py) decide alike.

On generated valid events, single-fault mutations of them, hostile input and the fuzz corpus, both accept
or both reject. An accepted event is the same contract JSON; a rejection's rule and path are one of the
problems the reference names (msgspec stops at the first fault it meets in input order, pydantic reports
several in field order).
"""

import copy
import string
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz_decoder import DICTIONARY, seeds
from services.contract.decode import Decoder
from services.contract.model import (
    ACTIONS,
    CLAIM_TYPES,
    MAX_ATTRIBUTES,
    MAX_CLAIMS,
    MAX_EVIDENCE,
    MAX_KEY_CHARS,
    MAX_LABEL_CHARS,
    MAX_TEXT_CHARS,
    MAX_VERSION_KEYS,
    QUERY_TYPES,
    STAGES,
    STAKES,
    VERDICT_ALIASES,
)
from services.contract.rejection import Rejection
from tests.support import pydantic_contract as reference
from tests.unit.contract.test_decode_properties import contract_shaped, encode, json_values, mutated_events
from tests.unit.contract.test_schema import ENVELOPES, corpus

pytestmark = pytest.mark.timeout(120)
CHECK = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(result) -> tuple:
    if isinstance(result, Rejection):
        return "rejected", result.event_id, result.route, result.observed_at
    return "accepted", result.to_json_dict()


def assert_agree(raw) -> list:
    """Both decoders on one message: the same decisions, events and rules; the reference's results."""
    expected, got = reference.decode_message(raw), Decoder().decode_message(raw)
    assert [i for i, _ in got] == [i for i, _ in expected]
    for (_, old), (_, new) in zip(expected, got):
        assert outcome(new) == outcome(old), (raw[:300], old, new)
        if isinstance(new, Rejection):
            named = {(p.rule, p.path) for p in old.problems}
            assert (new.rule, new.problems[0].path) in named, (raw[:300], old.problems, new.problems)
            assert new.problems[0].message
    single_old, single_new = reference.decode(raw), Decoder().decode(raw)
    assert outcome(single_new) == outcome(single_old)
    return [result for _, result in expected]


# --- valid events

label = st.text(string.ascii_letters + string.digits + "-_:@é😀", max_size=12)
text = st.text(max_size=40)
unit = st.floats(0, 1) | st.sampled_from([0, 1])
timestamps = st.sampled_from(
    [
        "2026-11-21T09:14:03Z",
        "2026-11-21T09:14:03.512+00:00",
        "2026-11-21 09:14:03+01:00",
        "2024-02-29T00:00:00z",
        "2000-02-29T23:59:59.999999-23:59",
        "0001-01-01T00:00:00Z",
        "2026-11-21t09:14:03-00:00",
        "9999-12-31T23:59:59+05:30",
    ]
)


def optional(strategy):
    return st.none() | strategy


def some(**fields) -> st.SearchStrategy[dict]:
    """An object with any subset of the given fields (a None value is written as null)."""
    return st.fixed_dictionaries({}, optional=dict(fields))


claims = some(
    claim_id=optional(label),
    text=optional(text),
    claim_type=optional(st.sampled_from(CLAIM_TYPES)),
    score=optional(unit),
    chunk_id=optional(label),
    source_id=optional(label),
    span=optional(text),
    labeler=optional(label),
).flatmap(
    lambda c: st.sampled_from(sorted(VERDICT_ALIASES)).map(lambda v: {**c, "verdict": v.upper() if len(v) % 2 else v})
)
evidence = some(
    source_id=optional(label), version=optional(label), used=optional(st.booleans()), text=optional(text)
).flatmap(lambda e: label.map(lambda chunk: {**e, "chunk_id": chunk}))
optional_fields = some(
    tenant=optional(label),
    query=some(
        text=optional(text),
        query_type=optional(st.sampled_from(QUERY_TYPES)),
        stakes=optional(st.sampled_from(STAKES)),
        answerable=optional(st.booleans()),
    ),
    answer=some(text=optional(text), action=optional(st.sampled_from(ACTIONS))),
    versions=st.dictionaries(label, label, max_size=4),
    evidence=st.lists(evidence, max_size=3),
    first_failed_stage=optional(st.sampled_from(STAGES)),
    signals=some(
        cherry_pick=st.lists(label, max_size=3),
        premise_similarity=optional(unit),
        support_delta=optional(st.floats(-2, 2)),
        sample_disagreement=optional(unit),
    ),
    attributes=st.dictionaries(label, label, max_size=4),
    sampling=some(rate=st.floats(0, 1, exclude_min=True) | st.just(1)),
    unknown=st.text(max_size=10) | st.integers(-(2**63), 2**63 - 1) | st.lists(st.booleans(), max_size=3),
)
valid_events = st.builds(
    lambda ids, ts, route, claims_, rest: {
        "schema": "claimwatch.verdict/v1",
        "event_id": ids[0],
        "trace_id": ids[1],
        "observed_at": ts,
        "route": route,
        "claims": claims_,
        **rest,
    },
    st.tuples(label.filter(bool), label.filter(bool)),
    timestamps,
    st.from_regex(r"[A-Za-z0-9._:/-]{1,20}", fullmatch=True).filter(lambda r: r not in (".", "..")),
    st.lists(claims, max_size=4),
    optional_fields,
)


@pytest.mark.slow
@CHECK
@given(valid_events)
def test_generated_valid_events_are_accepted_alike(event):
    results = assert_agree(encode(event))
    assert not isinstance(results[0], Rejection), results[0].problems


# --- one fault each


def too_many(limit: int, item) -> list:
    return [item] * (limit + 1)


FAULTS = [  # (path, value): the value replaces what is at the path; a missing value deletes it
    *[((key,), None) for key in ("schema", "event_id", "trace_id", "observed_at", "route", "claims")],
    (("claims", 0, "verdict"), None),
    (("evidence", 0, "chunk_id"), None),
    (("schema",), "claimwatch.verdict/v2"),
    (("schema",), 1),
    (("schema",), "claimwatch.verdicts/v1"),
    (("event_id",), ""),
    (("event_id",), "e" * 129),
    (("trace_id",), 7),
    (("tenant",), "t" * (MAX_LABEL_CHARS + 1)),
    (("observed_at",), "2026-11-21T09:14:03"),
    (("observed_at",), "21/11/2026"),
    (("observed_at",), 1763716443),
    (("observed_at",), "2026-02-29T00:00:00Z"),
    (("observed_at",), "2026-11-21T09:14:03+05:60"),
    (("route",), ""),
    (("route",), "billing faq"),
    (("route",), "x" * 129),
    (("route",), "."),
    (("route",), ".."),
    (("route",), ["r"]),
    (("claims",), "supported"),
    (("claims",), too_many(MAX_CLAIMS, {"verdict": "supported"})),
    (("claims", 0), "supported"),
    (("claims", 0, "verdict"), "maybe"),
    (("claims", 0, "verdict"), 1),
    (("claims", 0, "score"), 1.5),
    (("claims", 0, "score"), -0.01),
    (("claims", 0, "score"), "0.9"),
    (("claims", 0, "score"), True),
    (("claims", 0, "claim_type"), "Numeric"),
    (("claims", 0, "claim_type"), 3),
    (("claims", 0, "text"), "t" * (MAX_TEXT_CHARS + 1)),
    (("claims", 0, "labeler"), "l" * (MAX_LABEL_CHARS + 1)),
    (("claims", 0, "span"), {}),
    (("query",), None),
    (("query",), []),
    (("query", "answerable"), "yes"),
    (("query", "stakes"), "critical"),
    (("query", "query_type"), 1),
    (("query", "text"), "q" * (MAX_TEXT_CHARS + 1)),
    (("answer",), "served"),
    (("answer", "action"), "shipped"),
    (("answer", "action"), False),
    (("versions",), {f"k{i}": "v" for i in range(MAX_VERSION_KEYS + 1)}),
    (("versions",), {"k" * 70: "v"}),
    (("versions",), {"model": 1}),
    (("versions",), {"model": "m" * (MAX_LABEL_CHARS + 1)}),
    (("versions",), []),
    (("attributes",), {f"k{i}": "v" for i in range(MAX_ATTRIBUTES + 1)}),
    (("attributes",), {"k": None}),
    (("evidence",), too_many(MAX_EVIDENCE, {"chunk_id": "c"})),
    (("evidence",), {"chunk_id": "c"}),
    (("evidence", 0, "chunk_id"), "c" * (MAX_LABEL_CHARS + 1)),
    (("evidence", 0, "used"), "true"),
    (("signals",), 1),
    (("signals", "cherry_pick"), too_many(MAX_EVIDENCE, "c")),
    (("signals", "cherry_pick"), [1]),
    (("signals", "premise_similarity"), 1.1),
    (("signals", "support_delta"), "x"),
    (("first_failed_stage",), "PASSED"),
    (("sampling", "rate"), 0),
    (("sampling", "rate"), 1.5),
    (("sampling", "rate"), "0.5"),
    (("sampling",), None),
    (("versions",), {"k" * (MAX_KEY_CHARS + 1): "v"}),
]


def with_fault(event: dict, path: tuple, value) -> dict:
    """The event with one fault; the containers the path needs are added, and a path an earlier fault
    made impossible (a list where an object was) leaves the event as it is."""
    event = copy.deepcopy(event)
    parent = event
    for key, child in zip(path, path[1:]):
        if isinstance(key, int):
            if not isinstance(parent, list):
                return event
            parent.extend(
                {"verdict": "supported"} if path[0] == "claims" else {"chunk_id": "c"}
                for _ in range(key + 1 - len(parent))
            )
        elif not isinstance(parent, dict):
            return event
        elif key not in parent or parent[key] is None:
            parent[key] = [] if isinstance(child, int) else {}
        parent = parent[key]
    last = path[-1]
    if not isinstance(parent, list if isinstance(last, int) else dict) or (
        isinstance(last, int) and last >= len(parent)
    ):
        return event
    if value is None and last not in ("query", "sampling"):
        parent.pop(last, None) if isinstance(parent, dict) else parent.pop(last)
    else:
        parent[last] = value
    return event


@pytest.mark.slow
@CHECK
@given(valid_events, st.sampled_from(FAULTS))
def test_single_fault_mutations_are_refused_alike(event, fault):
    assert_agree(encode(with_fault(event, *fault)))


def test_the_schema_tests_mutation_corpus_and_envelopes():
    for _, doc in corpus() + ENVELOPES:
        assert_agree(encode(doc))


@pytest.mark.slow
@settings(CHECK, max_examples=500)
@given(valid_events, st.lists(st.sampled_from(FAULTS), min_size=2, max_size=3))
def test_several_faults_are_refused_with_one_of_the_reference_rules(event, faults):
    for fault in faults:
        event = with_fault(event, *fault)
    assert_agree(encode(event))


# --- hostile input


@CHECK
@given(st.binary(max_size=512) | st.text(max_size=200).map(str.encode))
def test_arbitrary_bytes(raw):
    assert_agree(raw)


@pytest.mark.slow
@CHECK
@given(json_values | contract_shaped | mutated_events())
def test_arbitrary_and_mutated_json(value):
    assert_agree(encode(value))


@CHECK
@given(st.lists(st.sampled_from(DICTIONARY) | st.sampled_from(list(':,{}[]" 0')), max_size=30))
def test_spliced_json_tokens(tokens):
    assert_agree("".join(tokens).encode())


@pytest.mark.slow
@CHECK
@given(
    st.lists(valid_events | mutated_events() | json_values, max_size=5),
    st.sampled_from(["claimwatch.verdicts/v1", "claimwatch.verdict/v1", None, 1]),
    st.booleans(),
)
def test_envelopes(events, schema, as_list):
    doc = {"events": events if as_list else {"0": events}} | ({} if schema is None else {"schema": schema})
    assert_agree(encode(doc))


def nested(levels: int, inner: bytes = b"1") -> bytes:
    return b"[" * levels + inner + b"]" * levels


CRAFTED = [
    *seeds(),
    None,
    "",
    "{}",
    '{"schema": "claimwatch.verdicts/v1"}',
    '{"schema": "claimwatch.verdicts/v1", "events": []}',
    '{"schema": "claimwatch.verdicts/v1", "events": null}',
    '{"events": 5}',
    b'{"a": "\xff"}',
    b'{"a": "\\ud800"}',
    nested(100_000),
    b"[" * 500_000,
    b'{"a":' * 100_000,
    nested(1025),
    b'{"schema": "claimwatch.verdicts/v1", "events": ' + nested(2000) + b"}",
    orjson.dumps({"schema": "claimwatch.verdicts/v1", "events": [{"schema": "claimwatch.verdict/v1"}] * 1001}),
    b'{"schema": "claimwatch.verdicts/v1", "events": 1e400}',
    b"[1e400]",
    b'"\\ud800"',
    b'{"schema": "claimwatch.verdicts/v1", "events": ' + b'{"a":' * 950 + b"1" + b"}" * 951,
    b'{"schema": "claimwatch.verdicts/v1", "events": [' + nested(950) + b"]}",
    b'{"schema": "claimwatch.verdict/v1", "x": ' + nested(950) + b"}",
    b"x" * ((1 << 20) + 1),
]


@pytest.mark.parametrize("raw", CRAFTED, ids=range(len(CRAFTED)))
def test_crafted_and_fuzz_corpus_inputs(raw):
    # On a thread of its own, as the worker decodes: the nesting cases sit near Python's recursion limit, which
    # counts the caller's frames too (a test runner's depth would otherwise decide which decoder gives up first).
    with ThreadPoolExecutor(1) as pool:
        pool.submit(assert_agree, raw).result()


def test_a_number_past_a_double_is_refused_only_where_the_event_reads_it():
    """The one known difference: msgspec skips unknown fields unread, so an out-of-range number there does not
    refuse an event (orjson refused the whole message). In a field the event reads, both refuse it as not JSON."""
    event = orjson.loads(seeds()[0])
    unread = orjson.dumps(event)[:-1] + b', "extra": 1e400}'
    assert reference.decode(unread).rule == "not_json"
    assert Decoder().decode(unread).to_json_dict() == reference.decode(orjson.dumps(event)).to_json_dict()
    read = orjson.dumps({**event, "claims": []})[:-1] + b', "sampling": {"rate": 1e400}}'
    assert reference.decode(read).rule == Decoder().decode(read).rule == "not_json"
