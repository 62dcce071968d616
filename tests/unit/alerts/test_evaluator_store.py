"""The alert evaluator over the real chDB engine and the live writer: a restart resumes from its checkpoint
without a second alert, and the watermark waits for a route whose backlog is still being consumed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.alerts.evaluation.evaluator import MOVING_GRACE
from services.alerts.lifecycle.records import alert_repository
from services.app.compose import evaluator_for
from services.app.settings import load_settings
from services.contract.decode import Decoder
from services.store.dlq import DeadLetterRepository
from services.store.rates import RateRepository
from services.store.writer import EventWriter
from tests.support.regression_world import START, billing_regression, prompt_settings

BASE = {
    "schema": "claimwatch.verdict/v1",
    "trace_id": "t",
    "observed_at": "2026-11-21T09:14:03.512+01:00",
    "route": "billing-faq",
    "answer": {"action": "served"},
    "versions": {"model": "m1", "corpus": "c1"},
    "query": {"query_type": "lookup", "stakes": "high", "answerable": True},
    "claims": [{"verdict": "contradicted", "text": "x"}, {"verdict": "supported"}, {"verdict": "trivial"}],
}


@pytest.mark.slow
def test_alert_evaluator_resumes_from_its_checkpoint_without_duplicates(store):
    """A restarted evaluator continues the same detectors: no second alert for the same episode."""
    start = START
    sims = billing_regression()
    writer = EventWriter(store)
    settings = prompt_settings()
    cut = start + timedelta(minutes=215)  # after onset, before the end: "kill" the evaluator here
    writer.write([e for e in sims if e.observed_at < cut])
    first = evaluator_for(settings, RateRepository(store), DeadLetterRepository(store), alert_repository(store))
    first.evaluate(cut + timedelta(minutes=5))
    assert first.open, "the regression should have opened an alert before the cut"
    writer.write([e for e in sims if e.observed_at >= cut])
    resumed = evaluator_for(
        settings, RateRepository(store), DeadLetterRepository(store), alert_repository(store)
    )  # a fresh process
    resumed.evaluate(start + timedelta(days=1))
    alerts = alert_repository(store).list("billing-faq")
    assert len(alerts) == 1 and alerts[0].alert_id == next(iter(first.open.values())).alert_id
    assert alerts[0].recorded_state == "firing"


def test_evaluator_waits_for_a_route_whose_backlog_is_still_being_consumed(store):
    """A partition far behind (a backlog) holds the watermark while its minutes advance; once it
    stops advancing it is silent and lets go, so one dead route cannot stall alerting."""
    t0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)

    def land(route, minutes):
        EventWriter(store).write(
            [
                Decoder().decode(
                    orjson.dumps(
                        {
                            **BASE,
                            "event_id": f"{route}-{m}",
                            "route": route,
                            "observed_at": (t0 + timedelta(minutes=m)).isoformat(),
                        }
                    )
                )
                for m in minutes
            ]
        )

    land("ahead", range(120))
    land("behind", range(10))
    settings = load_settings(None, {"CLAIMWATCH_DRIFT__WATERMARK_SECONDS": "0"}, {})
    evaluator = evaluator_for(
        settings, RateRepository(store), DeadLetterRepository(store), alert_repository(store), checkpoint=False
    )
    now = t0 + timedelta(minutes=121)
    assert evaluator.slowest_active_minute(now) == t0 + timedelta(minutes=9)  # first sight: every route counts
    land("behind", range(10, 40))
    now += timedelta(seconds=30)
    assert evaluator.slowest_active_minute(now) == t0 + timedelta(minutes=39)  # still moving: still held
    now += MOVING_GRACE + timedelta(seconds=1)
    land("ahead", range(120, 123))
    assert evaluator.slowest_active_minute(now) == t0 + timedelta(minutes=122)  # stopped, 80 min behind: let go
    # then every route stops, the data having been live (near the wall clock): time still passes, so silence
    # is evaluated, MOVING_GRACE behind the clock
    now += MOVING_GRACE + timedelta(seconds=1)
    assert evaluator.slowest_active_minute(now) == now.replace(second=0) - MOVING_GRACE


@pytest.mark.slow
def test_a_backlog_is_evaluated_in_passes_that_open_the_same_alert_as_one_pass(store, monkeypatch):
    """A worker draining a backlog evaluates hours of minutes in one tick. It reads them PASS_MINUTES at a time
    (reading them whole held +400 MiB draining 1 GiB of envelopes), with the same outcome as one pass."""
    from services.alerts.evaluation import evaluator as evaluation

    EventWriter(store).write(billing_regression())  # 260 minutes, the regression from minute 200
    spans = []

    class Recording(RateRepository):
        def minutes_all_routes(self, start, end, dim=""):
            spans.append(end - start)
            return super().minutes_all_routes(start, end, dim)

    def evaluated(pass_minutes: int):
        monkeypatch.setattr(evaluation, "PASS_MINUTES", pass_minutes)
        spans.clear()
        evaluator = evaluator_for(
            prompt_settings(), Recording(store), DeadLetterRepository(store), alert_repository(store), checkpoint=False
        )
        transitions = evaluator.evaluate(START + timedelta(minutes=261))
        return [(a.route, a.kind, a.recorded_state, a.pending_since, a.starts_at, a.rate) for a in transitions], max(
            spans
        )

    in_passes, widest = evaluated(60)
    assert widest <= timedelta(minutes=59)
    assert [t[:3] for t in in_passes] == [
        ("billing-faq", "hallucination_rate_rise", "pending"),
        ("billing-faq", "hallucination_rate_rise", "firing"),
    ]
    store.command("TRUNCATE TABLE alerts")  # the second evaluator starts as the first did
    whole, widest = evaluated(10_000)
    assert widest >= timedelta(minutes=250) and whole == in_passes


@pytest.mark.slow
def test_an_ack_outlives_the_evaluations_after_it_and_the_tables_merges(store):
    """On-call acks a page; the evaluator then saves its own copy of the open alert every minute. That copy
    never knew of the ack, and as the newest version it hid it within a minute (seen in the demo)."""
    from services.alerts.oncall.service import AlertsService

    sims = billing_regression()
    writer = EventWriter(store)
    cut = START + timedelta(minutes=215)
    writer.write([e for e in sims if e.observed_at < cut])
    evaluator = evaluator_for(
        prompt_settings(), RateRepository(store), DeadLetterRepository(store), alert_repository(store)
    )
    evaluator.evaluate(cut + timedelta(minutes=5))
    [alert] = evaluator.open.values()
    service = AlertsService(alert_repository(store))
    service.ack(alert.alert_id, "oncall", "rolling back gen-2026-11", cut + timedelta(minutes=6))

    writer.write([e for e in sims if e.observed_at >= cut])
    evaluator.evaluate(START + timedelta(days=1))  # later minutes: the open alert is saved again, unacked
    store.command("OPTIMIZE TABLE alerts FINAL")  # a merge keeps only the newest version of each alert
    store.command("OPTIMIZE TABLE alert_acks FINAL")
    for view in (
        service.show(alert.alert_id, START + timedelta(days=1)),
        *[v for v in service.list(START + timedelta(days=1)) if v.alert.alert_id == alert.alert_id],
    ):
        assert view.acked and (view.alert.acked_by, view.alert.ack_note) == ("oncall", "rolling back gen-2026-11")
        assert view.alert.acked_at == cut + timedelta(minutes=6)
    assert alert_repository(store).get(alert.alert_id).recorded_state == "firing"

    service.ack(alert.alert_id, "lead", "rollback done", cut + timedelta(minutes=30))  # a re-ack: the newest wins
    assert service.show(alert.alert_id, START + timedelta(days=1)).alert.ack_note == "rollback done"
