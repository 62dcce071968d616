"""The OTLP intake's way onto the verdicts topic (services/api/routers/otlp.py): events through the verdict producer
(checked, in envelopes per route, idempotent), refused records as they are. The producer is made at the first
export, so an API whose broker is down still starts, and answers exports 503 until the broker is back."""

from __future__ import annotations

import threading

from services.api.routers.otlp import IntakeUnavailable
from services.client.producer import ProducerError, VerdictProducer

DELIVERY_TIMEOUT_MS = 15_000  # an export waits at most this long for the broker, then is answered 503 and retried


class BrokerIntake:
    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic
        self._producer: VerdictProducer | None = None
        self._lock = threading.Lock()

    def producer(self) -> VerdictProducer:
        with self._lock:
            if self._producer is None:
                self._producer = VerdictProducer(
                    self.bootstrap,
                    self.topic,
                    client_id="claimwatch-otlp-intake",
                    request_timeout_ms=DELIVERY_TIMEOUT_MS // 2,
                    delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                )
            return self._producer

    def publish(self, events: list[dict], refused: list[tuple[str | None, bytes]]) -> None:
        try:
            producer = self.producer()
            sent = producer.send_many(events)
            dead = producer.send_records([((route or "").encode(), value) for route, value in refused])
        except ProducerError as exc:
            raise IntakeUnavailable(f"the broker at {self.bootstrap} did not take the export: {exc}") from exc
        if sent.refused or sent.failed or dead.failed:
            raise IntakeUnavailable(
                f"the broker at {self.bootstrap} did not take {sent.failed + dead.failed} of "
                f"{sent.sent + dead.sent} records; retry"
                + (f" ({len(sent.refused)} events refused: {sent.refused[0][1].reason})" if sent.refused else "")
            )

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.close(timeout=5)
                self._producer = None
