"""Redaction before storage: pattern tables, drop-mode hashes, untouched counts, and the real chDB path."""

import base64
import hashlib
import hmac
from datetime import UTC, datetime

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.ingest.privacy import HASHES_ATTRIBUTE, RedactionSettings, Redactor
from services.store.backends import ChdbStore
from services.store.retention import KEEP_EVERYTHING
from services.store.writer import EventWriter
from tests.support.paths import FIXTURES
from tests.support.stores import StoreTemplates

EXAMPLES = [orjson.loads(line) for line in (FIXTURES / "contract_examples.jsonl").read_bytes().splitlines()]
SALT = "test-salt"


def redactor(**over) -> Redactor:
    return Redactor(RedactionSettings(enabled=True, **over))


# (name, raw, expected) per built-in pattern, each run with only that pattern switched on.
EMAIL = [
    ("plain", "write to ana@example.com today", "write to [EMAIL] today"),
    ("plus tag, subdomains, trailing dot", "cc john.doe+billing@mail.example.co.uk.", "cc [EMAIL]."),
    ("unicode local part and domain", "jürgen@bücher.de hat geschrieben", "[EMAIL] hat geschrieben"),
    ("two in one text", "a.b@x.io, c_d@y.org", "[EMAIL], [EMAIL]"),
    ("a handle is not an email", "ping @support on chat", "ping @support on chat"),
    ("no top-level domain", "root@localhost", "root@localhost"),
]
PHONE = [
    ("US, international", "Call +1 (415) 555-2671 now", "Call [PHONE] now"),
    ("UK, international", "UK office: +44 20 7946 0958.", "UK office: [PHONE]."),
    ("France, pairs", "Paris +33 1 23 45 67 89", "Paris [PHONE]"),
    ("Japan, dashes", "Tokyo +81-3-1234-5678", "Tokyo [PHONE]"),
    ("India, mobile", "+91 98765 43210 is mine", "[PHONE] is mine"),
    ("Germany, short", "Berlin +49 30 1234567", "Berlin [PHONE]"),
    ("US national, parentheses", "ring (415) 555-2671", "ring [PHONE]"),
    ("US national, dots", "ring 415.555.2671", "ring [PHONE]"),
    ("a date is not a phone", "on 2026-11-21 at 09:14:03", "on 2026-11-21 at 09:14:03"),
    ("an order id is not a phone", "parcel 88-1203 left", "parcel 88-1203 left"),
    ("an impossible US number", "account 1234567890", "account 1234567890"),
    (
        "amounts and percentages",
        "refund $1,234,567.89 minus 5% within 30 days",
        "refund $1,234,567.89 minus 5% within 30 days",
    ),
]
CARD = [
    ("Visa, spaces", "card 4111 1111 1111 1111 expires", "card [CARD] expires"),
    ("Visa, dashes", "4111-1111-1111-1111", "[CARD]"),
    ("Mastercard, contiguous", "paid with 5555555555554444.", "paid with [CARD]."),
    ("Amex 4-6-5 grouping", "amex 3782 822463 10005", "amex [CARD]"),
    ("Luhn-invalid stays", "card 4111 1111 1111 1112", "card 4111 1111 1111 1112"),
    ("too short stays", "ref 4111 1111 1111", "ref 4111 1111 1111"),
    ("20 digits stays", "id 12345678901234567890", "id 12345678901234567890"),
    ("card after a number", "ref 99 4111 1111 1111 1111 ok", "ref 99 [CARD] ok"),
]
IP = [
    ("IPv4", "from 192.168.1.20, then", "from [IP], then"),
    ("IPv6", "via 2001:db8::1 today", "via [IP] today"),
    ("IPv4-mapped IPv6", "peer ::ffff:10.0.0.1", "peer [IP]"),
    ("octet out of range", "999.1.1.1", "999.1.1.1"),
    ("version with five parts", "release 1.2.3.4.5", "release 1.2.3.4.5"),
    ("C++ scope and a clock time", "std::vector at 09:14:03", "std::vector at 09:14:03"),
]
TABLE = (
    [("email", *c) for c in EMAIL]
    + [("phone", *c) for c in PHONE]
    + [("card", *c) for c in CARD]
    + [("ip", *c) for c in IP]
)


@pytest.mark.parametrize("pattern, name, raw, expected", TABLE, ids=[f"{p}: {n}" for p, n, *_ in TABLE])
def test_builtin_pattern_table(pattern, name, raw, expected):
    assert redactor(patterns=[pattern]).redact_text(raw) == expected


CUSTOM = [
    ("order number", {"order": r"\bORD-\d{6}\b"}, "ORD-123456 shipped", "[ORDER] shipped"),
    (
        "case-insensitive inline flag",
        {"ssn": r"(?i)ssn:?\s*\d{3}-\d{2}-\d{4}"},
        "SSN 123-45-6789 on file",
        "[SSN] on file",
    ),
    ("two custom names", {"zip": r"\b\d{5}\b", "badge": r"B-\d+"}, "B-77 in 94110", "[BADGE] in [ZIP]"),
]


@pytest.mark.parametrize("name, custom, raw, expected", CUSTOM, ids=[c[0] for c in CUSTOM])
def test_custom_pattern_table(name, custom, raw, expected):
    assert redactor(patterns=[], custom=custom).redact_text(raw) == expected


def test_custom_patterns_run_with_the_builtins_and_without_their_hints():
    r = redactor(custom={"order": r"\bORD-\d{6}\b"})
    assert r.redact_text("ORD-123456 to ana@example.com") == "[ORDER] to [EMAIL]"
    assert r.redact_text("ORD-654321 shipped") == "[ORDER] shipped"  # nothing a built-in could match


def test_national_formats_follow_phone_regions():
    london = "call 020 7946 0958 please"
    assert redactor(patterns=["phone"]).redact_text(london) == london
    assert redactor(patterns=["phone"], phone_regions=["us", "GB"]).redact_text(london) == "call [PHONE] please"


def test_digit_heavy_text_fails_closed_past_the_matcher_budget():
    many = " ".join(f"+1 (415) 555-{2000 + i}" for i in range(400))  # more runs than the matcher budget
    masked = redactor(patterns=["phone"]).redact_text(many)
    assert masked == " ".join(["[PHONE]"] * 400)
    assert redactor(patterns=["phone"]).redact_text("1 " * 20000 + "end") == "[PHONE] end"


def test_default_patterns_cover_email_phone_card_not_ip():
    text = "ana@example.com +44 20 7946 0958 4111 1111 1111 1111 192.168.1.20"
    assert redactor().redact_text(text) == "[EMAIL] [PHONE] [CARD] 192.168.1.20"


def pii_event(event_id="p-1", **over) -> VerdictEvent:
    obj = {
        **EXAMPLES[0],
        "event_id": event_id,
        "query": {
            "text": "I am ana@example.com, card 4111 1111 1111 1111: refund?",
            "query_type": "lookup",
            "stakes": "high",
            "answerable": True,
        },
        "answer": {"text": "We will call +1 (415) 555-2671 within 30 days.", "action": "served"},
        "attributes": {"region": "eu"},
        **over,
    }
    obj["claims"] = [
        *obj["claims"],
        {
            "claim_id": "c4",
            "text": "Ana's number is +44 20 7946 0958.",
            "verdict": "stale",
            "span": "contact: ana@example.com",
            "score": 0.5,
        },
    ]
    obj["evidence"] = [*obj["evidence"], {"chunk_id": "crm-1", "text": "Customer ana@example.com, 5555555555554444"}]
    event = Decoder().decode(orjson.dumps(obj))
    assert isinstance(event, VerdictEvent), event
    return event


def skeleton(event: VerdictEvent) -> dict:
    """Everything rates, alerts and issue counts read: the event with its free text and redaction hashes removed."""
    d = event.to_json_dict()
    d["query"].pop("text", None), d["answer"].pop("text", None)
    for c in d["claims"]:
        c.pop("text", None), c.pop("span", None)
    for e in d["evidence"]:
        e.pop("text", None)
    d["attributes"].pop(HASHES_ATTRIBUTE, None)
    return d


def texts(event: VerdictEvent) -> list[str | None]:
    return [
        event.query.text,
        event.answer.text,
        *(c.text for c in event.claims),
        *(c.span for c in event.claims),
        *(e.text for e in event.evidence),
    ]


def test_mask_changes_only_text():
    event = pii_event()
    red = redactor().redact(event)
    assert skeleton(red) == skeleton(event)
    assert red.query.text == "I am [EMAIL], card [CARD]: refund?"
    assert red.answer.text == "We will call [PHONE] within 30 days."
    assert (red.claims[3].text, red.claims[3].span) == ("Ana's number is [PHONE].", "contact: [EMAIL]")
    assert red.claims[0].text == event.claims[0].text  # nothing to mask: the same text
    assert red.evidence[2].text == "Customer [EMAIL], [CARD]"
    assert [c.verdict for c in red.claims] == ["contradicted", "supported", "unsupported", "stale"]
    assert "ana@example.com" in event.query.text  # the input is not mutated


def test_fields_limit_what_is_redacted():
    red = redactor(fields=["claim"]).redact(pii_event())
    assert red.claims[3].text == "Ana's number is [PHONE]." and red.claims[3].span == "contact: ana@example.com"
    assert "ana@example.com" in red.query.text and "+1 (415)" in red.answer.text and "ana@" in red.evidence[2].text


def test_drop_empties_text_and_keeps_stable_keyed_hashes():
    r = redactor(mode="drop", hash_salt=SALT)
    first, second = r.redact(pii_event("p-1")), r.redact(pii_event("p-2"))
    assert skeleton(first) == skeleton(pii_event("p-1"))
    assert all(t in ("", None) for t in texts(first))
    assert first.evidence[1].text is None  # absent text stays absent
    hashes = orjson.loads(first.attributes[HASHES_ATTRIBUTE])
    assert hashes == orjson.loads(second.attributes[HASHES_ATTRIBUTE])  # equal texts stay linkable
    assert hashes["alg"] == "hmac-sha256" and first.attributes["region"] == "eu"
    expected = hmac.new(SALT.encode(), pii_event().claims[0].text.encode(), hashlib.sha256).hexdigest()
    assert hashes["claim"][0] == expected == r.text_hash(pii_event().claims[0].text)
    assert hashes["evidence"][1] is None and len(hashes["span"]) == 4 and hashes["span"][2] is None
    other = redactor(mode="drop", hash_salt="another").redact(pii_event())
    assert orjson.loads(other.attributes[HASHES_ATTRIBUTE])["query"] != hashes["query"]


@pytest.mark.parametrize("example", EXAMPLES, ids=["full", "abstention", "count-only"])
@pytest.mark.parametrize("mode", ["mask", "drop"])
def test_counts_verdicts_routes_and_ids_are_untouched(example, mode):
    event = Decoder().decode(orjson.dumps(example))
    red = redactor(mode=mode, hash_salt=SALT, patterns=["email", "phone", "card", "ip"]).redact(event)
    assert skeleton(red) == skeleton(event)
    assert (red.event_id, red.trace_id, red.route, red.versions, red.observed_at) == (
        event.event_id,
        event.trace_id,
        event.route,
        event.versions,
        event.observed_at,
    )
    assert [c.verdict for c in red.claims] == [c.verdict for c in event.claims] and len(red.failed_claims) == len(
        event.failed_claims
    )


def test_disabled_is_identity():
    event = pii_event()
    r = Redactor(RedactionSettings())
    assert not r.enabled and r.degraded == ()
    assert r.redact(event) is event and r.redact_text("ana@example.com") == "ana@example.com"
    assert Redactor(RedactionSettings(mode="drop")).redact(event) is event  # drop without a salt is fine while off


def test_nothing_to_mask_returns_the_same_event():
    event = Decoder().decode(orjson.dumps(EXAMPLES[1]))
    assert redactor().redact(event) is event


@pytest.mark.parametrize(
    "settings_input, loc, words",
    [
        ({"custom": {"zip": r"(\d{5}"}}, ("custom",), ["custom['zip']", "not a valid regular expression"]),
        ({"custom": {"any": r"x*"}}, ("custom",), ["custom['any']", "empty string"]),
        ({"custom": {"my zip": r"\d{5}"}}, ("custom",), ["'my zip'", "letter"]),
        ({"custom": {"email": r"\S+@\S+"}}, ("custom",), ["custom['email']", "built-in"]),
        ({"patterns": ["email", "ssn"]}, ("patterns", 1), ["'email', 'phone', 'card' or 'ip'"]),
        ({"fields": ["claims"]}, ("fields", 0), ["'query'"]),
        ({"mode": "hash"}, ("mode",), ["'mask' or 'drop'"]),
        ({"patern": ["email"]}, ("patern",), ["Extra inputs are not permitted"]),
        ({"phone_regions": ["XX"]}, ("phone_regions",), ["['XX']", "ISO 3166"]),
        ({"mode": "drop"}, (), ["hash_salt must be set"]),
        ({"fields": []}, (), ["fields is empty"]),
        ({"patterns": []}, (), ["redacts nothing"]),
    ],
)
def test_bad_settings_name_the_field(settings_input, loc, words):
    with pytest.raises(ValidationError) as info:
        RedactionSettings.model_validate({"enabled": True, **settings_input})
    error = info.value.errors()[0]
    assert error["loc"] == loc
    assert all(w in error["msg"] for w in words), error["msg"]


def test_salt_is_not_printed():
    s = RedactionSettings(enabled=True, mode="drop", hash_salt="s3cret-value")
    assert "s3cret-value" not in repr(s) and "s3cret-value" not in str(s.model_dump())


@pytest.mark.parametrize(
    "over, expected",
    [
        ({"enabled": False}, set()),
        ({"fields": ["answer"]}, set()),
        ({}, {("clustering", "reduced"), ("near_duplicates", "reduced")}),
        ({"fields": ["query"]}, {("near_duplicates", "reduced")}),
        (
            {"mode": "drop", "hash_salt": SALT},
            {("clustering", "lost"), ("near_duplicates", "lost"), ("eval_promotion", "lost"), ("examples", "lost")},
        ),
        ({"mode": "drop", "hash_salt": SALT, "fields": ["evidence"]}, {("examples", "lost")}),
        ({"mode": "drop", "hash_salt": SALT, "fields": ["span"]}, {("clustering", "reduced"), ("examples", "lost")}),
    ],
)
def test_degraded_names_text_features_only(over, expected):
    degraded = Redactor(RedactionSettings(**{"enabled": True, **over})).degraded
    assert {(d.feature, d.effect) for d in degraded} == expected
    assert all(d.reason and str(d).startswith(d.feature) for d in degraded)


@settings(max_examples=200, deadline=2000)
@given(st.text(alphabet=st.sampled_from("0123456789 -+().@:abc_.xyzé\n"), max_size=80) | st.text(max_size=80))
def test_masking_never_raises_and_is_idempotent(text):
    r = redactor(patterns=["email", "phone", "card", "ip"])
    once = r.redact_text(text)
    assert r.redact_text(once) == once


RATE_SQL = """
SELECT dim, value, route, toString(minute) AS minute, sum(events) AS events, sum(claims) AS claims,
       sum(failed) AS failed, sum(claims_sq) AS claims_sq, sum(failed_sq) AS failed_sq, sum(failed_claims) AS fc,
       sum(supported) AS supported, sum(contradicted) AS contradicted, sum(unsupported) AS unsupported,
       sum(stale) AS stale, sum(trivial) AS trivial, sum(served) AS served, sum(served_unsafe) AS served_unsafe,
       sum(abstained) AS abstained, sum(answerable) AS answerable
FROM rate_minute GROUP BY dim, value, route, minute ORDER BY dim, value, route, minute
"""
CLAIM_SQL = "SELECT route, verdict, count() AS n FROM claims GROUP BY route, verdict ORDER BY route, verdict"


def stored_batch() -> list[VerdictEvent]:
    events = [
        pii_event(f"p-{i}", route=f"route-{i % 3}", observed_at=f"2026-11-21T09:{10 + i:02d}:00Z") for i in range(6)
    ]
    return events + [Decoder().decode(orjson.dumps(e)) for e in EXAMPLES]


def write_and_read(templates: StoreTemplates, path, events) -> tuple[list[dict], list[dict], ChdbStore]:
    """chDB serves one directory per process at a time, so the two stores are opened one after the other."""
    store = templates.fresh(path, KEEP_EVERYTHING)  # fixed event times must not age past a TTL
    EventWriter(store).write(events)
    return store.query(RATE_SQL), store.query(CLAIM_SQL), store


@pytest.mark.parametrize("mode", ["mask", "drop"])
def test_stored_text_is_redacted_and_rates_are_unchanged(tmp_path, store_templates, mode):
    events = stored_batch()
    *expected, raw_store = write_and_read(store_templates, tmp_path / "unredacted", events)
    raw_store.close()
    r = redactor(mode=mode, hash_salt=SALT)
    *actual, store = write_and_read(store_templates, tmp_path / "redacted", [r.redact(e) for e in events])
    try:
        check_stored(store, r, events, mode)
    finally:
        store.close()
    assert actual == expected
    assert expected[0] and sum(row["failed"] for row in expected[0] if row["dim"] == "") > 0


def check_stored(store, r, events, mode):
    stored = store.query(
        "SELECT query_text, answer_text, evidence, claim_texts, spans, attributes FROM events WHERE event_id = 'p-0'"
    )[0]
    claim_rows = store.query("SELECT text, span FROM claims WHERE event_id = 'p-0' ORDER BY claim_idx")
    everything = orjson.dumps(store.query("SELECT * FROM events") + store.query("SELECT * FROM claims")).decode()
    assert everything.count('"p-') >= 6
    for secret in ("ana@example.com", "4111 1111 1111 1111", "555-2671", "7946 0958", "5555555555554444"):
        assert secret not in everything
    if mode == "mask":
        assert stored["query_text"] == "I am [EMAIL], card [CARD]: refund?"
        assert claim_rows[3] == {"text": "Ana's number is [PHONE].", "span": "contact: [EMAIL]"}
        assert stored["answer_text"] == "We will call [PHONE] within 30 days."  # claims keep no copy (016)
        assert "Customer [EMAIL], [CARD]" in stored["evidence"]
    else:
        assert stored["query_text"] == stored["answer_text"] == "" and set(stored["claim_texts"]) == {""}
        hashes = orjson.loads(stored["attributes"][HASHES_ATTRIBUTE])
        assert hashes["query"] == r.text_hash(events[0].query.text)


@pytest.mark.parametrize("mode", ["mask", "drop"])
def test_dead_letter_samples_are_redacted_before_storage(tmp_path, store_templates, mode):
    from services.ingest.ingestor import Ingestor, RawMessage

    bad = b'{"schema": "claimwatch.verdict/v1", "query": {"text": "I am ana@example.com"}, "claims": "nope"'
    store = store_templates.fresh(tmp_path / "ch")
    try:
        r = redactor(mode=mode, hash_salt=SALT)
        outcome = Ingestor(EventWriter(store), Decoder(), r).process(
            [RawMessage("t", 0, 5, bad)], datetime(2026, 11, 21, tzinfo=UTC)
        )
        assert outcome.dead[0].raw == bad  # the Kafka DLQ topic still gets the original bytes for replay
        sample = base64.b64decode(store.query("SELECT sample FROM dlq")[0]["sample"])
        assert b"ana@example.com" not in sample
        assert sample == (b"" if mode == "drop" else bad.replace(b"ana@example.com", b"[EMAIL]"))
    finally:
        store.close()
