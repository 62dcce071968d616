"""An evaluation pass's step with no store at all (services/alerts/evaluation/step.py): a function of the detectors,
the open alerts and the pass's inputs. It gives the transitions with their deterministic ids, asks for what only the
store knows (a changed drift alert's suspects, a dead-letter alert's top rule) where the alert needs it, and each
answer holds for its alert from the minute it was asked for."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.health_engine import InputHealthConfig
from services.alerts.detection.input_health import health_input
from services.alerts.detection.route_detectors import RouteDetectors, RouteMinute
from services.alerts.evaluation.enrich import Enrichment
from services.alerts.evaluation.step import AlertStep, Stepped, SuspectsAsk, TopRuleAsk
from services.alerts.lifecycle.alert import make_alert_id
from services.alerts.lifecycle.kinds import DRIFT_KIND, REJECTED_KIND
from services.rates.intervals import Counts

T0 = datetime(2026, 11, 21, tzinfo=UTC)
MIN = timedelta(minutes=1)
ROUTE = "billing-faq"
CONFIG = DetectorConfig(min_baseline_claims=2_000)  # warm within the first hour of history
HEALTH = InputHealthConfig()


def answers(n: int = 60, failed_share: float = 0.08) -> Counts:
    abstained = round(n * 0.05)
    claims = 4 * (n - abstained)
    return Counts(
        events=n, abstained=abstained, served=n - abstained, claims=claims, failed=round(claims * failed_share)
    )


STEADY = [(answers(), 0)] * 180  # three hours at 60 answers a minute, 8% of claims failing
RISE = [(answers(failed_share=0.2), 0)] * 30  # then 20% for half an hour …
BACK = [(answers(), 0)] * 90  # … and back
REFUSED = [(Counts.zero(), 60)] * 20  # every event dead-lettered


def inputs_of(minutes: list[tuple[Counts, int]]) -> dict[datetime, dict[str, RouteMinute]]:
    """A pass's inputs as services/alerts/evaluation/inputs.py reads them: minute -> route -> what it was fed."""
    return {T0 + i * MIN: {ROUTE: RouteMinute(c.as_array(), health_input(c, r))} for i, (c, r) in enumerate(minutes)}


def step(minutes: list[tuple[Counts, int]], parts: tuple[int, ...] = ()) -> Stepped:
    """Every minute stepped from fresh detectors, in passes that end before each of ``parts`` (minute numbers)."""
    inputs = inputs_of(minutes)
    detectors, stepper = RouteDetectors(lambda route: CONFIG, HEALTH), AlertStep(lambda route: CONFIG, HEALTH)
    end, out = T0 + (len(minutes) - 1) * MIN, Stepped()
    bounds = [0, *parts, len(minutes)]
    for first, stop in zip(bounds, bounds[1:]):
        part = stepper.run(detectors, out.open, inputs, T0 + first * MIN, T0 + (stop - 1) * MIN, end)
        out = Stepped(out.transitions + part.transitions, part.open, out.routes | part.routes, out.asks + part.asks)
    return out


def at(minute: datetime) -> int:
    return (minute - T0) // MIN


def test_a_drift_episode_steps_without_a_store_and_asks_for_its_suspects_where_it_changes_state():
    out = step(STEADY + RISE + BACK)
    assert [(a.kind, a.recorded_state, at(a.transition_at)) for a in out.transitions] == [
        (DRIFT_KIND, "pending", 180),
        (DRIFT_KIND, "firing", 181),
        (DRIFT_KIND, "resolved", 216),
    ]
    assert {a.alert_id for a in out.transitions} == {make_alert_id(ROUTE, DRIFT_KIND, T0 + 180 * MIN)}
    assert all(a.suspect_changes == () for a in out.transitions)  # what the store knows is asked for, not read
    assert out.asks == [SuspectsAsk(ROUTE, DRIFT_KIND, T0 + m * MIN, T0 + 180 * MIN) for m in (180, 181)]
    assert out.open == {} and out.routes == {ROUTE}
    # the same minutes in passes (a backlog is evaluated PASS_MINUTES at a time) step the same
    assert step(STEADY + RISE + BACK, parts=(60, 181, 200)) == out


def test_a_dead_letter_alert_asks_for_its_top_rule_only_where_its_figures_are_fresh():
    out = step(STEADY + REFUSED)
    assert [(a.kind, a.recorded_state, at(a.transition_at)) for a in out.transitions] == [
        (REJECTED_KIND, "pending", 180),
        (REJECTED_KIND, "firing", 182),
    ]
    # opened, fired, and the last minute (whose figures every open alert saves); in between it costs no read
    assert [(type(a), at(a.minute)) for a in out.asks] == [(TopRuleAsk, 180), (TopRuleAsk, 182), (TopRuleAsk, 199)]
    last = out.asks[-1]
    assert isinstance(last, TopRuleAsk) and last.counted == out.open[ROUTE, REJECTED_KIND].details["rejected"]
    assert at(last.start) == 199 - out.open[ROUTE, REJECTED_KIND].window + 1  # the alert's own window


def test_an_open_alert_carries_its_top_rule_through_the_minutes_that_ask_nothing():
    minutes = STEADY + REFUSED
    first = step(minutes[:190])
    key = (ROUTE, REJECTED_KIND)
    named = {key: replace(first.open[key], details={**first.open[key].details, "top_rule": "schema.version"})}
    inputs = inputs_of(minutes)
    detectors = RouteDetectors(lambda route: CONFIG, HEALTH)
    stepper = AlertStep(lambda route: CONFIG, HEALTH)
    stepper.run(detectors, {}, inputs, T0, T0 + 189 * MIN, T0 + 199 * MIN)
    later = stepper.run(detectors, named, inputs, T0 + 190 * MIN, T0 + 195 * MIN, T0 + 199 * MIN)
    assert later.asks == [] and later.transitions == []
    assert later.open[key].details["top_rule"] == "schema.version" and at(later.open[key].updated_at) == 195


class Answers(Enrichment):
    """Each ask answered with the minute it was asked at, instead of a read."""

    def __init__(self) -> None:
        super().__init__(rates=None, dead_letters=None)

    def suspects(self, ask: SuspectsAsk) -> tuple[dict, ...]:
        return ({"value": f"asked at {at(ask.minute)}"},)

    def top_rule(self, ask: TopRuleAsk) -> dict:
        return {"top_rule": f"asked at {at(ask.minute)}", "top_rule_count": ask.counted}


def test_each_answer_holds_for_its_alert_from_the_minute_it_was_asked_for():
    drift = Answers().enrich(step(STEADY + RISE + BACK))
    assert [a.suspect_changes for a in drift.transitions] == [
        ({"value": "asked at 180"},),
        ({"value": "asked at 181"},),
        ({"value": "asked at 181"},),  # resolved: what it fired with
    ]
    refused = Answers().enrich(step(STEADY + REFUSED))
    assert [a.details["top_rule"] for a in refused.transitions] == ["asked at 180", "asked at 182"]
    [still_open] = refused.open.values()
    assert still_open.details["top_rule"] == "asked at 199" and list(still_open.details)[:2] == ["rejected", "received"]
    assert refused.asks == []  # answered
