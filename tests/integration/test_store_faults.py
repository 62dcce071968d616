"""Nothing lost, nothing doubled when the store fails: a failing or slow server, a full disk, a batch it refuses,
a damaged part; on real components (the broker, worker processes, chDB, a real filesystem)."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx
import orjson
import pytest

from bench.processes import WorkerProcess
from services.client.simulate import Scenario, expected_counts, generate
from tests.support.clickhouse_standin import ClickHouseStandin
from tests.support.filesystems import filled, small_filesystem
from tests.support.streaming import (
    BATCHING,
    StreamingProducer,
    metric_value,
    not_ready,
    rss_mb,
    setup_topics,
    stream_through_kills,
    totals,
)


@BATCHING
def test_store_failures_retry_hold_offsets_and_resume_without_loss(broker, topic_prefix, tmp_path, batched):
    sims = list(generate(Scenario.demo(), datetime(2026, 11, 21, 5, 0, tzinfo=UTC), 45, seed=29))
    expected = expected_counts(sims)
    first, second, third = sims[:4000], sims[4000:9000], sims[9000:]
    topic = setup_topics(broker, topic_prefix)
    with ClickHouseStandin(tmp_path / "server") as server:
        env = {"CLAIMWATCH_CLUSTERING__IN_WORKER": "false", "CLAIMWATCH_INGEST__RETRY_MAX_SECONDS": "2"}
        worker = WorkerProcess(broker.bootstrap, server.url, topic_prefix, tmp_path / "worker.log", env=env).start()

        def send(batch):
            return StreamingProducer(broker.bootstrap, topic, batch, chunk=5000, pause=0, batched=batched).run()

        send(first)
        worker.wait_for(lambda: (totals(worker) or (0, 0))[0] > 0, 120, "first events stored")

        # 1. Inserts fail: retried with backoff, readiness says why, memory stays bounded.
        server.fail_inserts = True
        rss_before = rss_mb(worker.proc.pid)
        send(second)
        ready = worker.wait_for(lambda: not_ready(worker), 60, "readiness to report the store")
        assert "not enough space" in ready["reason"]
        worker.wait_for(lambda: server.failed_inserts >= 3, 60, "retries with backoff")
        growth = rss_mb(worker.proc.pid) - rss_before
        assert growth < 300, f"worker grew {growth:.0f} MB during the outage"
        stored = totals(worker)[0]  # nothing more is written while every insert fails
        # 2. Killed during the outage: offsets of unwritten batches must not have been committed.
        worker.kill()
        server.fail_inserts = False
        # 3. A slow store: inserts take 1.5 s each, ingestion slows down but completes.
        server.insert_delay = 1.5
        worker.start()
        send(third)
        worker.wait_for(lambda: (totals(worker) or (0, 0))[0] > stored, 120, "an insert through the slow store")
        server.insert_delay = 0.0
        want = (expected.valid_events, expected.bad_total)
        worker.wait_for(lambda: totals(worker) == want, 300, f"{want} after store faults")
        ready = httpx.get(worker.url + "/readyz", timeout=10).json()
        assert ready["ready"] is True, ready
        assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
        worker.stop()


def test_sigterm_stops_a_worker_whose_store_refuses_every_write_and_a_restart_stores_every_event_once(
    broker, topic_prefix, tmp_path
):
    sims = list(generate(Scenario.demo(), datetime(2026, 11, 21, 5, 0, tzinfo=UTC), 10, seed=31))
    expected = expected_counts(sims)
    topic = setup_topics(broker, topic_prefix)
    with ClickHouseStandin(tmp_path / "server") as server:
        env = {"CLAIMWATCH_CLUSTERING__IN_WORKER": "false", "CLAIMWATCH_INGEST__RETRY_MAX_SECONDS": "30"}
        worker = WorkerProcess(broker.bootstrap, server.url, topic_prefix, tmp_path / "worker.log", env=env).start()
        server.fail_inserts = True  # from the first batch on: nothing is ever stored
        StreamingProducer(broker.bootstrap, topic, sims, chunk=5000, pause=0).run()
        worker.wait_for(lambda: server.failed_inserts >= 3, 120, "the writes to be refused and retried")
        worker.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        try:
            worker.proc.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
            raise AssertionError(f"the worker did not stop within 15 s of SIGTERM; log: {worker.log_path}") from None
        print(f"stopped {time.monotonic() - started:.1f} s after SIGTERM")  # shown with -s
        server.fail_inserts = False
        worker.start()  # the unacked batches are redelivered
        want = (expected.valid_events, expected.bad_total)
        worker.wait_for(lambda: totals(worker) == want, 300, f"{want} after the restart")
        assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
        worker.stop()


def test_a_full_disk_holds_offsets_says_not_ready_and_every_event_lands_once_when_space_returns(
    broker, topic_prefix, tmp_path
):
    """The store on a real filesystem that fills up: chDB's streaming insert reports success and stores nothing,
    so the writer's count of what the store holds is what keeps the offsets uncommitted."""
    sims = list(generate(Scenario.demo(), datetime(2026, 11, 21, 5, 0, tzinfo=UTC), 20, seed=37))
    expected = expected_counts(sims)
    first, second = sims[:2000], sims[2000:]
    topic = setup_topics(broker, topic_prefix)
    env = {"CLAIMWATCH_CLUSTERING__IN_WORKER": "false", "CLAIMWATCH_INGEST__RETRY_MAX_SECONDS": "2"}
    with small_filesystem(tmp_path / "disk", 256) as disk:
        worker = WorkerProcess(
            broker.bootstrap, f"chdb:{disk / 'ch'}", topic_prefix, tmp_path / "worker.log", env=env
        ).start()
        StreamingProducer(broker.bootstrap, topic, first, chunk=2000, pause=0).run()
        before = expected_counts(first)
        worker.wait_for(lambda: totals(worker) == (before.valid_events, before.bad_total), 120, "the first events")
        with filled(disk, leave_bytes=1 << 20):
            StreamingProducer(broker.bootstrap, topic, second, chunk=5000, pause=0, batched=True).run()
            ready = worker.wait_for(lambda: not_ready(worker), 60, "readiness to report the failing writes")
            assert "disk" in ready["reason"], ready
            worker.wait_for(
                lambda: metric_value(worker, "claimwatch_store_failures_total") >= 2, 60, "failed writes counted"
            )
            assert totals(worker)[0] == before.valid_events  # nothing more, and nothing pretended
            worker.kill()  # offsets of what was not stored must not have been committed
        worker.start()
        want = (expected.valid_events, expected.bad_total)
        worker.wait_for(lambda: totals(worker) == want, 300, f"{want} once space returned")
        assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
        ready = httpx.get(worker.url + "/readyz", timeout=10).json()
        assert ready["ready"] is True, ready
        worker.stop()


POISON = "CHECK NOT startsWith(trace_id, 'poison')"


def poisoned(sims: list, every: int) -> list:
    """Every ``every``-th event the stream sends once, with a trace id the store's constraint refuses: counted as
    the dead letters (rule store.rejected) they must become."""
    counts = Counter(s.event["event_id"] for s in sims if s.event is not None)
    out, n = [], 0
    for sim in sims:
        if sim.event is not None and sim.bad_rule is None and counts[sim.event["event_id"]] == 1:
            n += 1
            if n % every == 0:
                event = {**sim.event, "trace_id": f"poison-{n}"}
                sim = dataclasses.replace(sim, raw=orjson.dumps(event), event=event, bad_rule="store.rejected")
        out.append(sim)
    return out


def test_events_the_store_refuses_are_dead_lettered_and_the_rest_stored_once_through_kills_mid_split(
    broker, topic_prefix, tmp_path
):
    sims = poisoned(list(generate(Scenario.demo(), datetime(2026, 11, 21, 6, 0, tzinfo=UTC), 30, seed=53)), every=150)
    expected = expected_counts(sims)
    assert expected.bad["store.rejected"] >= 30
    topic = setup_topics(broker, topic_prefix)
    path = tmp_path / "ch"
    subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""\
        from services.store.backends import ChdbStore
        from services.store.migrate import migrate
        store = ChdbStore({str(path)!r}); migrate(store)
        store.command("ALTER TABLE events ADD CONSTRAINT no_poison {POISON}")
        store.close()"""),
        ],
        check=True,
        timeout=120,
    )
    worker = WorkerProcess(
        broker.bootstrap,
        f"chdb:{path}",
        topic_prefix,
        tmp_path / "worker.log",
        env={"CLAIMWATCH_INGEST__BATCH_SIZE": "20", "CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
    )
    producer = StreamingProducer(broker.bootstrap, topic, sims, chunk=2000, pause=0.5, batched=True)
    rng = random.Random(7)
    stream_through_kills(worker, producer, (expected.valid_events, expected.bad_total), rng, (0.1, 1.0))
    assert {d["reason"]: d["count"] for d in worker.get("/api/dlq")} == expected.bad
    [refused] = [d for d in worker.get("/api/dlq", samples=1) if d["reason"] == "store.rejected"]
    assert "no_poison" in str(refused), refused  # the store's own reason, to fix and replay
    assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
    worker.stop()


def damage_an_events_part(store_dir: Path) -> int:
    """Delete a data file of one `events` part, as a failing disk or a careless hand would; its row count."""
    parts = sorted(p for p in (store_dir / "data" / "default" / "events").iterdir() if p.name.startswith("all_"))
    part = max(parts, key=lambda p: int((p / "count.txt").read_text()))  # the most answers, so the loss shows
    next(part.glob("*.bin")).unlink()
    return int((part / "count.txt").read_text())


def test_a_damaged_part_stops_the_worker_and_a_rebuild_then_replay_restores_it_exactly(broker, topic_prefix, tmp_path):
    sims = list(generate(Scenario.demo(), datetime(2026, 11, 21, 9, 0, tzinfo=UTC), 12, seed=59))
    expected = expected_counts(sims)
    want = (expected.valid_events, expected.bad_total)
    topic = setup_topics(broker, topic_prefix)
    store_dir = tmp_path / "ch"
    store, log = f"chdb:{store_dir}", tmp_path / "worker.log"
    env = {"CLAIMWATCH_CLUSTERING__IN_WORKER": "false", "CLAIMWATCH_INGEST__BATCH_SIZE": "500"}
    with WorkerProcess(broker.bootstrap, store, topic_prefix, log, env=env) as worker:
        StreamingProducer(broker.bootstrap, topic, sims, chunk=1000, pause=0.2).run()
        worker.wait_for(lambda: totals(worker) == want, 180, f"{want} stored")
    lost = damage_an_events_part(store_dir)

    refused = WorkerProcess(broker.bootstrap, store, topic_prefix, log, env=env)
    with pytest.raises(AssertionError, match="worker exited with 1"):
        refused.start()
    last = log.read_text().strip().splitlines()[-1]
    assert "is damaged" in last and "claimwatch repair --damaged" in last, last

    cli = [sys.executable, "-m", "services.app.cli", "repair", "--damaged", "--clickhouse", store]
    rebuilt = subprocess.run(cli, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert f"{lost:,} answers were lost" in rebuilt.stderr, rebuilt.stderr

    with WorkerProcess(broker.bootstrap, store, topic_prefix, log, env=env) as worker:
        assert totals(worker)[0] == expected.valid_events - lost  # the rates say what the store holds, no more
        StreamingProducer(broker.bootstrap, topic, sims, chunk=1000, pause=0.2).run()  # the replay
        worker.wait_for(lambda: totals(worker)[0] == expected.valid_events, 180, "the lost answers restored")
        assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
