"""Drift alerts end to end: a simulated regression fires in a real Alertmanager, then resolves;
a silenced route stays quiet. Broker, worker process, chDB and Alertmanager are all real."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.processes import send_all
from services.client.simulate import Regression, Scenario, generate
from tests.support.alerting import silence, worker_with_alertmanager

CONFIG = """
[drift]
eval_interval_seconds = 1.0
watermark_seconds = 0
[drift.detector]
min_baseline_claims = 8000
[notify]
resend_seconds = 2.0
[[owners]]
route = "billing-*"
model = "gen-2026-*"
team = "model-eval"
owner = "priya"
"""


def scenario(regressed: bool) -> Scenario:
    demo = Scenario.demo()
    billing, hr = demo.routes[0], demo.routes[2]
    hr = type(hr)(**{**hr.__dict__, "per_minute": 60})
    regressions = (
        (
            Regression("billing-faq", 0, {"model": "gen-2026-11"}, 0.07),
            Regression("hr-policy", 0, {"prompt": "hr-v4"}, 0.07),
        )
        if regressed
        else ()
    )
    # Flat volume: the baseline holds only finished wall-clock hours, and a night-time trough could leave
    # it short of min_baseline_claims when the regression starts.
    return Scenario(
        routes=(billing, hr), regressions=regressions, bad_fraction=0.0, duplicate_fraction=0.0, diurnal_amplitude=0.0
    )


def test_regression_fires_in_alertmanager_then_resolves_and_silence_holds(broker, topic_prefix, tmp_path):
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(minutes=240)
    calm = list(generate(scenario(False), start, 120, seed=5))
    bad = list(generate(scenario(True), start + timedelta(minutes=120), 45, seed=6))
    recovered = list(generate(scenario(False), start + timedelta(minutes=165), 75, seed=7))

    topic = f"{topic_prefix}.verdicts"
    with worker_with_alertmanager(broker.bootstrap, topic_prefix, tmp_path, CONFIG) as (am, worker, token):
        # Silence hr-policy before anything happens there.
        silenced = silence(worker, token, ["route=hr-policy"], "prompt rollout under review")

        send_all(broker.bootstrap, topic, calm + bad)
        firing = worker.wait_for(
            lambda: [a for a in am.alerts() if a["labels"]["route"] == "billing-faq"],
            240,
            "billing-faq alert in Alertmanager",
        )[0]
        assert firing["labels"]["kind"] == "hallucination_rate_rise"
        assert firing["labels"]["severity"] in ("warning", "critical")
        assert firing["labels"]["alertname"] == "ClaimHallucinationRateRise"
        # the page goes to the team whose [[owners]] rule matches the route and its suspect model
        assert (firing["labels"]["team"], firing["labels"]["owner"]) == ("model-eval", "priya")
        assert "billing-faq" in firing["annotations"]["summary"]
        assert "gen-2026-11" in firing["annotations"]["description"]  # first suspect: the new model
        assert firing["annotations"]["runbook_url"].startswith("http")
        # the alert explains itself: its excess failing claims split by issue, the rest unclustered
        assert "failing claims more than expected" in firing["annotations"]["explanation"]
        assert "unclustered" in firing["annotations"]["explanation"]
        assert firing["generatorURL"].endswith(firing["annotations"]["runbook_url"].rsplit("/", 1)[-1])

        ours = worker.get("/api/alerts", route="billing-faq")
        assert len(ours) == 1 and ours[0]["state"] == "firing"
        assert ours[0]["suspect_changes"][0]["key"] == "model"
        assert ours[0]["suspect_changes"][0]["value"] == "gen-2026-11"
        # The CUSUM's onset is where its statistic last left zero: noise can move it some minutes early.
        onset = datetime.fromisoformat(ours[0]["onset"])
        assert abs(onset - (start + timedelta(minutes=120))) <= timedelta(minutes=20)
        assert onset <= datetime.fromisoformat(ours[0]["starts_at"])

        # hr-policy regressed too: claimwatch has the alert, silenced, and Alertmanager never saw it.
        hr = worker.wait_for(
            lambda: [a for a in worker.get("/api/alerts", route="hr-policy") if a["state"] == "firing"],
            120,
            "hr-policy alert (silenced)",
        )[0]
        assert hr["silenced_by"] == [silenced["silence_id"]]
        assert all(a["labels"]["route"] != "hr-policy" for a in am.alerts())

        # Recovery: the rate falls back, the alert resolves, and Alertmanager drops it.
        send_all(broker.bootstrap, topic, recovered)
        worker.wait_for(
            lambda: not [a for a in am.alerts() if a["labels"]["route"] == "billing-faq"],
            240,
            "billing-faq alert resolved in Alertmanager",
        )
        resolved = worker.get("/api/alerts", route="billing-faq")
        assert [a["state"] for a in resolved] == ["resolved"]
        states = [t["state"] for t in worker.get(f"/api/alerts/{resolved[0]['alert_id']}")["transitions"]]
        assert states == ["pending", "firing", "resolved"]
        assert all(a["labels"]["route"] != "hr-policy" for a in am.alerts())
