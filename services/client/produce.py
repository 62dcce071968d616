"""Send JSONL lines to Kafka as they are (replay), keyed by route, with a progress bar."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


def route_key(line: bytes) -> bytes | None:
    try:
        route = orjson.loads(line).get("route")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return route.encode() if isinstance(route, str) else None


def raw_producer(bootstrap: str):
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=20,
                         batch_size=256 * 1024, compression_type="gzip", max_request_size=4 << 20,
                         retries=2_147_483_647, client_id="claimwatch-produce")


def send_raw(producer, topic: str, lines: Iterable[bytes], progress=None, task=None) -> int:
    sent = 0
    for line in lines:
        producer.send(topic, key=route_key(line), value=line)
        sent += 1
        if progress is not None and sent % 1000 == 0:
            progress.update(task, completed=sent)
    producer.flush()
    if progress is not None:
        progress.update(task, completed=sent)
    return sent


def send_lines(bootstrap: str, topic: str, path: Path, console: Console) -> int:
    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    producer = raw_producer(bootstrap)
    try:
        with Progress(TextColumn("producing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console, transient=True) as progress:
            task = progress.add_task("produce", total=len(lines))
            return send_raw(producer, topic, lines, progress, task)
    finally:
        producer.close()
