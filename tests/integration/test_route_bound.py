"""A producer that puts a request id into the route: 100,000 distinct routes, each sent once. The worker takes the
first ``routes.max_active``, dead-letters the rest under one rule, and its memory stays within the bound."""

from __future__ import annotations

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import WorkerProcess, send_all
from services.app.broker import create_topics
from tests.support.envelopes import Message, envelope

ROUTES, LIMIT, PER_ENVELOPE = 100_000, 1_000, 1_000
GROWTH_MIB = 256


def flood(name: str) -> list[Message]:
    events = (
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": f"{name}-{i}",
                "trace_id": f"req-{i}",
                "observed_at": "2026-11-21T08:00:00Z",
                "route": f"{name}-req-{i:06d}",
                "answer": {"action": "served"},
                "versions": {"model": "gen-9", "verifier": "judge@3"},
                "claims": [{"verdict": "supported"}, {"verdict": "unsupported"}],
            }
        )
        for i in range(ROUTES)
    )
    batch, out = [], []
    for raw in events:
        batch.append(raw)
        if len(batch) == PER_ENVELOPE:
            out.append(Message(f"{name}-{len(out)}".encode(), envelope(batch)))
            batch = []
    return out


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def metric(worker: WorkerProcess, name: str, **labels: str) -> float:
    text = worker.get_text("/metrics")
    return sum(
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_a_hundred_thousand_new_routes_stay_within_the_bound(broker, topic_prefix, tmp_path):
    """After the first flood, a second of as many new routes leaves the worker's memory where the first did: no
    per-route state grows past the bound."""
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic}.dlq", f"{topic_prefix}.alerts"], 2)
    first, second = flood("checkout"), flood("billing")
    env = {
        "CLAIMWATCH_ROUTES__MAX_ACTIVE": str(LIMIT),
        "CLAIMWATCH_CLUSTERING__IN_WORKER": "false",
        "CLAIMWATCH_DRIFT__EVAL_INTERVAL_SECONDS": "2",
    }
    with WorkerProcess(
        broker.bootstrap, f"chdb:{tmp_path / 'ch'}", topic_prefix, tmp_path / "worker.log", env=env
    ) as worker:
        send_all(broker.bootstrap, topic, first[:1])  # the first thousand routes fill the bound
        worker.wait_for(lambda: metric(worker, "claimwatch_active_routes") == LIMIT, 120, "the bound filled")
        warm = rss_mb(worker.proc.pid)
        peak = [warm]

        def refused(n: int):
            def done() -> bool:
                peak.append(rss_mb(worker.proc.pid))
                return metric(worker, "claimwatch_dlq_total", reason="route.limit") == n

            return done

        send_all(broker.bootstrap, topic, first[1:])
        worker.wait_for(refused(ROUTES - LIMIT), 300, f"{ROUTES - LIMIT:,} events dead-lettered as route.limit")
        after_first = rss_mb(worker.proc.pid)
        send_all(broker.bootstrap, topic, second)
        worker.wait_for(refused(2 * ROUTES - LIMIT), 300, "the second flood dead-lettered")
        after_second = rss_mb(worker.proc.pid)

        assert metric(worker, "claimwatch_active_routes") == LIMIT
        assert metric(worker, "claimwatch_active_routes_limit") == LIMIT
        assert metric(worker, "claimwatch_fleet_events_total") == LIMIT
        [dead] = [d for d in worker.get("/api/dlq") if d["reason"] == "route.limit"]
        assert dead["count"] == 2 * ROUTES - LIMIT
        assert "model=gen-9" in str(dead) and "verifier=judge@3" in str(dead)  # who is creating the routes
        # ... and the leader's route_cardinality alert pages with it (the first refusals were minutes ago at most)
        [alert] = worker.wait_for(
            lambda: [a for a in worker.get("/api/alerts") if a["kind"] == "route_cardinality"],
            120,
            "the route_cardinality alert",
        )
        assert alert["state"] == "firing" and alert["route"] == "*" and alert["severity"] == "critical"
        assert alert["details"]["sources"][0]["source"] == "verifier=judge@3, model=gen-9"
        # A watched route's detectors hold about 42 KiB, so 100,000 admitted past the bound would add some 4 GiB;
        # what does grow is chDB's, storing and merging 99,000 more dead letters (up to 144 MiB seen on a loaded
        # machine)
        assert after_second - after_first < GROWTH_MIB, (
            f"{ROUTES:,} more new routes grew the worker by {after_second - after_first:.0f} MiB"
        )
        assert max(peak) - warm < 1024, f"the worker peaked {max(peak) - warm:.0f} MiB above its warm size"
