"""Streaming traffic at a worker while faults land, and reading back what it stored: the reliability tests'."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import WorkerProcess
from services.app.broker import create_topics
from services.client.produce import raw_producer
from tests.support.envelopes import pack

BATCHING = pytest.mark.parametrize("batched", [False, True], ids=["single", "envelopes"])


def totals(worker: WorkerProcess) -> tuple[int, int] | None:
    rates = worker.get("/api/rates", window="all")
    dlq = worker.get("/api/dlq")
    if rates is None or dlq is None:
        return None
    return sum(r["events"] for r in rates), sum(d["count"] for d in dlq)


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class StreamingProducer(threading.Thread):
    """Sends messages in paced chunks, so faults land while traffic is still arriving; ``batched``
    packs each chunk's events into envelopes per route key, as a batching producer does."""

    def __init__(self, bootstrap: str, topic: str, messages, chunk: int, pause: float, batched: bool = False):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.messages, self.chunk, self.pause = bootstrap, topic, messages, chunk, pause
        self.batched = batched
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            producer = raw_producer(self.bootstrap)
            for start in range(0, len(self.messages), self.chunk):
                chunk = self.messages[start : start + self.chunk]
                for sim in pack(chunk) if self.batched else chunk:
                    producer.send(self.topic, key=sim.key, value=sim.raw)
                producer.flush()
                time.sleep(self.pause)
            producer.close()
        except BaseException as exc:  # reported by the test
            self.error = exc


def setup_topics(broker, prefix: str) -> str:
    topic = f"{prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{prefix}.verdicts.dlq", f"{prefix}.alerts"], 4)
    return topic


def not_ready(worker: WorkerProcess):
    response = httpx.get(worker.url + "/readyz", timeout=10)
    return response.json() if response.status_code == 503 else None


def metric_value(worker: WorkerProcess, name: str) -> float:
    text = worker.get_text("/metrics")
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples if s.name == name)


def stream_through_kills(
    worker: WorkerProcess,
    producer: StreamingProducer,
    want: tuple[int, int],
    rng,
    pause: tuple[float, float],
    kills: int = 2,
) -> None:
    """Start ``worker`` and ``producer``; SIGKILL and restart the worker ``kills`` times, each after 500 more
    events stored and a random ``pause``; then wait until the stored totals are ``want``."""
    worker.start()
    producer.start()
    seen = 0
    for _ in range(kills):
        seen = worker.wait_for(
            lambda seen=seen: (n := (totals(worker) or (0, 0))[0]) > seen + 500 and n, 240, "ingest resumed"
        )
        time.sleep(rng.uniform(*pause))
        worker.kill()
        worker.start()
    producer.join(300)
    assert producer.error is None and not producer.is_alive()
    worker.wait_for(lambda: totals(worker) == want, 300, f"{want} after the kills")
