"""Send verdict events to claimwatch's Kafka topic, refused at the source when they break the contract.

Every event is serialised once, and those exact bytes are checked by the ingest
Decoder before they are handed to the client: a refused event raises the
ContractError the DLQ would have recorded (same rule, same field path), and what
is sent is exactly what was checked.

Events are packed per route key into batch envelopes (services/client/batching.py) unless
``envelopes=False``: a batch goes when it is full (events or bytes) or its linger time is up,
and on flush and close.

Delivery is idempotent (``enable_idempotence=True``, ``acks="all"``): a batch the
client retries after a timeout is written once by the broker. Both the sync and
the async producer run on kafka-python's client. aiokafka's producer only speaks
InitProducerId v0, which the embedded Tansu broker refuses, so with it idempotence
would have to be switched off.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from services.client.batching import (
    DEFAULT_ENVELOPE_BYTES,
    DEFAULT_LINGER_SECONDS,
    Batch,
    EnvelopeBatcher,
    LingeringBatcher,
)
from services.contract.decode import DEFAULT_MAX_BYTES, Decoder
from services.contract.model import MAX_ENVELOPE_EVENTS, SCHEMA, VerdictEvent
from services.contract.rejection import ContractError, Rejection, reject

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "claimwatch.verdicts"
# Room for the key, headers and record overhead on top of a maximal event or envelope.
_REQUEST_HEADROOM = 64 * 1024


class ProducerError(RuntimeError):
    """The broker could not be reached or refused the producer; the message says what to do."""


class DeliveryError(ProducerError):
    def __init__(self, delivery: Delivery):
        super().__init__(f"event {delivery.event_id} was not delivered: {delivery.error!r}")
        self.delivery = delivery


@dataclass(frozen=True)
class Outgoing:
    """One checked event, ready for the wire."""

    event_id: str
    route: str
    key: bytes
    value: bytes


@dataclass(frozen=True)
class Delivery:
    event_id: str
    route: str
    partition: int | None = None
    offset: int | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class SendReport:
    """What ``send_many`` did: refused events were never sent; sent = delivered + failed after its flush."""

    sent: int = 0
    delivered: int = 0
    failed: int = 0
    refused: list[tuple[int, Rejection]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "sent": self.sent,
            "delivered": self.delivered,
            "failed": self.failed,
            "refused": [{"index": i, **r.to_dict()} for i, r in self.refused],
        }


def new_event_id() -> str:
    return str(uuid.uuid4())


class EventPreparer:
    """Event (dict or VerdictEvent) in, checked bytes out. Fills ``schema`` and ``event_id`` when absent."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, new_id: Callable[[], str] = new_event_id):
        self._decoder = Decoder(max_bytes=max_bytes)
        self._new_id = new_id

    def prepare(self, event: Mapping[str, Any] | VerdictEvent) -> Outgoing:
        if isinstance(event, dict):  # the common case first; the Mapping ABC check is slower
            obj = dict(event)
        elif isinstance(event, VerdictEvent):
            obj = event.to_json_dict()
        elif isinstance(event, Mapping):
            obj = dict(event)
        else:
            raise ContractError(
                reject("not_object", "$", f"an event is a dict or a VerdictEvent, got {type(event).__name__}")
            )
        obj.setdefault("schema", SCHEMA)
        if obj.get("event_id") is None:
            obj["event_id"] = self._new_id()
        try:
            raw = orjson.dumps(obj)
        except TypeError as exc:
            raise ContractError(
                reject(
                    "not_json",
                    "$",
                    f"the event cannot be written as JSON ({exc}); use str, numbers, bools, lists, dicts "
                    "and timezone-aware datetimes",
                )
            ) from None
        result = self._decoder.decode(raw)
        if isinstance(result, Rejection):
            raise ContractError(result)
        return Outgoing(result.event_id, result.route, result.route.encode("utf-8"), raw)


def build_event(
    *,
    route: str,
    trace_id: str,
    observed_at: datetime | str,
    claims: list[dict],
    event_id: str | None = None,
    **fields: Any,
) -> dict:
    """A checked contract event as a dict. ``observed_at`` may be a timezone-aware datetime."""
    if isinstance(observed_at, datetime):
        if observed_at.tzinfo is None:
            raise ContractError(
                reject(
                    "timestamp_without_offset",
                    "observed_at",
                    "observed_at is a naive datetime; pass one with a tzinfo (e.g. timezone.utc)",
                )
            )
        observed_at = observed_at.isoformat()
    event = {
        "schema": SCHEMA,
        "event_id": event_id or new_event_id(),
        "trace_id": trace_id,
        "observed_at": observed_at,
        "route": route,
        "claims": claims,
        **fields,
    }
    EventPreparer().prepare(event)
    return event


class _Tally:
    """Delivery counts, updated from the client's I/O thread; bound methods keep the hot path cheap."""

    def __init__(self, parent: _Tally | None = None) -> None:
        self.delivered = 0
        self.failed = 0
        self._parent = parent
        self._lock = threading.Lock()

    def ok(self, _metadata: Any = None) -> None:
        with self._lock:
            self.delivered += 1
        if self._parent is not None:
            self._parent.ok()

    def fail(self, _error: Any = None) -> None:
        with self._lock:
            self.failed += 1
        if self._parent is not None:
            self._parent.fail()


class VerdictProducer:
    """Checked, batched, compressed, idempotent sends of verdict events; key = route.

    Events of one route are packed into batch envelopes of up to ``envelope_max_events`` events
    and ``envelope_max_bytes`` bytes, waiting at most ``envelope_linger_ms``; ``envelopes=False``
    sends one event per message. ``linger_ms`` and ``batch_size`` are the Kafka client's own.

    ``on_delivery(Delivery)`` runs on the client's I/O thread for every event,
    delivered or failed; keep it short. ``close()`` flushes first.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str = DEFAULT_TOPIC,
        *,
        linger_ms: int = 20,
        batch_size: int = 256 * 1024,
        compression: str | None = "gzip",
        on_delivery: Callable[[Delivery], None] | None = None,
        client_id: str = "claimwatch-producer",
        retries: int | None = None,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        max_event_bytes: int = DEFAULT_MAX_BYTES,
        new_id: Callable[[], str] = new_event_id,
        envelopes: bool = True,
        envelope_linger_ms: float = DEFAULT_LINGER_SECONDS * 1000,
        envelope_max_events: int = MAX_ENVELOPE_EVENTS,
        envelope_max_bytes: int = DEFAULT_ENVELOPE_BYTES,
    ):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self.topic = topic
        self.on_delivery = on_delivery
        self._preparer = EventPreparer(max_event_bytes, new_id)
        self._tally = _Tally()
        self._batcher: LingeringBatcher | None = None
        if envelopes:
            batcher = EnvelopeBatcher(envelope_max_events, envelope_max_bytes, envelope_linger_ms / 1000)
            self._batcher = LingeringBatcher(batcher, self._send_batches)
        options = dict(
            bootstrap_servers=bootstrap_servers,
            client_id=client_id,
            acks="all",
            enable_idempotence=True,
            compression_type=compression,
            linger_ms=linger_ms,
            batch_size=batch_size,
            max_in_flight_requests_per_connection=5,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            max_request_size=max(max_event_bytes, envelope_max_bytes) + _REQUEST_HEADROOM,
        )
        if retries is not None:
            options["retries"] = retries
        try:
            self._client = KafkaProducer(**options)
        except KafkaError as exc:
            raise ProducerError(
                f"cannot reach Kafka at {bootstrap_servers}: {exc}. Start the broker "
                "(claimwatch up) or pass the right --kafka host:port."
            ) from exc
        self._kafka_error = KafkaError
        self._closed = False

    @property
    def delivered(self) -> int:
        return self._tally.delivered

    @property
    def failed(self) -> int:
        return self._tally.failed

    def send(
        self, event: Mapping[str, Any] | VerdictEvent, *, on_delivery: Callable[[Delivery], None] | None = None
    ) -> str:
        """Check and enqueue one event; returns its event_id. Raises ContractError for a bad event."""
        outgoing = self._preparer.prepare(event)
        self._enqueue(outgoing, self._tally, on_delivery)
        return outgoing.event_id

    def send_many(
        self,
        events: Iterable[Mapping[str, Any] | VerdictEvent],
        progress: Callable[[int], None] | None = None,
        *,
        progress_every: int = 1000,
    ) -> SendReport:
        """Send all good events, list the refused ones by position, flush, and count deliveries."""
        report, tally = SendReport(), _Tally(parent=self._tally)
        for index, event in enumerate(events):
            try:
                outgoing = self._preparer.prepare(event)
            except ContractError as exc:
                report.refused.append((index, exc.rejection))
                continue
            self._enqueue(outgoing, tally, None)
            report.sent += 1
            if progress is not None and report.sent % progress_every == 0:
                progress(report.sent)
        self.flush()
        report.delivered, report.failed = tally.delivered, tally.failed
        if progress is not None and report.sent % progress_every:
            progress(report.sent)
        return report

    def send_records(self, records: Iterable[tuple[bytes | None, bytes]]) -> SendReport:
        """Send (key, value) records as they are, unchecked, flush, and count deliveries: for what is no event,
        such as the OTLP intake's refused records (the worker dead-letters them)."""
        if self._closed:
            raise ProducerError("this producer is closed; create a new one")
        report, tally = SendReport(), _Tally(parent=self._tally)
        for key, value in records:
            try:
                future = self._client.send(self.topic, key=key, value=value)
            except self._kafka_error as exc:
                raise ProducerError(f"could not enqueue a record for {self.topic}: {exc}") from exc
            future.add_callback(tally.ok)
            future.add_errback(tally.fail)
            report.sent += 1
        self.flush()
        report.delivered, report.failed = tally.delivered, tally.failed
        return report

    def _enqueue(self, outgoing: Outgoing, tally: _Tally, extra: Callable[[Delivery], None] | None) -> None:
        if self._closed:
            raise ProducerError("this producer is closed; create a new one")
        if self._batcher is not None:
            self._batcher.add(outgoing.key, outgoing.value, (outgoing, tally, extra))
            return
        try:
            future = self._client.send(self.topic, key=outgoing.key, value=outgoing.value)
        except self._kafka_error as exc:
            raise ProducerError(
                f"could not enqueue event {outgoing.event_id} for {self.topic}: {exc}. "
                "Check that the broker is up and the topic exists."
            ) from exc
        future.add_callback(tally.ok)
        future.add_errback(tally.fail)
        listeners = tuple(f for f in (self.on_delivery, extra) if f is not None)
        if listeners:  # a Delivery per event only when someone listens
            future.add_callback(self._delivered, outgoing, listeners)
            future.add_errback(self._undelivered, outgoing, listeners)

    def _send_batches(self, batches: list[Batch], raise_errors: bool) -> None:
        """Hand batches to the client; a batch it refuses counts as failed deliveries, and the error is raised
        (after the other batches went) when the caller can take it."""
        error = None
        for batch in batches:
            try:
                future = self._client.send(self.topic, key=batch.key, value=batch.message())
            except self._kafka_error as exc:
                self._batch_undelivered(batch.items, exc)
                log.warning("could not enqueue %d events for %s: %r", len(batch.items), self.topic, exc)
                error = error or exc
                continue
            future.add_callback(self._batch_delivered, batch.items)
            future.add_errback(self._batch_undelivered, batch.items)
        if error is not None and raise_errors:
            raise ProducerError(
                f"could not enqueue events for {self.topic}: {error}. Check that the broker is up and the topic exists."
            ) from error

    def _batch_delivered(self, items: list, metadata: Any) -> None:
        for outgoing, tally, extra in items:
            tally.ok()
            listeners = tuple(f for f in (self.on_delivery, extra) if f is not None)
            if listeners:
                self._delivered(outgoing, listeners, metadata)

    def _batch_undelivered(self, items: list, error: BaseException) -> None:
        for outgoing, tally, extra in items:
            tally.fail()
            listeners = tuple(f for f in (self.on_delivery, extra) if f is not None)
            if listeners:
                self._undelivered(outgoing, listeners, error)

    def _delivered(self, outgoing: Outgoing, listeners: tuple, metadata: Any) -> None:
        delivery = Delivery(outgoing.event_id, outgoing.route, metadata.partition, metadata.offset)
        for listener in listeners:
            listener(delivery)

    def _undelivered(self, outgoing: Outgoing, listeners: tuple, error: BaseException) -> None:
        delivery = Delivery(outgoing.event_id, outgoing.route, error=error)
        for listener in listeners:
            listener(delivery)

    def warm_up(self) -> None:
        """Fetch the topic's metadata now, so the first send does not block on it."""
        try:
            self._client.partitions_for(self.topic)
        except self._kafka_error as exc:
            raise ProducerError(f"no metadata for topic {self.topic}: {exc}. Create it or check the broker.") from exc

    def client_metrics(self) -> dict:
        """kafka-python's own metrics (retries, batch sizes, compression rate), for diagnostics and tests."""
        return self._client.metrics()

    def flush(self, timeout: float | None = None) -> None:
        if self._batcher is not None:
            self._batcher.flush()
        try:
            self._client.flush(timeout=timeout)
        except self._kafka_error as exc:
            raise ProducerError(f"flush did not finish within {timeout}s: {exc}; the broker may be down") from exc

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            if self._batcher is not None:
                self._batcher.close()
            self._client.close(timeout=timeout)

    def __enter__(self) -> VerdictProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncVerdictProducer:
    """asyncio face of VerdictProducer: same checks, same idempotent client.

    ``await send(event)`` checks the event and returns a future that resolves to
    its Delivery (or raises DeliveryError). Calls that can block (connect, flush,
    close, bulk sends) run in a worker thread, off the event loop.
    """

    def __init__(self, bootstrap_servers: str | list[str], topic: str = DEFAULT_TOPIC, **options: Any):
        self._args = (bootstrap_servers, topic)
        self._options = options
        self._sync: VerdictProducer | None = None

    async def start(self) -> AsyncVerdictProducer:
        sync = await asyncio.to_thread(VerdictProducer, *self._args, **self._options)
        await asyncio.to_thread(sync.warm_up)
        self._sync = sync
        return self

    @property
    def producer(self) -> VerdictProducer:
        if self._sync is None:
            raise ProducerError("call 'await producer.start()' (or use 'async with') before sending")
        return self._sync

    async def send(self, event: Mapping[str, Any] | VerdictEvent) -> asyncio.Future[Delivery]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Delivery] = loop.create_future()

        def resolve(delivery: Delivery) -> None:
            if not future.done():
                if delivery.ok:
                    future.set_result(delivery)
                else:
                    future.set_exception(DeliveryError(delivery))

        def on_delivery(delivery: Delivery) -> None:  # on the client's I/O thread
            loop.call_soon_threadsafe(resolve, delivery)

        self.producer.send(event, on_delivery=on_delivery)
        return future

    async def send_and_wait(self, event: Mapping[str, Any] | VerdictEvent) -> Delivery:
        return await (await self.send(event))

    async def send_many(
        self, events: Iterable[Mapping[str, Any] | VerdictEvent], progress: Callable[[int], None] | None = None
    ) -> SendReport:
        return await asyncio.to_thread(self.producer.send_many, events, progress)

    async def flush(self, timeout: float | None = None) -> None:
        await asyncio.to_thread(self.producer.flush, timeout)

    async def close(self, timeout: float | None = None) -> None:
        if self._sync is not None:
            await asyncio.to_thread(self._sync.close, timeout)

    async def __aenter__(self) -> AsyncVerdictProducer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
