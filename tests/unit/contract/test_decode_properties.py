"""Hostile input: every input decodes to a valid event or to a rejection with a rule and a path.

No exception escapes and nothing hangs (hypothesis deadlines; a loose bound on the crafted cases,
only to catch hangs: the refusal speed itself is measured by bench/fuzz_decoder.py).
"""

import copy
import json
import time
from datetime import timedelta

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.contract.decode import DEFAULT_MAX_BYTES, Decoder, Rejection
from services.contract.model import ACTIONS, CLAIM_TYPES, QUERY_TYPES, STAGES, STAKES, VERDICT_ALIASES, VerdictEvent
from services.ingest.records import DeadLetter
from services.store.writer import dead_letter_row
from tests.support.paths import FIXTURES

pytestmark = pytest.mark.timeout(120)

EXAMPLES = [orjson.loads(line) for line in (FIXTURES / "contract_examples.jsonl").read_bytes().splitlines()]
HANG_BOUND = 20.0  # seconds; refusals take milliseconds, this only catches a hang
PROPERTY = settings(max_examples=300, deadline=timedelta(seconds=2), suppress_health_check=[HealthCheck.too_slow])


def check_outcome(raw) -> VerdictEvent | Rejection:
    """The decoder's contract: a valid event, or a rejection the DLQ can store and count."""
    result = Decoder().decode(raw)
    if isinstance(result, VerdictEvent):
        again = Decoder(max_bytes=4 * DEFAULT_MAX_BYTES).decode(orjson.dumps(result.to_json_dict()))
        assert again == result, "a valid event must survive its own contract JSON"
        return result
    assert isinstance(result, Rejection), type(result)
    assert result.problems and result.rule and result.reason
    for problem in result.problems:
        assert problem.rule and problem.path and problem.message
    row = dead_letter_row(DeadLetter("t", 0, 0, raw if isinstance(raw, bytes) else b"", result))
    orjson.dumps(row)
    return result


# --- strategies

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=40)
    | st.sampled_from(
        [
            *VERDICT_ALIASES,
            *ACTIONS,
            *QUERY_TYPES,
            *STAKES,
            *CLAIM_TYPES,
            *STAGES,
            "claimwatch.verdict/v1",
            "2026-11-21T09:14:03Z",
            "2026-11-21T09:14:03",
            "2026-13-45T99:99:99+00:00",
            "billing-faq",
            "bad route",
            "",
            "x" * 129,
        ]
    )
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=15,
)
FIELD_NAMES = [
    "schema",
    "event_id",
    "trace_id",
    "observed_at",
    "route",
    "tenant",
    "query",
    "answer",
    "versions",
    "evidence",
    "claims",
    "first_failed_stage",
    "signals",
    "attributes",
    "text",
    "verdict",
    "score",
    "chunk_id",
    "cherry_pick",
    "premise_similarity",
    "action",
    "answerable",
]
contract_shaped = st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), json_values, max_size=10)


def encode(value) -> bytes:
    """json, not orjson: it writes NaN, Infinity and integers past 64 bits, which the decoder must refuse."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def all_paths(value, prefix=()):
    if prefix:
        yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from all_paths(child, (*prefix, key))


def retype(value):
    return [value] if not isinstance(value, list) else {"0": value}


@st.composite
def mutated_events(draw):
    """A contract example with 1-3 fields dropped, replaced, retyped or wrapped at random paths."""
    event = copy.deepcopy(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(1, 3))):
        paths = list(all_paths(event))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = event
        for key in path[:-1]:
            parent = parent[key]
        key, op = path[-1], draw(st.sampled_from(["drop", "replace", "retype", "stringify", "add"]))
        if op == "drop":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(json_values)
        elif op == "retype":
            parent[key] = retype(parent[key])
        elif op == "stringify":
            parent[key] = json.dumps(parent[key])
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(FIELD_NAMES))] = draw(json_values)
        else:
            parent.append(draw(json_values))
    return event


# --- properties


@PROPERTY
@given(st.binary(max_size=2048))
def test_arbitrary_bytes(raw):
    check_outcome(raw)


@PROPERTY
@given(st.text(max_size=512) | st.none())
def test_arbitrary_text_and_none(raw):
    result = check_outcome(raw)
    assert raw is not None or result.rule == "empty"


@PROPERTY
@given(json_values)
def test_arbitrary_json_values(value):
    result = check_outcome(encode(value))
    if not isinstance(value, dict):
        assert isinstance(result, Rejection) and result.rule in ("not_object", "not_json")


@pytest.mark.slow
@PROPERTY
@given(contract_shaped)
def test_contract_shaped_objects(value):
    check_outcome(encode(value))


@pytest.mark.slow
@PROPERTY
@given(
    st.lists(contract_shaped | json_values | mutated_events(), max_size=6),
    st.sampled_from(["claimwatch.verdicts/v1", "claimwatch.verdict/v1", None, 1]),
    st.booleans(),
)
def test_envelopes_decode_event_by_event_or_as_one_rejection(events, schema, as_list):
    doc = {"events": events if as_list else {"0": events}} | ({} if schema is None else {"schema": schema})
    raw = encode(doc)
    decoded = Decoder().decode_message(raw)
    indices = [i for i, _ in decoded]
    if indices != [None]:
        assert indices == list(range(len(events))) and schema == "claimwatch.verdicts/v1"
    for _, result in decoded:
        assert isinstance(result, (VerdictEvent, Rejection))
        if isinstance(result, Rejection):
            dead_letter_row(DeadLetter("t", 0, 0, raw, result))


@pytest.mark.slow
@settings(PROPERTY, max_examples=600)
@given(mutated_events())
def test_mutated_contract_examples(event):
    check_outcome(encode(event))


REQUIRED = [
    ("schema",),
    ("event_id",),
    ("trace_id",),
    ("observed_at",),
    ("route",),
    ("claims",),
    ("claims", 1, "verdict"),
    ("evidence", 0, "chunk_id"),
]


@PROPERTY
@given(st.sampled_from(REQUIRED), json_values)
def test_a_missing_required_field_is_named(path, _):
    event = copy.deepcopy(EXAMPLES[0])
    parent = event
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    result = check_outcome(encode(event))
    expected = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")
    assert isinstance(result, Rejection) and (result.rule, result.problems[0].path) == ("missing_field", expected)


# --- crafted hostile input: refused with the right rule, cheaply


def refuse(raw: bytes) -> Rejection:
    started = time.perf_counter()
    result = check_outcome(raw)
    assert time.perf_counter() - started < HANG_BOUND
    assert isinstance(result, Rejection)
    return result


def nested(levels: int, inner: bytes = b"1", kind: str = "array") -> bytes:
    open_, close = (b"[", b"]") if kind == "array" else (b'{"a":', b"}")
    return open_ * levels + inner + close * levels


def with_claims(claims_json: bytes) -> bytes:
    head = orjson.dumps({k: v for k, v in EXAMPLES[0].items() if k != "claims"})
    return head[:-1] + b',"claims":' + claims_json + b"}"


def assert_depth_refusal(result: Rejection):
    # orjson stops at depth 1024 before reading further; the decoder files that under not_json
    assert result.rule in ("too_deep", "not_json") and "depth" in result.reason.lower(), result.reason


@pytest.mark.parametrize(
    "raw",
    [
        nested(100_000),
        nested(100_000, kind="object"),
        b"[" * 500_000,
        with_claims(nested(100_000)),
        nested(1025),
    ],
    ids=["arrays-100k", "objects-100k", "unclosed-500k", "inside-claims-100k", "just-past-the-limit"],
)
def test_deep_nesting_is_refused_by_the_depth_limit(raw):
    assert_depth_refusal(refuse(raw))


def test_nesting_just_under_the_parser_limit_is_a_wrong_type():
    result = refuse(with_claims(b"[" + nested(1000, b'{"verdict": "supported"}') + b"]"))
    assert (result.rule, result.problems[0].path) == ("wrong_type", "claims[0]")


def test_two_million_levels_are_refused_by_size():
    result = refuse(nested(2_000_000))
    assert result.rule == "too_large" and "4000001 bytes" in result.reason


def test_huge_event_is_refused_by_size_before_parsing():
    event = {**EXAMPLES[0], "answer": {"text": "x" * (3 << 20), "action": "served"}}
    raw = orjson.dumps(event)
    assert refuse(raw).rule == "too_large"
    assert refuse(raw[:-7]).rule == "too_large"  # truncated, not JSON: size is still checked first


def test_a_million_claims_are_refused_by_size():
    result = refuse(with_claims(b"[" + b",".join([b'{"verdict":"supported"}'] * 1_000_000) + b"]"))
    assert result.rule == "too_large" and result.problems[0].path == "$"


def test_half_a_million_claims_under_the_size_limit_are_refused():
    raw = with_claims(b"[" + b",".join([b"0"] * 520_000) + b"]")
    assert len(raw) <= DEFAULT_MAX_BYTES
    result = refuse(raw)
    assert result.rule in ("wrong_type", "claims.too_many") and result.problems[0].path.startswith("claims")
    assert len(result.problems) <= 10


def test_the_size_limit_is_inclusive():
    base = orjson.dumps({**EXAMPLES[2], "padding": ""})  # unknown fields are ignored, so only the size counts
    fill = DEFAULT_MAX_BYTES - len(base)
    exact = orjson.dumps({**EXAMPLES[2], "padding": "t" * fill})
    assert len(exact) == DEFAULT_MAX_BYTES and isinstance(check_outcome(exact), VerdictEvent)
    over = orjson.dumps({**EXAMPLES[2], "padding": "t" * (fill + 1)})
    assert refuse(over).rule == "too_large"
