"""A real Prometheus (Debian package) scrapes a worker's /metrics; its query API returns the
per-route rates and intervals claimwatch computed, and the ingest counters."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.client.produce import raw_producer
from services.client.simulate import Scenario, generate
from services.app.broker import create_topics
from tests.support.peers import Prometheus
from tests.support.processes import WorkerProcess


@pytest.mark.timeout(180)
def test_prometheus_scrapes_the_per_route_rates_claimwatch_computed(broker, topic_prefix, tmp_path):
    start = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=45)
    scenario = Scenario.demo(regression_at=20, corpus_change_at=None, bad_fraction=0.02,
                             duplicate_fraction=0.0).scaled(0.1)
    sims = list(generate(scenario, start, 45, seed=21))
    decoder = Decoder()
    valid = {e.event_id for e in (decoder.decode(s.raw) for s in sims) if isinstance(e, VerdictEvent)}
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2)

    with WorkerProcess(broker.bootstrap, f"chdb:{tmp_path / 'ch'}", topic_prefix, tmp_path / "worker.log") as worker:
        producer = raw_producer(broker.bootstrap)
        for sim in sims:
            producer.send(topic, key=sim.key, value=sim.raw)
        producer.flush()
        producer.close()
        worker.wait_for(lambda: sum(r["events"] for r in worker.get("/api/rates", window="all") or []) == len(valid),
                        90, f"{len(valid)} events stored")
        ours = {r["route"]: r for r in worker.get("/api/rates", window="30m")}
        assert len(ours) == len(scenario.routes)

        with Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{worker.port}"]) as prometheus:
            def scraped():
                series = prometheus.query('claimwatch_route_hallucination_rate{window="30m"}')
                return series if len(series) == len(ours) else None

            series = worker.wait_for(scraped, 60, "Prometheus to scrape every route's rate")
            assert all(s["metric"]["job"] == "claimwatch" for s in series)
            for s in series:
                route = s["metric"]["route"]
                assert float(s["value"][1]) == pytest.approx(ours[route]["rate"], rel=1e-12)
            for bound, i in (("lower", 0), ("upper", 1)):
                got = {s["metric"]["route"]: float(s["value"][1])
                       for s in prometheus.query(f'claimwatch_route_hallucination_rate_{bound}{{window="30m"}}')}
                assert got == pytest.approx({r: e["interval"][i] for r, e in ours.items()}, rel=1e-12)
            worst = prometheus.query('topk(1, claimwatch_route_hallucination_rate{window="30m"})')
            assert worst[0]["metric"]["route"] == next(iter(ours))  # /api/rates is worst first
            # Per-route counters count from the scrape that gave a route its series; the fleet's count everything.
            events = prometheus.query("claimwatch_fleet_events_total")
            assert float(events[0]["value"][1]) == len(valid)
