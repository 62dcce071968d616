"""Send JSONL lines to Kafka as they are (replay), keyed by route, with a progress bar.

By default lines that are JSON objects are packed per route into batch envelopes (each line's bytes
kept as they are); lines that cannot ride in one (not JSON, not an object, already an envelope, too
large) go alone, so the worker dead-letters them with the reason it would give anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from services.client.batching import EnvelopeBatcher
from services.contract.decode import is_envelope


def _object(line: bytes) -> dict | None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _route_key(obj: dict | None) -> bytes | None:
    """The route as the message key; an envelope's is its first event's (all share one route)."""
    if obj is not None and is_envelope(obj):
        events = obj.get("events")
        obj = events[0] if isinstance(events, list) and events and isinstance(events[0], dict) else None
    route = (obj or {}).get("route")
    return route.encode() if isinstance(route, str) else None


def raw_producer(bootstrap: str):
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=20,
        batch_size=256 * 1024,
        compression_type="gzip",
        max_request_size=4 << 20,
        retries=2_147_483_647,
        client_id="claimwatch-produce",
    )


def replay_messages(
    lines: Iterable[bytes], batcher: EnvelopeBatcher | None = None
) -> Iterator[tuple[bytes | None, bytes, int]]:
    """(key, value, lines it holds) per Kafka message; one line per message when ``batcher`` is None."""
    for line in lines:
        obj = _object(line)
        key = _route_key(obj)
        if batcher is None or obj is None or is_envelope(obj):
            yield key, line, 1
            continue
        for batch in batcher.add(key, line, None, 0.0):  # a file is all there: batches close when full
            yield batch.key, batch.message(), len(batch.values)
    for batch in batcher.drain() if batcher is not None else ():
        yield batch.key, batch.message(), len(batch.values)


def send_raw(
    producer, topic: str, lines: Iterable[bytes], progress=None, task=None, batcher: EnvelopeBatcher | None = None
) -> int:
    """Send every line; returns the number of Kafka messages (lines, unless ``batcher`` packs them)."""
    sent = messages = 0
    for key, value, n in replay_messages(lines, batcher):
        producer.send(topic, key=key, value=value)
        messages += 1
        if progress is not None and (sent + n) // 1000 > sent // 1000:
            progress.update(task, completed=sent + n)
        sent += n
    producer.flush()
    if progress is not None:
        progress.update(task, completed=sent)
    return messages


def send_lines(bootstrap: str, topic: str, path: Path, console: Console, batch: bool = True) -> tuple[int, int]:
    """(lines, messages) sent."""
    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    producer = raw_producer(bootstrap)
    try:
        with Progress(
            TextColumn("producing"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        ) as progress:
            task = progress.add_task("produce", total=len(lines))
            return len(lines), send_raw(producer, topic, lines, progress, task, EnvelopeBatcher() if batch else None)
    finally:
        producer.close()
