"""The shipped JSON Schema and the ingest Decoder accept and refuse the same events.

Corpus: the contract's three examples, each mutated one field at a time (valid and
invalid values, missing fields, nulls, unknown fields), plus hypothesis-generated
combinations of those mutations and a timestamp grammar. Both validators people use
are checked: `jsonschema` (Python `re`) and `jsonschema-rs` (Rust regex).

What JSON Schema cannot express, and so is checked by the decoder alone:
- the 1 MiB size limit (a schema sees a parsed document, not its bytes);
- UTF-8 / JSON well-formedness of the raw bytes (same reason);
- (fixed) UTC-offset minutes 60-99 (`+05:60`), which Python's
  `datetime.fromisoformat` accepts and RFC 3339 does not. The schema follows RFC 3339.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import jsonschema_rs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.contract.decode import Decoder, Rejection
from services.contract.model import (
    ACTIONS,
    CLAIM_TYPES,
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
from tests.support.paths import ROOT

SCHEMA_PATH = ROOT / "services" / "contract" / "verdict-event-v1.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
PY_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
RS_VALIDATOR = jsonschema_rs.validator_for(SCHEMA)

# The three examples of shared/contract/verdict-event-v1.md, verbatim.
SERVED = {
    "schema": "claimwatch.verdict/v1",
    "event_id": "5f0c2d1e-8a61-4f7b-9a57-0c1d2e3f4a5b",
    "trace_id": "tr-20261121-000412",
    "observed_at": "2026-11-21T09:14:03.512+00:00",
    "route": "billing-faq",
    "query": {
        "text": "How long do I have to return an annual plan for a refund?",
        "query_type": "lookup",
        "stakes": "medium",
        "answerable": True,
    },
    "answer": {
        "text": "Annual plans can be refunded within 30 days of purchase, minus a 5% fee, and the refund arrives "
        "the same day.",
        "action": "served",
    },
    "versions": {
        "model": "gen-2026-10",
        "prompt": "faq-v14",
        "corpus": "policies@2026-11-01",
        "retriever": "hybrid-v3",
        "verifier": "nli-judge@2.1",
    },
    "evidence": [
        {
            "chunk_id": "pol-17#2",
            "source_id": "refund-policy",
            "version": "2026-11-01",
            "used": True,
            "text": "Annual subscriptions may be refunded within 14 days of purchase. A processing fee of 5% applies.",
        },
        {"chunk_id": "pol-17#5", "source_id": "refund-policy", "version": "2026-11-01", "used": False},
    ],
    "claims": [
        {
            "claim_id": "c1",
            "text": "Annual plans can be refunded within 30 days of purchase.",
            "claim_type": "numeric",
            "verdict": "contradicted",
            "score": 0.93,
            "chunk_id": "pol-17#2",
            "span": "refunded within 14 days of purchase",
            "labeler": "verifier:nli-judge@2.1",
        },
        {
            "claim_id": "c2",
            "text": "A 5% fee is deducted from the refund.",
            "claim_type": "numeric",
            "verdict": "supported",
            "score": 0.88,
            "chunk_id": "pol-17#2",
            "span": "A processing fee of 5% applies.",
            "labeler": "verifier:nli-judge@2.1",
        },
        {
            "claim_id": "c3",
            "text": "The refund arrives the same day.",
            "claim_type": "attribute",
            "verdict": "unlinked",
            "score": 0.71,
            "labeler": "verifier:nli-judge@2.1",
        },
    ],
    "first_failed_stage": "claim_generation",
    "signals": {"cherry_pick": [], "premise_similarity": 0.41},
}
ABSTENTION = {
    "schema": "claimwatch.verdict/v1",
    "event_id": "e-77a1",
    "trace_id": "tr-77a1",
    "observed_at": "2026-11-21T09:15:40Z",
    "route": "parcel-status",
    "query": {"text": "Will parcel 88-1203 arrive before Friday?", "query_type": "unanswerable", "answerable": False},
    "answer": {"text": "The carrier has not published a delivery estimate yet.", "action": "abstained"},
    "claims": [],
}
COUNT_ONLY = {
    "schema": "claimwatch.verdict/v1",
    "event_id": "e-9c02",
    "trace_id": "tr-9c02",
    "observed_at": "2026-11-21T09:16:02+01:00",
    "route": "parcel-status",
    "answer": {"action": "served"},
    "versions": {"model": "gen-2026-10"},
    "claims": [{"verdict": "supported"}, {"verdict": "supported"}, {"verdict": "not_supported"}],
}
EXAMPLES = {"served": SERVED, "abstention": ABSTENTION, "count_only": COUNT_ONLY}

WRONG_TYPES = [None, 7, 0.5, True, "text", [], {}]
KELVIN = "\u212a"  # 'K'.lower() == 'k', so the decoder reads "unlin\u212aed" as "unlinked"

VALID_TIMESTAMPS = [
    "2026-11-21T09:14:03Z",
    "2026-11-21T09:14:03.512+00:00",
    "2026-11-21 09:14:03+01:00",
    "2024-02-29T00:00:00Z",
    "2000-02-29T23:59:59.999999999-23:59",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "2026-11-21T09:14:03-00:00",
    "0400-02-29T12:00:00+05:30",
    "2026-11-21t09:14:03Z",
]
INVALID_TIMESTAMPS = [
    "2026-11-21T09:14:03",
    "2026-11-21",
    "2026-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2100-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-11-21T24:00:00Z",
    "2026-11-21T23:59:60Z",
    "2026-11-21T09:14:03z",
    "2026-11-21T09:14:03+24:00",
    "2026-11-21T09:14:03+0100",
    "2026-11-21T09:14:03.Z",
    "2026-11-21T09:14:03,5Z",
    "0000-01-01T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-00-01T00:00:00Z",
    "2026-11-00T00:00:00Z",
    "2026-11-21T09:14:03Z\n",
    " 2026-11-21T09:14:03Z",
    "\u0662\u0660\u0662\u0666-11-21T09:14:03Z",
    "2026-11-21T09:14Z",
    "20261121T091403Z",
    1795287916,
    None,
]


def case_variants(word: str) -> list[str]:
    return [word, word.upper(), word.title(), "".join(c.upper() if i % 2 else c for i, c in enumerate(word))]


VERDICTS = [v for word in VERDICT_ALIASES for v in case_variants(word)] + [
    f"unlin{KELVIN}ed",
    "",
    " supported",
    "supported ",
    "supported\n",
    "maybe",
    "not enough info",
    "hallucinated",
    "supp\u00f6rted",
    "\u017fupported",
    "no source",
    "NO-SOURCE",
    None,
    1,
    True,
    ["supported"],
]


def op_set(path, value):
    return ("set", tuple(path), value)


def op_del(path):
    return ("del", tuple(path), None)


def apply(event: dict, ops) -> object:
    """Apply set/delete operations along paths of object keys; an op whose parent
    is no longer an object (an earlier op replaced it) is skipped."""
    doc = copy.deepcopy(event)
    for kind, path, value in ops:
        if not path:
            doc = copy.deepcopy(value)
            continue
        node = doc
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        if kind == "del":
            node.pop(path[-1], None)
        else:
            node[path[-1]] = copy.deepcopy(value)
    return doc


def mutation_ops() -> list[tuple[str, tuple]]:
    ops = []
    for field in ("schema", "event_id", "trace_id", "observed_at", "route", "claims"):
        ops.append(op_del([field]))
    for field in ("tenant", "query", "answer", "versions", "evidence", "first_failed_stage", "signals", "attributes"):
        ops += [op_set([field], v) for v in WRONG_TYPES]
    ops += [op_set(["schema"], v) for v in ("claimwatch.verdict/v2", "", "CLAIMWATCH.VERDICT/V1", *WRONG_TYPES)]
    for field in ("event_id", "trace_id"):
        ops += [
            op_set([field], v)
            for v in (
                "",
                "a",
                "x" * 128,
                "x" * 129,
                "\u00e9" * 128,
                "\U0001f600" * 128,
                "\U0001f600" * 129,
                *WRONG_TYPES,
            )
        ]
    ops += [op_set(["observed_at"], v) for v in VALID_TIMESTAMPS + INVALID_TIMESTAMPS]
    ops += [
        op_set(["route"], v)
        for v in (
            "a",
            "A-Z.a_z:0/9-",
            "x" * 128,
            "x" * 129,
            "",
            "has space",
            "route\n",
            "r\u00fcte",
            "faq!",
            "faq\t",
            ".",
            "..",
            "...",
            ".\n",
            *WRONG_TYPES,
        )
    ]
    ops += [op_set(["tenant"], v) for v in ("acme", "")]
    ops += [
        op_set(["sampling"], v)
        for v in (
            {"rate": 0.05},
            {"rate": 1},
            {"rate": 0},
            {"rate": -0.5},
            {"rate": 1.5},
            {"rate": "0.5"},
            {"rate": True},
            {},
            *WRONG_TYPES,
        )
    ]
    ops += [op_set(["query", "query_type"], v) for v in (*QUERY_TYPES, "LOOKUP", "bogus", 1, None)]
    ops += [op_set(["query", "stakes"], v) for v in (*STAKES, "critical", None, 2)]
    ops += [op_set(["query", "answerable"], v) for v in (True, False, None, "yes", 1, 0)]
    ops += [op_set(["query", "text"], v) for v in ("q", "", None, 5, ["q"])]
    ops += [op_set(["query", "unknown_field"], {"nested": 1})]
    ops += [op_set(["answer", "action"], v) for v in (*ACTIONS, "serve", "SERVED", None, 0)]
    ops += [op_set(["answer", "text"], v) for v in ("a", None, 1)]
    ops += [op_set(["versions"], v) for v in ({"model": "m"}, {"model": 1}, {"model": None}, {"": ""})]
    ops += [
        op_set(["evidence"], v)
        for v in (
            [{"chunk_id": "c"}],
            [{"chunk_id": 1}],
            [{"chunk_id": ""}],
            [{"chunk_id": "c", "used": "true"}],
            [{"chunk_id": "c", "used": None}],
            ["c"],
            [{"source_id": "s"}],
            [{"chunk_id": "c", "version": 2}],
            [{"chunk_id": "c", "text": None, "extra": [1]}],
            [None],
        )
    ]
    ops += [op_set(["claims"], v) for v in ([{}], ["supported"], [None], [{"verdict": "supported", "x": {}}])]
    ops += [op_set(["claims"], [{"verdict": v}]) for v in VERDICTS]
    ops += [
        op_set(["claims"], [{"verdict": "supported", "score": s}])
        for s in (0, 1, 0.5, 1.0, -0.01, 1.01, "0.5", True, None, -0.0)
    ]
    ops += [
        op_set(["claims"], [{"verdict": "stale", "claim_type": t}]) for t in (*CLAIM_TYPES, "Numeric", "x", None, 3)
    ]
    for field in ("claim_id", "text", "chunk_id", "source_id", "span", "labeler"):
        ops += [op_set(["claims"], [{"verdict": "overreach", field: v}]) for v in ("s", "", None, 5, {})]
    ops += [op_set(["first_failed_stage"], v) for v in (*STAGES, "PASSED", "other")]
    ops += [
        op_set(["signals"], v)
        for v in (
            {"cherry_pick": []},
            {"cherry_pick": ["c"]},
            {"cherry_pick": [1]},
            {"cherry_pick": None},
            {"cherry_pick": "c"},
            {"support_delta": -3.5},
            {"support_delta": "x"},
            {"support_delta": None},
            {"sample_disagreement": 2},
            {"unknown": "kept out"},
        )
    ]
    ops += [op_set(["signals", "premise_similarity"], v) for v in (0, 1, 0.41, -0.1, 1.1, None, "0.5", False)]
    ops += [
        op_set(["attributes"], v)
        for v in (
            {f"k{i}": "v" for i in range(32)},
            {f"k{i}": "v" for i in range(33)},
            {"k": 1},
            {"k": None},
            {"region": "eu"},
        )
    ]
    ops += bound_ops()
    ops += [op_set(["unknown_top_level"], {"any": ["thing"]}), op_set(["schema_"], 5)]
    ops += [op_set([], v) for v in ([], "event", 1, None)]
    return ops


def bound_ops() -> list[tuple[str, tuple]]:
    """Each shape bound at its limit (accepted) and one past it (refused)."""

    def at_and_past(limit: int, make) -> list:
        return [make(limit), make(limit + 1)]

    ops = [op_set(["versions"], v) for v in at_and_past(MAX_VERSION_KEYS, lambda n: {f"k{i}": "v" for i in range(n)})]
    ops += [op_set(["versions"], {k: "v"}) for k in at_and_past(MAX_KEY_CHARS, lambda n: "\u00e9" * n)]
    ops += [op_set(["attributes"], {"k": v}) for v in at_and_past(MAX_LABEL_CHARS, lambda n: "\U0001f600" * n)]
    ops += [op_set(["claims"], v) for v in at_and_past(MAX_CLAIMS, lambda n: [{"verdict": "supported"}] * n)]
    ops += [op_set(["evidence"], v) for v in at_and_past(MAX_EVIDENCE, lambda n: [{"chunk_id": "c"}] * n)]
    ops += [op_set(["signals", "cherry_pick"], v) for v in at_and_past(MAX_EVIDENCE, lambda n: ["c"] * n)]
    ops += [op_set(["tenant"], v) for v in at_and_past(MAX_LABEL_CHARS, lambda n: "t" * n)]
    ops += [op_set(["answer", "text"], v) for v in at_and_past(MAX_TEXT_CHARS, lambda n: "a" * n)]
    ops += [op_set(["query", "text"], v) for v in at_and_past(MAX_TEXT_CHARS, lambda n: "q" * n)]
    ops += [
        op_set(["evidence"], [{"chunk_id": "c", "text": v}]) for v in at_and_past(MAX_TEXT_CHARS, lambda n: "x" * n)
    ]
    ops += [op_set(["evidence"], [{"chunk_id": v}]) for v in at_and_past(MAX_LABEL_CHARS, lambda n: "c" * n)]
    for field, limit in (
        ("text", MAX_TEXT_CHARS),
        ("span", MAX_TEXT_CHARS),
        ("claim_id", MAX_LABEL_CHARS),
        ("chunk_id", MAX_LABEL_CHARS),
        ("labeler", MAX_LABEL_CHARS),
    ):
        ops += [op_set(["claims"], [{"verdict": "supported", field: v}]) for v in at_and_past(limit, lambda n: "s" * n)]
    return ops


def decoder_accepts(doc) -> bool:
    """A message is accepted when it holds no rejection (one event, or every event of an envelope)."""
    return not any(isinstance(result, Rejection) for _, result in Decoder().decode_message(orjson.dumps(doc)))


def disagreements(docs: list[tuple[str, object]]) -> list[str]:
    out = []
    for name, doc in docs:
        expected = decoder_accepts(doc)
        for engine, ok in (("jsonschema", PY_VALIDATOR.is_valid(doc)), ("jsonschema-rs", RS_VALIDATOR.is_valid(doc))):
            if ok != expected:
                out.append(
                    f"{name}: decoder {'accepts' if expected else 'refuses'}, {engine} {'accepts' if ok else 'refuses'}"
                )
    return out


def corpus() -> list[tuple[str, object]]:
    docs: list[tuple[str, object]] = list(EXAMPLES.items())
    for name, base in EXAMPLES.items():
        for kind, path, value in mutation_ops():
            docs.append(
                (f"{name} {kind} {'.'.join(map(str, path)) or '$'}={value!r:.60}", apply(base, [(kind, path, value)]))
            )
    return docs


def envelope(*events, **over) -> dict:
    return {"schema": "claimwatch.verdicts/v1", "events": list(events), **over}


ENVELOPES = [
    ("good", envelope(SERVED, ABSTENTION, COUNT_ONLY)),
    ("one event", envelope(ABSTENTION)),
    ("1000 events", envelope(*[COUNT_ONLY] * 1000)),
    ("1001 events", envelope(*[COUNT_ONLY] * 1001)),
    ("empty", envelope()),
    ("events missing", {"schema": "claimwatch.verdicts/v1"}),
    ("events not a list", envelope(events={"a": ABSTENTION})),
    ("events null", envelope(events=None)),
    ("wrong schema", envelope(ABSTENTION, schema="claimwatch.verdicts/v2")),
    ("no schema", {"events": [ABSTENTION]}),
    ("a bad event", envelope(ABSTENTION, {**COUNT_ONLY, "route": "a b"})),
    ("a non-object event", envelope(ABSTENTION, "event")),
    ("a nested envelope", envelope(envelope(ABSTENTION))),
    ("unknown field", envelope(ABSTENTION, producer="p-1")),
    ("an event with an events field", {**ABSTENTION, "events": [1]}),
]


@pytest.mark.slow
def test_schema_and_decoder_agree_on_envelopes():
    assert [decoder_accepts(doc) for _, doc in ENVELOPES] == [
        True,
        True,
        True,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        True,
        True,
    ]
    assert disagreements(ENVELOPES) == []


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_contract_examples_are_valid_under_both():
    for name, event in EXAMPLES.items():
        assert PY_VALIDATOR.is_valid(event), name
        assert RS_VALIDATOR.is_valid(event), name
        assert decoder_accepts(event), name


@pytest.mark.slow
def test_schema_and_decoder_agree_on_the_mutation_corpus():
    docs = corpus()
    verdicts = [decoder_accepts(doc) for _, doc in docs]
    # The corpus must exercise both sides, or agreement says nothing.
    assert sum(verdicts) > 150 and len(verdicts) - sum(verdicts) > 300
    assert disagreements(docs) == []


ops_strategy = st.lists(st.sampled_from(mutation_ops()), min_size=1, max_size=4)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(list(EXAMPLES.values())), ops=ops_strategy)
def test_schema_and_decoder_agree_on_combined_mutations(base, ops):
    assert disagreements([(repr(ops)[:200], apply(base, ops))]) == []


timestamp_strategy = st.builds(
    lambda year, month, day, hour, minute, second, frac, sep, offset: (
        f"{year:04d}-{month:02d}-{day:02d}{sep}{hour:02d}:{minute:02d}:{second:02d}{frac}{offset}"
    ),
    year=st.sampled_from([0, 1, 4, 100, 400, 1900, 2000, 2023, 2024, 2026, 2100, 9999]) | st.integers(0, 9999),
    month=st.integers(0, 13),
    day=st.integers(0, 32),
    hour=st.integers(0, 25),
    minute=st.integers(0, 61),
    second=st.integers(0, 61),
    frac=st.sampled_from(["", ".5", ".512", ".123456789", "."]),
    sep=st.sampled_from(["T", " ", "t", "_"]),
    offset=st.sampled_from(["Z", "z", ""])
    | st.builds(
        lambda sign, h, m: f"{sign}{h:02d}:{m:02d}", st.sampled_from("+-"), st.integers(0, 25), st.integers(0, 59)
    ),
)


@settings(max_examples=500, deadline=None)
@given(ts=timestamp_strategy)
def test_schema_and_decoder_agree_on_generated_timestamps(ts):
    assert disagreements([(ts, {**ABSTENTION, "observed_at": ts})]) == []


@pytest.mark.parametrize("day", ["2024-02-29", "2023-02-28", "2023-02-29", "2026-06-30", "2026-06-31", "2026-07-31"])
def test_day_of_month_rules_agree(day):
    assert disagreements([(day, {**ABSTENTION, "observed_at": f"{day}T00:00:00Z"})]) == []


def test_offset_minutes_60_to_99_are_refused_by_both():
    # RFC 3339: time-minute is 00-59, also in an offset; Python alone would fold +05:60 into +06:00.
    event = {**ABSTENTION, "observed_at": "2026-11-21T09:14:03+05:60"}
    assert not decoder_accepts(event)
    assert not PY_VALIDATOR.is_valid(event) and not RS_VALIDATOR.is_valid(event)


def test_lower_case_z_is_accepted_by_both():
    event = {**ABSTENTION, "observed_at": "2026-11-21T09:14:03z"}
    assert decoder_accepts(event) and PY_VALIDATOR.is_valid(event) and RS_VALIDATOR.is_valid(event)


def test_size_limit_is_enforced_by_the_decoder_only():
    # JSON Schema validates a parsed document; it cannot count bytes. An event over
    # 1 MiB is schema-valid and still goes to the DLQ with rule too_large.
    big = {**ABSTENTION, "padding": "x" * (1 << 20)}  # unknown fields are ignored
    assert PY_VALIDATOR.is_valid(big)
    result = Decoder().decode(orjson.dumps(big))
    assert isinstance(result, Rejection) and result.rule == "too_large"


def test_verdict_pattern_accepts_every_alias_in_any_case():
    claim_schema = {"$defs": SCHEMA["$defs"], "$ref": "#/$defs/verdict"}
    validator = jsonschema.Draft202012Validator(claim_schema)
    for word in VERDICT_ALIASES:
        for variant in case_variants(word) + [word.swapcase()]:
            assert validator.is_valid(variant), variant
    assert not validator.is_valid("supported\n")
