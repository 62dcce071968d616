"""Input health (issue 21): a route gone silent, a route whose events are refused, a route abstaining more
while serving less. Exact minutes on constructed traffic, the nightly dip, and a restart mid-learning."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.alerts.detection.input_health import InputHealthConfig, InputHealthDetector
from services.alerts.evaluation.route_state import decode_state, encode_state
from services.alerts.lifecycle.kinds import ABSTENTION_KIND, INPUT_KINDS, REJECTED_KIND, SILENT_KIND
from services.rates.intervals import Counts

T0 = datetime(2026, 11, 21, tzinfo=UTC)


def answers(n: int, abstained_share: float = 0.05, failed_share: float = 0.08) -> Counts:
    abstained = round(n * abstained_share)
    claims = 4 * (n - abstained)
    return Counts(
        events=n, abstained=abstained, served=n - abstained, claims=claims, failed=round(claims * failed_share)
    )


def replay(detector: InputHealthDetector, minutes, start: int = 0) -> list[dict[str, str]]:
    """Feed (Counts, rejected) per minute; the state of each kind after each minute."""
    states = []
    for i, (counts, rejected) in enumerate(minutes, start):
        detector.update(counts, rejected, T0 + timedelta(minutes=i))
        states.append({kind: detector.state(kind) for kind in INPUT_KINDS})
    return states


def first(states, kind: str, wanted: str = "firing") -> int | None:
    return next((i for i, s in enumerate(states) if s[kind] == wanted), None)


STEADY = [(answers(60), 0)] * 180  # three hours at 60 answers a minute: the expected volume is 60 a minute


def test_a_route_that_stops_sending_fires_at_the_exact_minute_and_resolves_when_it_is_back():
    d = InputHealthDetector()
    states = replay(d, STEADY + [(Counts.zero(), 0)] * 30 + [(answers(60), 0)] * 10)
    # the 5-minute window expects 300 events, less the silent minutes already learned (4 of the last 120: 290);
    # at minute 184 it holds none (<= 20%): pending, then firing two minutes later
    assert first(states, SILENT_KIND, "pending") == 184
    assert first(states, SILENT_KIND) == 186
    assert all(s[SILENT_KIND] == "firing" for s in states[186:212])
    # back: three minutes of traffic (180 >= 50% of 290) resolve it
    assert states[211][SILENT_KIND] == "firing" and states[212][SILENT_KIND] == "ok"
    assert {s[REJECTED_KIND] for s in states} == {s[ABSTENTION_KIND] for s in states} == {"ok"}


def test_a_silent_route_reads_received_against_expected_events_a_minute():
    d = InputHealthDetector()
    replay(d, STEADY + [(Counts.zero(), 0)] * 10)
    view = d.view(SILENT_KIND)
    assert (view.state, view.unit, view.window_minutes, view.rate, view.expected) == (
        "firing",
        "per_minute",
        5,
        0.0,
        58.0,
    )
    assert view.delta == -58.0 and view.details == {"received": 0, "expected_events": 290.0}
    assert view.onset == T0 + timedelta(minutes=184)
    assert view.expected_basis.startswith("learning: 3 h of history")


def test_a_route_whose_every_event_is_refused_pages_rejection_not_silence():
    d = InputHealthDetector()
    states = replay(d, STEADY + [(Counts.zero(), 60)] * 20)
    # share in the window: 1/5 refused at minute 180 (20% = the usual 0% + 20 points), 2/5 at 181 ...
    assert first(states, REJECTED_KIND, "pending") == 180
    assert first(states, REJECTED_KIND) == 182
    assert (
        first(states, SILENT_KIND, "pending") is None
    )  # refused events are still events: the input is broken, not gone
    view = d.view(REJECTED_KIND)
    assert (view.rate, view.expected, view.details) == (1.0, 0.0, {"rejected": 300, "received": 300})


def test_abstaining_more_while_serving_less_warns_and_says_when_the_hallucination_rate_fell():
    d = InputHealthDetector()
    states = replay(d, STEADY + [(answers(60, abstained_share=0.5, failed_share=0.04), 0)] * 30)
    fired = first(states, ABSTENTION_KIND)
    assert fired is not None and 180 < fired <= 190
    view = d.view(ABSTENTION_KIND)
    assert view.rate > view.expected + 0.10
    assert view.details["hallucination_fell"] is True
    assert view.details["served_share"] < view.details["served_share_before"]
    # abstaining more while the hallucination rate holds still warns, but does not claim gaming
    d = InputHealthDetector()
    replay(d, STEADY + [(answers(60, abstained_share=0.5, failed_share=0.08), 0)] * 30)
    assert d.state(ABSTENTION_KIND) == "firing" and d.view(ABSTENTION_KIND).details["hallucination_fell"] is False


@pytest.mark.slow
def test_the_nightly_dip_over_three_days_fires_nothing():
    rng = np.random.default_rng(4)
    minutes = np.arange(3 * 1440)
    volume = 60 * (1 + 0.5 * np.sin(2 * np.pi * minutes / 1440))  # a night at a third of the peak
    d = InputHealthDetector()
    states = replay(
        d, [(answers(int(n)), int(r)) for n, r in zip(rng.poisson(volume), rng.binomial(rng.poisson(volume), 0.01))]
    )
    assert all(s[kind] == "ok" for s in states for kind in (SILENT_KIND, REJECTED_KIND))
    assert d.engine.seasonal and d.view(SILENT_KIND).expected_basis.startswith("time of day")


def test_a_route_too_quiet_to_judge_is_never_called_silent():
    d = InputHealthDetector()  # one answer every ten minutes: four hours expect 24 events, under min_expected
    states = replay(d, [(answers(1 if i % 10 == 0 else 0), 0) for i in range(600)] + [(Counts.zero(), 0)] * 300)
    assert first(states, SILENT_KIND, "pending") is None


def test_a_restart_mid_learning_resumes_exactly():
    stream = STEADY + [(Counts.zero(), 0)] * 20 + [(answers(60), 0)] * 20
    whole = InputHealthDetector()
    expected = replay(whole, stream)
    part = InputHealthDetector()
    replay(part, stream[:184])
    resumed = (
        InputHealthDetector()
    )  # with what the evaluator stores of the route (services/alerts/evaluation/route_state.py)
    resumed.engine.load_rows([0], [decode_state(encode_state(part.engine.row_state(0)))], part.engine.minute)
    assert replay(resumed, stream[184:], 184) == expected[184:]


def test_configuration_is_checked_and_typed():
    assert InputHealthConfig.from_mapping({"silent_ratio": "0.1", "for_minutes": "3"}).for_minutes == 3
    with pytest.raises(ValueError, match="unknown input health setting"):
        InputHealthConfig.from_mapping({"silence": 1})
    with pytest.raises(ValueError, match="abstention_severity='page'"):
        InputHealthConfig(abstention_severity="page")
    with pytest.raises(ValueError, match="silent_ratio < resume_ratio"):
        InputHealthConfig(silent_ratio=0.6)


@pytest.mark.parametrize(
    "kind, broken",
    [
        (SILENT_KIND, (Counts.zero(), 0)),
        (REJECTED_KIND, (Counts.zero(), 60)),
        (ABSTENTION_KIND, (answers(60, abstained_share=0.5), 0)),
    ],
)
def test_each_kind_fires_is_silenced_by_its_matchers_and_resolves(kind, broken):
    from services.alerts.lifecycle.silences import Silence
    from services.alerts.lifecycle.status import Notify, should_notify, status
    from services.alerts.lifecycle.transitions import next_alert

    d, alert, seen = InputHealthDetector(), None, []
    stream = STEADY + [broken] * 40 + [(answers(60), 0)] * 40
    for i, (counts, rejected) in enumerate(stream):
        now = T0 + timedelta(minutes=i)
        d.update(counts, rejected, now)
        alert = next_alert(alert, "retired-route", d.view(kind), now, kind=kind, severity="critical")
        if alert is not None:
            seen.append(alert.recorded_state)
    assert seen[0] == "pending" and "firing" in seen and seen[-1] == "resolved"
    firing = T0 + timedelta(minutes=200)
    retired = Silence.create(
        ["route=retired-route", f"kind={kind}"],
        firing - timedelta(hours=1),
        duration="90d",
        created_by="oncall",
        comment="route retired",
    )
    other = Silence.create(
        ["route=retired-route", "kind=hallucination_rate_rise"],
        firing - timedelta(hours=1),
        duration="90d",
        created_by="oncall",
        comment="not this kind",
    )
    open_alert = replace(alert, ends_at=None)  # the alert as it was while it fired
    assert status(open_alert, [retired], firing).silenced_by == (retired.silence_id,)
    assert status(open_alert, [other], firing).silenced_by == ()
    assert should_notify(None, open_alert, firing, timedelta(minutes=5), [retired]) is Notify.NOTHING
    assert should_notify(None, open_alert, firing, timedelta(minutes=5), [other]) is Notify.NEW_FIRING
