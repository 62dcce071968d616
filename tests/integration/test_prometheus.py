"""A real Prometheus (Debian package) scrapes a worker's /metrics; its query API returns the
per-route rates and intervals claimwatch computed, and the ingest counters. It loads the shipped rules about
claimwatch itself (dashboards/prometheus/rules.yml) and evaluates every one without error against what a real
worker exports: none is active while the worker is healthy, and the worker's going away is."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from bench.processes import WorkerProcess
from services.app.broker import create_topics
from services.client.produce import raw_producer
from services.client.simulate import Scenario, generate
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from tests.support.paths import ROOT
from tests.support.peers import Prometheus
from tests.support.waiting import wait_until

RULES = ROOT / "dashboards/prometheus/rules.yml"
DASHBOARD = ROOT / "dashboards/grafana/claimwatch.json"
WORKER_JOB = "claimwatch-worker"  # as dashboards/prometheus/prometheus.yml names it, and the rules read it


@pytest.mark.timeout(240)
def test_prometheus_scrapes_the_per_route_rates_claimwatch_computed_and_evaluates_the_rules_about_it(
    broker, topic_prefix, tmp_path
):
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=45)
    scenario = Scenario.demo(regression_at=20, corpus_change_at=None, bad_fraction=0.02, duplicate_fraction=0.0).scaled(
        0.1
    )
    sims = list(generate(scenario, start, 45, seed=21))
    decoder = Decoder()
    valid = {e.event_id for e in (decoder.decode(s.raw) for s in sims) if isinstance(e, VerdictEvent)}
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2)

    slo = '[{"name": "billing", "routes": "billing-*", "objective": 0.9, "window": "28d"}]'
    with WorkerProcess(
        broker.bootstrap, f"chdb:{tmp_path / 'ch'}", topic_prefix, tmp_path / "worker.log", env={"CLAIMWATCH_SLO": slo}
    ) as worker:
        producer = raw_producer(broker.bootstrap)
        for sim in sims:
            producer.send(topic, key=sim.key, value=sim.raw)
        producer.flush()
        producer.close()
        worker.wait_for(
            lambda: sum(r["events"] for r in worker.get("/api/rates", window="all") or []) == len(valid),
            90,
            f"{len(valid)} events stored",
        )
        ours = {r["route"]: r for r in worker.get("/api/rates", window="30m")}
        assert len(ours) == len(scenario.routes)

        with Prometheus(
            tmp_path / "prometheus", [f"127.0.0.1:{worker.port}"], job=WORKER_JOB, rule_files=[RULES]
        ) as prometheus:

            def scraped():
                series = prometheus.query('claimwatch_route_hallucination_rate{window="30m"}')
                return series if len(series) == len(ours) else None

            series = worker.wait_for(scraped, 60, "Prometheus to scrape every route's rate")
            assert all(s["metric"]["job"] == WORKER_JOB for s in series)
            for s in series:
                route = s["metric"]["route"]
                assert float(s["value"][1]) == pytest.approx(ours[route]["rate"], rel=1e-12)
            for bound, i in (("lower", 0), ("upper", 1)):
                got = {
                    s["metric"]["route"]: float(s["value"][1])
                    for s in prometheus.query(f'claimwatch_route_hallucination_rate_{bound}{{window="30m"}}')
                }
                assert got == pytest.approx({r: e["interval"][i] for r, e in ours.items()}, rel=1e-12)
            worst = prometheus.query('topk(1, claimwatch_route_hallucination_rate{window="30m"})')
            assert worst[0]["metric"]["route"] == next(iter(ours))  # /api/rates is worst first
            # Per-route counters count from the scrape that gave a route its series; the fleet's count everything.
            events = prometheus.query("claimwatch_fleet_events_total")
            assert float(events[0]["value"][1]) == len(valid)
            # The shipped dashboard's SLO panels, their PromQL as Grafana sends it: the figures `slo list` gives.
            [billing] = worker.get("/api/slos")
            panels = [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["datasource"]["type"] == "prometheus"]
            exprs = {p["title"]: p["targets"][0]["expr"] for p in panels}
            [left] = prometheus.query(exprs["SLO error budget left"])
            assert left["metric"]["slo"] == "billing"
            assert float(left["value"][1]) == pytest.approx(billing["budget_remaining"], rel=1e-9)

            def burns(expr: str) -> dict[str, float]:
                return {s["metric"]["window"]: float(s["value"][1]) for s in prometheus.query(expr)}

            known = {b["window"]: b["rate"] for b in billing["burns"] if b["rate"] is not None}
            assert burns("claimwatch_slo_burn_rate") == pytest.approx(known, rel=1e-9) and "5m" in known
            # 45 minutes of traffic: the panel's 1h, 6h and 3d windows have too little history for a number yet.
            panel = {w: r for w, r in known.items() if w in ("1h", "6h", "3d")}
            assert burns(exprs["SLO burn rate by window"]) == panel == {}

            # The rules about claimwatch itself: each loaded and evaluated without error on a worker's metrics.
            names = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
            rules = worker.wait_for(
                lambda: (rs := prometheus.rules()) and all(r["health"] != "unknown" for r in rs) and rs,
                60,
                "Prometheus to evaluate every rule",
            )
            assert {r["name"] for r in rules} == names
            assert [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []
            assert [float(s["value"][1]) for s in prometheus.query("claimwatch_broker_up")] == [1]
            assert len(prometheus.query("claimwatch_evaluator_lag_seconds")) == 1
            # Healthy, nothing is active (the evaluator-stalled rule waits for the leader's next completed pass).
            worker.wait_for(lambda: prometheus.alerts() == [], 90, "no alert about a healthy worker")

            worker.stop()
            (alert,) = wait_until(
                lambda: [a for a in prometheus.alerts() if a["labels"]["alertname"] == "ClaimwatchWorkerDown"],
                60,
                "Prometheus to notice the worker is gone",
            )
            assert alert["state"] == "pending"  # for 2 minutes before it pages
            assert alert["labels"] | {"instance": None} == {
                "alertname": "ClaimwatchWorkerDown",
                "job": WORKER_JOB,
                "instance": None,
                "severity": "critical",
                "component": "claimwatch",
            }
