"""Messages as a batching producer sends them: events of one route key packed into batch envelopes.

Packing keeps each event's bytes as they are, so rule counts, DLQ bytes and event ids stay the same
as with one event per message. What cannot ride in an envelope (bytes that are not a JSON object,
events near the 1 MiB limit) is sent alone, as a producer would have to.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import orjson

ENVELOPE_HEAD = b'{"schema":"claimwatch.verdicts/v1","events":['
ENVELOPE_TAIL = b"]}"
MAX_ENVELOPE_BYTES = 512 * 1024


class Message(NamedTuple):
    """What send_all and the streaming producers take: a key and the value's bytes."""

    key: bytes
    raw: bytes


def envelope(raws: Iterable[bytes]) -> bytes:
    return ENVELOPE_HEAD + b",".join(raws) + ENVELOPE_TAIL


def packable(raw: bytes) -> bool:
    if len(raw) > MAX_ENVELOPE_BYTES // 4:
        return False
    try:
        return isinstance(orjson.loads(raw), dict)
    except orjson.JSONDecodeError:
        return False


def pack(messages: Iterable, max_events: int = 100) -> list[Message]:
    """Messages (anything with ``key`` and ``raw``) as envelopes of up to ``max_events`` per key, in order."""
    out: list[Message] = []
    open_: dict[bytes, list[bytes]] = {}

    def close(key: bytes) -> None:
        out.append(Message(key, envelope(open_.pop(key))))

    for m in messages:
        if not packable(m.raw):
            out.append(Message(m.key, m.raw))
            continue
        batch = open_.setdefault(m.key, [])
        if batch and sum(map(len, batch)) + len(m.raw) > MAX_ENVELOPE_BYTES:
            close(m.key)
            batch = open_.setdefault(m.key, [])
        batch.append(m.raw)
        if len(batch) >= max_events:
            close(m.key)
    for key in list(open_):
        close(key)
    return out


def events_of(value: bytes) -> list[dict]:
    """The events a message holds: the events of an envelope, or the one event."""
    doc = orjson.loads(value)
    return doc["events"] if doc.get("schema") == "claimwatch.verdicts/v1" else [doc]
