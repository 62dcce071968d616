"""The monitor watches its own input, end to end (issue 21): a route whose verifier stops and a route whose
producer ships a contract version nobody reads each page in a real Alertmanager, with their own alertname and
figures; a retired route, silenced on purpose, stays quiet; both pages resolve when the input is back.
Broker, worker process, chDB and Alertmanager are all real."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import orjson

from bench.processes import send_all
from services.client.simulate import Scenario, generate
from tests.support.alerting import silence, worker_with_alertmanager

CONFIG = """
[drift]
eval_interval_seconds = 1.0
watermark_seconds = 0
[notify]
resend_seconds = 2.0
"""
CALM, BROKEN, BACK = 120, 30, 20  # minutes
SILENT, REJECTED, RETIRED, STEADY = "hr-policy", "parcel-status", "product-search", "billing-faq"


def scenario() -> Scenario:
    demo = Scenario.demo()
    routes = tuple(
        type(r)(**{**r.__dict__, "per_minute": 30})
        for r in demo.routes
        if r.name in (SILENT, REJECTED, RETIRED, STEADY)
    )
    return Scenario(routes=routes, regressions=(), bad_fraction=0.0, duplicate_fraction=0.0, diurnal_amplitude=0.0)


class Broken:
    """What the outage does to each message: a stopped verifier sends nothing, a broken producer an unread version."""

    def __init__(self, sims):
        self.sims = sims

    def __iter__(self):
        for sim in self.sims:
            route = sim.key.decode()
            if route in (SILENT, RETIRED):
                continue
            if route == REJECTED:
                sim = replace(sim, raw=orjson.dumps({**sim.event, "schema": "claimwatch.verdict/v2"}))
            yield sim


def test_silent_and_rejected_routes_page_in_alertmanager_and_a_retired_route_is_silenced(
    broker, topic_prefix, tmp_path
):
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(minutes=CALM + BROKEN + BACK)  # event times stay in the past, as live ingest requires
    calm = list(generate(scenario(), start, CALM, seed=5))
    broken = list(Broken(generate(scenario(), start + timedelta(minutes=CALM), BROKEN, seed=6)))

    topic = f"{topic_prefix}.verdicts"
    with worker_with_alertmanager(broker.bootstrap, topic_prefix, tmp_path, CONFIG) as (am, worker, token):
        silenced = silence(worker, token, [f"route={RETIRED}", "kind=route_silent"], "retired on purpose")

        send_all(broker.bootstrap, topic, calm + broken)

        def paged():
            return {
                (a["labels"]["route"], a["labels"]["kind"]): a
                for a in am.alerts()
                if a["labels"]["kind"] in ("route_silent", "events_rejected")
            }

        wanted = {(SILENT, "route_silent"), (REJECTED, "events_rejected")}
        pages = worker.wait_for(
            lambda: (lambda p: p if wanted <= set(p) else None)(paged()),
            300,
            "route_silent and events_rejected in Alertmanager",
        )
        silent, rejected = pages[SILENT, "route_silent"], pages[REJECTED, "events_rejected"]
        assert not {route for route, _ in pages} & {STEADY, RETIRED}, set(pages)
        assert (silent["labels"]["alertname"], silent["labels"]["kind"], silent["labels"]["severity"]) == (
            "ClaimRouteSilent",
            "route_silent",
            "critical",
        )
        assert "/min" in silent["annotations"]["summary"]
        assert (rejected["labels"]["alertname"], rejected["labels"]["severity"]) == ("ClaimEventsRejected", "critical")
        assert f"claimwatch dlq --route {REJECTED}" in rejected["annotations"]["description"]

        # claimwatch has the retired route's page too, silenced: Alertmanager never saw it
        retired = worker.wait_for(
            lambda: [
                a
                for a in worker.get("/api/alerts", route=RETIRED) or []
                if a["kind"] == "route_silent" and a["state"] == "firing"
            ],
            60,
            "the retired route's route_silent alert",
        )[0]
        assert retired["silenced_by"] == [silenced["silence_id"]]
        assert RETIRED not in {a["labels"]["route"] for a in am.alerts()}
        ours = {a["kind"]: a for a in worker.get("/api/alerts", route=REJECTED)}
        assert ours["events_rejected"]["details"]["top_rule"]
        assert ours["events_rejected"]["unit"] == "share" and ours["events_rejected"]["rate"] > 0.2

        # the input comes back: both pages resolve, and Alertmanager drops them
        send_all(broker.bootstrap, topic, generate(scenario(), start + timedelta(minutes=CALM + BROKEN), BACK, seed=7))
        worker.wait_for(lambda: not paged(), 240, "both pages resolved in Alertmanager")
        for route, kind in ((SILENT, "route_silent"), (REJECTED, "events_rejected")):
            states = [a["state"] for a in worker.get("/api/alerts", route=route) if a["kind"] == kind]
            assert states == ["resolved"], (route, states)
