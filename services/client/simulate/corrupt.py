"""Bad input: turn a valid event into one that breaks exactly one contract rule.

Each kind is named after the rule the product's decoder must report for it (the unit tests
check that against services.contract.decode.Decoder, input by input).
"""

from __future__ import annotations

import random
import re

import orjson

OFFSET_RE = re.compile(r"(?:[Zz]|[+-]\d{2}:\d{2})$")
UNKNOWN_VERDICTS = ("maybe", "partially_supported", "hallucinated", "probably_true", "UNKNOWN", "half-true")
FILLER = "This answer keeps repeating the same paragraph because the generator looped. "


def _dumps(event: dict) -> bytes:
    return orjson.dumps(event)


def _key(event: dict) -> bytes:
    route = event.get("route")
    return route.encode("utf-8") if isinstance(route, str) else b""


def not_utf8(event: dict, rnd: random.Random) -> bytes:
    raw = _dumps(event)
    marker = rnd.choice((b'"trace_id":"', b'"route":"'))
    junk = rnd.choice((b"caf\xe9 ", b"\xff\xfe", b"\xc3("))  # Latin-1 text, a BOM-like pair, a broken sequence
    return raw.replace(marker, marker + junk, 1)


def not_json(event: dict, rnd: random.Random) -> bytes:
    text = _dumps(event).decode("utf-8")
    variant = rnd.randrange(3)
    if variant == 0:  # truncated in flight; cut on characters so the bytes stay UTF-8
        return text[: rnd.randint(1, len(text) - 1)].encode("utf-8")
    if variant == 1:  # a Python repr instead of JSON
        return repr(event).encode("utf-8")
    return (text + "}").encode("utf-8")  # trailing garbage


def wrong_type(event: dict, rnd: random.Random) -> bytes:
    options = ["claims_not_list", "observed_at_number", "versions_list"]
    if event.get("claims"):
        options.append("score_string")
    if isinstance(event.get("query"), dict):
        options.append("answerable_string")
    choice = rnd.choice(options)
    if choice == "claims_not_list":
        claims = event["claims"]
        event["claims"] = (
            {c.get("claim_id", f"c{i + 1}"): c for i, c in enumerate(claims)}
            if claims and rnd.random() < 0.5
            else ",".join(str(c.get("verdict")) for c in claims) or "none"
        )
    elif choice == "observed_at_number":
        event["observed_at"] = 1795000000 + rnd.randint(0, 10**6)
    elif choice == "versions_list":
        event["versions"] = [f"{k}={v}" for k, v in event.get("versions", {}).items()] or ["model=gen"]
    elif choice == "score_string":
        claim = rnd.choice(event["claims"])
        claim["score"] = str(claim.get("score", 0.9))
    else:
        event["query"]["answerable"] = rnd.choice(("yes", "no", "true"))
    return _dumps(event)


def unknown_verdict(event: dict, rnd: random.Random) -> bytes:
    bad = rnd.choice(UNKNOWN_VERDICTS)
    if event["claims"]:
        rnd.choice(event["claims"])["verdict"] = bad
    else:
        event["claims"].append({"claim_id": "c1", "verdict": bad})
    return _dumps(event)


def missing_field(event: dict, rnd: random.Random) -> bytes:
    options = ["trace_id", "event_id", "observed_at", "claims", "schema"]
    if event["claims"]:
        options.append("verdict")
    name = rnd.choice(options)
    if name == "verdict":
        del rnd.choice(event["claims"])["verdict"]
    else:
        del event[name]
    return _dumps(event)


def too_large(event: dict, rnd: random.Random, size: int) -> bytes:
    answer = event.setdefault("answer", {})
    answer["text"] = ""
    room = size - len(_dumps(event))  # ASCII filler: one byte per character
    answer["text"] = (FILLER * (room // len(FILLER) + 1))[:room]
    return _dumps(event)


def timestamp_without_offset(event: dict, rnd: random.Random) -> bytes:
    event["observed_at"] = OFFSET_RE.sub("", event["observed_at"])
    return _dumps(event)


def bad_route(event: dict, rnd: random.Random) -> bytes:
    route = event["route"]
    event["route"] = rnd.choice(("", route.replace("-", " "), route + "!", f"{route}/é", " " + route, "x" * 129))
    return _dumps(event)


MAKERS = {
    "not_utf8": not_utf8,
    "not_json": not_json,
    "wrong_type": wrong_type,
    "unknown_verdict": unknown_verdict,
    "missing_field": missing_field,
    "timestamp_without_offset": timestamp_without_offset,
    "bad_route": bad_route,
}


def corrupt(kind: str, event: dict, rnd: random.Random, too_large_bytes: int) -> tuple[bytes, bytes]:
    """(raw, key) of a message that breaks rule ``kind``; ``event`` is a private copy and is changed."""
    if kind == "too_large":
        raw = too_large(event, rnd, too_large_bytes)
    else:
        raw = MAKERS[kind](event, rnd)
    return raw, _key(event)
