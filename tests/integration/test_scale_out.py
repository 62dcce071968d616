"""Scale-out without code changes: two worker processes in one consumer group, sharing a
ClickHouse server (the HTTP stand-in in front of chDB), count every event exactly once."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.processes import WorkerProcess, send_all
from services.app.broker import create_topics
from services.client.simulate import Scenario, expected_counts, generate
from tests.support.clickhouse_standin import ClickHouseStandin


def test_two_workers_share_partitions_and_count_exactly(broker, topic_prefix, tmp_path):
    sims = list(generate(Scenario.demo(), datetime(2026, 11, 21, 6, 0, tzinfo=UTC), 20, seed=21))
    expected = expected_counts(sims)
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 4)

    with ClickHouseStandin(tmp_path / "server") as server:
        workers = [
            WorkerProcess(broker.bootstrap, server.url, topic_prefix, tmp_path / f"worker{i}.log") for i in (1, 2)
        ]
        for w in workers:
            w.start()
        try:
            # Both members must hold partitions before traffic starts, or one would do all the work.
            workers[0].wait_for(lambda: all(assigned(w) for w in workers), 120, "both workers assigned")
            send_all(broker.bootstrap, topic, sims)
            total = (expected.valid_events, expected.bad_total)
            workers[0].wait_for(lambda: totals(workers[0]) == total, 240, f"{total} stored")
            rates = workers[1].get("/api/rates", window="all")  # either worker reads the shared store
            assert {r["route"]: r["verdicts"] for r in rates} == expected.verdicts
            written = [metric(w, "claimwatch_fleet_events_total") for w in workers]
            assert all(n > 0 for n in written), f"one worker did all the work: {written}"
            assert sum(written) >= expected.valid_events
        finally:
            for w in workers:
                w.stop()


def assigned(worker: WorkerProcess) -> bool:
    text = worker.get_text("/metrics")
    return "claimwatch_consumer_lag{" in text


def totals(worker: WorkerProcess) -> tuple[int, int]:
    rates = worker.get("/api/rates", window="all") or []
    dlq = worker.get("/api/dlq") or []
    return sum(r["events"] for r in rates), sum(d["count"] for d in dlq)


def metric(worker: WorkerProcess, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        s.value
        for fam in text_string_to_metric_families(worker.get_text("/metrics"))
        for s in fam.samples
        if s.name == name
    )
