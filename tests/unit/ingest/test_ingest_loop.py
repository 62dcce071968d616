"""The ingest loop's parts without Faust or a broker: decode once, write until durable, dead letters,
offsets. (The leader timers' work: tests/unit/alerts/test_alert_cycle.py,
tests/unit/issues/test_recluster_schedule.py.)"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import orjson
import pytest
from aiokafka.errors import KafkaConnectionError, MessageSizeTooLargeError

from services.contract.decode import Decoder, reject
from services.core.backoff import Backoff
from services.core.errors import StoreError
from services.core.metrics import Metrics
from services.ingest.dead_letters import DeadLetterSender
from services.ingest.durable import PAUSE_SLICE, DurableWriter, WriteAbandoned
from services.ingest.ingestor import DecodedBatch, Health, Ingestor, RawMessage
from services.ingest.offsets import LogPosition, OffsetTracker
from services.ingest.pipeline import ByteSplitter, InFlight, IngestPipeline
from services.ingest.records import DeadLetter, intake_line
from services.store.writer import EventWriter

BASE = {
    "schema": "claimwatch.verdict/v1",
    "trace_id": "t",
    "observed_at": "2026-11-21T09:14:03.512+01:00",
    "route": "billing-faq",
    "answer": {"action": "served"},
    "versions": {"model": "m1", "corpus": "c1"},
    "claims": [{"verdict": "contradicted", "text": "x"}, {"verdict": "supported"}],
}


NOW = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)  # when a batch arrives: BASE is an hour and a quarter old


def message(offset: int, event_id: str | None = None, partition: int = 0, **over) -> RawMessage:
    value = orjson.dumps({**BASE, "event_id": event_id, **over}) if event_id else b"not json"
    return RawMessage("verdicts", partition, offset, value, b"k")


async def inline(fn, *args):
    """A runner that runs on the calling thread (production passes the store's or the decode thread)."""
    return fn(*args)


class Sleeps(list):
    async def __call__(self, delay: float) -> None:
        self.append(delay)


def stored(store) -> int:
    return sum(r["e"] for r in store.query("SELECT sum(events) e FROM rate_minute WHERE dim = ''"))


# ---- Ingestor: decode once, keep each event with its message ------------------------------


class CountingDecoder(Decoder):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def decode_message(self, raw):
        self.calls += 1
        return super().decode_message(raw)


class PoisonWriter(EventWriter):
    """Raises a non-store error for one event id (a data-dependent bug), like a converter that chokes."""

    def __init__(self, store, poison: str):
        super().__init__(store)
        self.poison = poison

    def write_lines(self, keys, lines, dead=()):
        if any(k.event_id == self.poison for k in keys):
            raise ValueError("cannot convert")
        return super().write_lines(keys, lines, dead)


def test_split_keeps_each_event_with_its_message():
    messages = [message(0, "a"), message(1), message(2, "b")]
    batch = Ingestor(EventWriter(None), Decoder()).split(messages, NOW)
    assert isinstance(batch, DecodedBatch)
    assert [(m.offset, i, k.event_id) for m, i, k in batch.items] == [(0, None, "a"), (2, None, "b")]
    # encoded on the decoding thread
    assert batch.lines == [intake_line(Decoder().decode(messages[i].value)) for i in (0, 2)]
    assert dict(batch.counts.events) == {"billing-faq": 2}  # counted while decoding, for the metrics
    assert dict(batch.counts.claims) == {("billing-faq", "contradicted"): 2, ("billing-faq", "supported"): 2}
    assert [(d.offset, d.rejection.rule) for d in batch.dead] == [(1, batch.dead[0].rejection.rule)]


def test_isolation_reuses_decoded_events_and_dead_letters_the_culprit(store):
    decoder = CountingDecoder()
    ingestor = Ingestor(PoisonWriter(store, "bad"), decoder)
    messages = [message(0, "a"), message(1, "bad"), message(2), message(3, "c")]
    outcome = ingestor.process(messages, NOW)
    assert decoder.calls == len(messages)  # decoded once: isolation re-used the decoded events
    assert [k.event_id for k in outcome.keys] == ["a", "c"]
    assert sorted((d.offset, d.rejection.rule) for d in outcome.dead) == [
        (1, "unprocessable"),
        (2, outcome.dead[0].rejection.rule),
    ]
    assert (outcome.result.inserted, outcome.result.rejected) == (2, 2)
    assert stored(store) == 2 and store.query("SELECT count() n FROM dlq FINAL")[0]["n"] == 2


def test_write_is_safe_to_repeat_with_the_same_batch(store):
    ingestor = Ingestor(EventWriter(store), Decoder())
    batch = ingestor.split([message(0, "a"), message(1)], NOW)
    first, again = ingestor.write(batch), ingestor.write(batch)
    assert (first.result.inserted, again.result.inserted, again.result.duplicates) == (1, 0, 1)
    assert len(batch.dead) == len(again.dead) == 1 and stored(store) == 1


def envelope_message(offset: int, events: list, partition: int = 0) -> RawMessage:
    value = orjson.dumps({"schema": "claimwatch.verdicts/v1", "events": events})
    return RawMessage("verdicts", partition, offset, value, b"k")


def test_envelope_bad_events_are_dead_lettered_alone_and_neighbours_stored(store):
    events = [{**BASE, "event_id": f"e{i}"} for i in range(6)]
    events[2] = {**events[2], "route": "no spaces"}
    events[5] = "not an event"
    ingestor = Ingestor(EventWriter(store), Decoder())
    batch = ingestor.split([envelope_message(7, events), message(8, "single"), message(9)], NOW)
    assert [(m.offset, i, k.event_id) for m, i, k in batch.items] == [
        (7, 0, "e0"),
        (7, 1, "e1"),
        (7, 3, "e3"),
        (7, 4, "e4"),
        (8, None, "single"),
    ]
    assert [(d.offset, d.index, d.rejection.rule) for d in batch.dead] == [
        (7, 2, "bad_route"),
        (7, 5, "not_object"),
        (9, None, "not_json"),
    ]
    assert orjson.loads(batch.dead[0].raw) == events[2] and batch.dead[1].raw == b'"not an event"'
    outcome = ingestor.write(batch)
    assert (outcome.result.inserted, outcome.result.rejected) == (5, 3)
    ingestor.write(ingestor.split([envelope_message(7, events)], NOW))  # redelivered: nothing doubles
    assert stored(store) == 5
    rows = store.query("SELECT offset, envelope_index, rule FROM dlq FINAL ORDER BY offset, envelope_index")
    assert [tuple(r.values()) for r in rows] == [(7, 2, "bad_route"), (7, 5, "not_object"), (9, -1, "not_json")]


def test_malformed_envelope_is_one_dead_letter_with_the_whole_message():
    raw = orjson.dumps({"schema": "claimwatch.verdicts/v1", "events": []})
    batch = Ingestor(EventWriter(None), Decoder()).split([RawMessage("verdicts", 0, 3, raw)], NOW)
    [dead] = batch.dead
    assert (dead.index, dead.rejection.rule, dead.raw) == (None, "envelope.events.empty", raw) and not batch.items


def test_isolation_dead_letters_the_culprit_with_its_envelope_index(store):
    events = [{**BASE, "event_id": eid} for eid in ("a", "bad", "c")]
    outcome = Ingestor(PoisonWriter(store, "bad"), Decoder()).process([envelope_message(0, events)], NOW)
    assert [k.event_id for k in outcome.keys] == ["a", "c"]
    assert [(d.index, d.rejection.rule, orjson.loads(d.raw)["event_id"]) for d in outcome.dead] == [
        (1, "unprocessable", "bad")
    ]


def test_dead_letter_headers_carry_the_envelope_index():
    sent = []

    async def send(key, value, headers):
        sent.append(dict(headers))

    single = DeadLetter("verdicts", 0, 5, b"x", reject("not_json", "$", "no"))
    inside = replace(single, index=4)
    asyncio.run(DeadLetterSender(send, lambda: Backoff(0.1, 1.0)).send_all([single, inside]))
    assert "claimwatch-envelope-index" not in sent[0]
    assert (sent[1]["claimwatch-source"], sent[1]["claimwatch-envelope-index"]) == (b"verdicts/0/5", b"4")


# ---- DurableWriter ----------------------------------------------------------------------


class FlakyWriter(EventWriter):
    """The real writer behind a store that is down for the first ``failures`` writes."""

    def __init__(self, store, failures: int):
        super().__init__(store)
        self.failures, self.attempts = failures, 0

    def write_lines(self, keys, lines, dead=()):
        self.attempts += 1
        if self.attempts <= self.failures:
            raise StoreError("Connection refused")
        return super().write_lines(keys, lines, dead)


def test_durable_writer_retries_until_the_store_accepts(store):
    flaky, health, metrics, sleeps = FlakyWriter(store, 3), Health(), Metrics(), Sleeps()
    states = []

    async def watching(fn, *args):
        states.append((health.store_ok, health.consecutive_failures))
        return fn(*args)

    writer = DurableWriter(
        Ingestor(flaky, Decoder()), health, metrics, Backoff(0.2, 1.0), watching, inline, sleeps, clock=lambda: NOW
    )
    outcome = asyncio.run(writer.write([message(0, "a"), message(1, "b"), message(2)]))
    assert flaky.attempts == 4 and 0.2 * 3 <= sum(sleeps) <= 1.0 * 3 and all(0 < d <= PAUSE_SLICE for d in sleeps)
    assert states == [(True, 0), (False, 1), (False, 2), (False, 3)]  # Health shows the outage while it lasts
    assert health.store_ok and health.consecutive_failures == 0 and writer.backoff.attempt == 0
    assert metrics.store_failures._value.get() == 3
    assert [k.event_id for k in outcome.keys] == ["a", "b"] and len(outcome.dead) == 1
    assert stored(store) == 2 and store.query("SELECT count() n FROM dlq FINAL")[0]["n"] == 1  # one DLQ row, not four


def test_a_stopping_process_abandons_a_refused_batch_unacked_instead_of_retrying(store):
    flaky, stopping = FlakyWriter(store, 10**6), []
    writer = DurableWriter(
        Ingestor(flaky, Decoder()),
        Health(),
        Metrics(),
        Backoff(5.0, 30.0),
        inline,
        inline,
        Sleeps(),
        clock=lambda: NOW,
        stopping=lambda: bool(stopping),
    )

    async def stop_during_the_first_pause(seconds):
        stopping.append(True)

    writer.sleep = stop_during_the_first_pause
    with pytest.raises(WriteAbandoned, match="stay uncommitted and are redelivered"):
        asyncio.run(writer.write([message(0, "a")]))
    assert flaky.attempts == 2 and stored(store) == 0  # no retry loop after the stop: shutdown never waits on it


def test_durable_writer_decodes_once_across_retries(store):
    decoder = CountingDecoder()
    writer = DurableWriter(
        Ingestor(FlakyWriter(store, 2), decoder),
        Health(),
        Metrics(),
        Backoff(0.1, 0.1),
        inline,
        inline,
        Sleeps(),
        clock=lambda: NOW,
    )
    asyncio.run(writer.write([message(0, "a")]))
    assert decoder.calls == 1


# ---- DeadLetterSender -------------------------------------------------------------------


class WrappedSendError(Exception):
    """Like Faust's ProducerSendError: the client's error is the cause."""


def dead_letter(size: int, offset: int = 7) -> DeadLetter:
    return DeadLetter(
        "verdicts", 1, offset, b"x" * size, reject("too_large", "$", "event too large", route="billing-faq")
    )


def test_dead_letters_carry_provenance_headers_and_the_route_key():
    sent = []

    async def send(key, value, headers):
        sent.append((key, value, dict(headers)))

    asyncio.run(DeadLetterSender(send, lambda: Backoff(0.1, 1)).send_all([dead_letter(10)]))
    ((key, value, headers),) = sent
    assert key == b"billing-faq" and value == b"x" * 10
    assert headers == {
        "claimwatch-reason": b"$: event too large",
        "claimwatch-rule": b"too_large",
        "claimwatch-source": b"verdicts/1/7",
        "claimwatch-original-size": b"10",
    }


def test_too_large_dead_letters_are_truncated_and_marked():
    sent = []

    async def send(key, value, headers):
        if len(value) > 100_000:
            raise WrappedSendError("send failed") from MessageSizeTooLargeError()
        sent.append((value, dict(headers)))

    asyncio.run(
        DeadLetterSender(send, lambda: Backoff(0.1, 1), retry_on=(WrappedSendError,)).send_all([dead_letter(200_000)])
    )
    ((value, headers),) = sent
    assert len(value) == 64 * 1024 and headers["claimwatch-truncated"] == b"1"
    assert headers["claimwatch-original-size"] == b"200000"


def test_broker_errors_are_retried_with_backoff_and_others_propagate():
    sleeps, attempts = Sleeps(), []

    async def send(key, value, headers):
        attempts.append(value)
        if len(attempts) <= 2:
            raise KafkaConnectionError()

    sender = DeadLetterSender(send, lambda: Backoff(0.5, 2), sleep=sleeps)
    asyncio.run(sender.send_all([dead_letter(3, 1), dead_letter(4, 2)]))
    assert len(attempts) == 4 and len(sleeps) == 2

    async def broken(key, value, headers):
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        asyncio.run(DeadLetterSender(broken, lambda: Backoff(0.5, 2), sleep=sleeps).send_all([dead_letter(3)]))


# ---- offsets, the pipeline and the in-flight window -------------------------------------


def test_offset_tracker_keeps_the_highest_offset_per_partition():
    offsets = OffsetTracker()
    assert offsets.done("verdicts", 0) == -1 and offsets.lag("verdicts", 0, LogPosition(end=10)) == 10
    offsets.mark([message(5, "a"), message(3, "b"), message(7, "c", partition=1)])
    offsets.mark([message(4, "d")])  # a batch that finished out of order does not move it back
    assert offsets.done("verdicts", 0) == 5 and offsets.done("verdicts", 1) == 7
    assert offsets.lag("verdicts", 0, LogPosition(end=6)) == 0 and offsets.lag("verdicts", 0, LogPosition(end=10)) == 4
    assert offsets.lag("verdicts", 1, LogPosition(end=3)) == 0


def test_lag_counts_from_the_groups_commit_so_it_is_true_right_after_a_restart():
    restarted = OffsetTracker()  # has finished nothing yet
    assert restarted.lag("verdicts", 0, LogPosition(start=0, end=10, committed=10)) == 0
    assert restarted.lag("verdicts", 0, LogPosition(start=0, end=12, committed=10)) == 2
    assert restarted.lag("verdicts", 0, LogPosition(start=4, end=10)) == 6  # no commit yet: from the log start
    # The consumer's fetch highwater, when larger, is the newer reading of the log end.
    assert restarted.lag("verdicts", 0, LogPosition(end=11, committed=10), highwater=14) == 4
    restarted.mark([message(11, "a")])  # finished ahead of the commit (Faust commits each second)
    assert restarted.lag("verdicts", 0, LogPosition(end=14, committed=10)) == 2


def test_pipeline_acks_after_the_store_and_the_dlq_hold_the_batch(store):
    order, metrics, offsets = [], Metrics(), OffsetTracker()

    async def send(key, value, headers):
        order.append(("dlq", stored(store)))

    async def ack():
        order.append(("ack", offsets.done("verdicts", 0)))

    writer = DurableWriter(
        Ingestor(EventWriter(store), Decoder()), Health(), metrics, Backoff(0.1, 1), inline, inline, clock=lambda: NOW
    )
    pipeline = IngestPipeline(writer, DeadLetterSender(send, lambda: Backoff(0.1, 1)), metrics, offsets)
    metrics.keep_route_series({"billing-faq"})  # what a scrape chooses (services/api/routers/ops.py RouteSeries)
    asyncio.run(pipeline.finish([message(0, "a"), message(1), message(2, "a")], ack))
    assert order == [("dlq", 1), ("ack", -1)] and offsets.done("verdicts", 0) == 2
    assert metrics.duplicates._value.get() == 1
    assert metrics.fleet_events._value.get() == 2 and metrics.events.labels("billing-faq")._value.get() == 2


def test_in_flight_window_bounds_batches_and_surfaces_errors():
    async def scenario():
        running, peak, gates = set(), [0], [asyncio.Event() for _ in range(4)]

        async def batch(i):
            running.add(i)
            peak[0] = max(peak[0], len(running))
            await gates[i].wait()
            running.discard(i)
            if i == 3:
                raise StoreError("boom")

        window = InFlight(2)
        for gate in gates:
            asyncio.get_running_loop().call_later(0.01, gate.set)
        for i in range(3):
            await window.add(batch(i))
        assert peak[0] <= 2
        with pytest.raises(StoreError):
            await window.add(batch(3))
            await window.add(asyncio.sleep(0))
        window.cancel()
        assert not window.tasks

    asyncio.run(scenario())


def sized(n: int, offset: int) -> RawMessage:
    return RawMessage("verdicts", 0, offset, b"x" * n)


def test_byte_splitter_cuts_a_batch_into_ordered_slices_each_full_once_it_reaches_the_bound():
    messages = [sized(n, i) for i, n in enumerate([400, 300, 300, 100, 2500, 50, 999, 1])]
    parts = ByteSplitter(1000).slices(messages)
    assert [m.offset for part in parts for m in messages[part]] == list(range(len(messages)))  # each once, in order
    sizes = [[len(m.value) for m in messages[part]] for part in parts]
    assert sizes == [[400, 300, 300], [100, 2500], [50, 999], [1]]  # the message that passes the bound is the last
    assert ByteSplitter(1000).slices([]) == []


def test_a_batch_the_take_hands_over_full_by_bytes_is_one_slice():
    """The take (streams/take.py) is full once its bytes reach the bound, the passing envelope included; cutting
    that batch again left a one-envelope remainder, written alone at a whole write's fixed cost."""
    taken = [sized(n, i) for i, n in enumerate([400, 400, 400])]
    assert ByteSplitter(1000).slices(taken) == [slice(0, 3)]


def test_envelopes_under_way_are_bounded_by_bytes_not_by_message_count():
    """2,000 taken messages, each an envelope: with a byte bound, at most depth slices' bytes are decoded at once."""

    async def scenario():
        taken = [sized(1000, i) for i in range(2000)]  # stands for 2,000 envelopes of 1,000 events
        splitter, window = ByteSplitter(50_000), InFlight(2)
        under_way, peak, done = [0], [0], []

        async def finish(part):
            under_way[0] += sum(len(m.value) for m in part)
            peak[0] = max(peak[0], under_way[0])
            await asyncio.sleep(0)
            under_way[0] -= sum(len(m.value) for m in part)
            done.extend(m.offset for m in part)

        for part in splitter.slices(taken):
            await window.add(finish(taken[part]))
        while window.tasks:
            await window.tasks.popleft()
        assert done == list(range(2000))
        assert peak[0] <= 2 * 50_000 < len(taken) * 1000 // 10

    asyncio.run(scenario())


class CountingWriter(EventWriter):
    def __init__(self, store):
        super().__init__(store)
        self.writes: list[list[str]] = []

    def write_lines(self, keys, lines, dead=()):
        self.writes.append([k.event_id for k in keys])
        return super().write_lines(keys, lines, dead)


def test_batches_decoded_while_the_store_is_busy_go_in_together_as_the_next_write(store):
    """Group commit: one INSERT for the batches that waited, each acked once it is stored, in order."""

    async def scenario():
        gate, writer_ = asyncio.Event(), CountingWriter(store)
        order = []

        async def slow_store(fn, *args):
            await gate.wait()  # the store is busy until the test lets it go
            return fn(*args)

        durable = DurableWriter(
            Ingestor(writer_, Decoder()), Health(), Metrics(), Backoff(0.1, 1), slow_store, inline, clock=lambda: NOW
        )
        pipeline = IngestPipeline(durable, DeadLetterSender(None, lambda: Backoff(0.1, 1)), Metrics(), OffsetTracker())

        def acker(name):
            async def ack():
                order.append((name, stored(store)))

            return ack

        first = asyncio.ensure_future(pipeline.finish([message(0, "a")], acker("first")))
        await asyncio.sleep(0.01)  # the first write is under way (held at the gate)
        rest = [
            asyncio.ensure_future(pipeline.finish([message(i, f"e{i}"), message(i + 10, "a")], acker(f"b{i}")))
            for i in (1, 2, 3)
        ]
        await asyncio.sleep(0.01)
        assert writer_.writes == [] and order == []  # nothing acked before the store holds it
        gate.set()
        await asyncio.gather(first, *rest)
        assert writer_.writes == [["a"], ["e1", "a", "e2", "a", "e3", "a"]]  # the three that waited: one write
        assert order == [("first", 1), ("b1", 4), ("b2", 4), ("b3", 4)]  # acked after their write, in order
        assert stored(store) == 4  # "a" once: the idempotent writer sees the joined batch's repeats

    asyncio.run(scenario())


def test_a_failed_group_write_reaches_every_batch_in_it_and_acks_none(store):
    async def scenario():
        acked = []

        async def refusing_store(fn, *args):
            raise WriteAbandoned("stopping")

        durable = DurableWriter(
            Ingestor(EventWriter(store), Decoder()),
            Health(),
            Metrics(),
            Backoff(0.1, 1),
            refusing_store,
            inline,
            clock=lambda: NOW,
        )
        pipeline = IngestPipeline(durable, DeadLetterSender(None, lambda: Backoff(0.1, 1)), Metrics(), OffsetTracker())

        async def ack():
            acked.append(1)

        results = await asyncio.gather(
            *(pipeline.finish([message(i, f"e{i}")], ack) for i in range(3)), return_exceptions=True
        )
        assert [type(r) for r in results] == [WriteAbandoned] * 3 and acked == []

    asyncio.run(scenario())
