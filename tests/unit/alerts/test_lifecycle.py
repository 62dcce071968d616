"""Alert lifecycle: state from timestamps, pure merge (dedupe), notification reasons."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.alerts.detection.detector import DriftDetector
from services.alerts.lifecycle.alert import Alert, make_alert_id
from services.alerts.lifecycle.kinds import DRIFT_KIND
from services.alerts.lifecycle.silences import Silence
from services.alerts.lifecycle.status import Notify, ack, alert_state, is_acked, should_notify, silenced_by, status
from services.alerts.lifecycle.transitions import merge, next_alert, observed_alert, resolve, severity_for
from services.rates.intervals import Counts, Interval

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
RESEND = timedelta(minutes=5)


def alert(at=T0, **kw) -> Alert:
    base = dict(
        alert_id=make_alert_id("billing-faq", DRIFT_KIND, at),
        route="billing-faq",
        kind=DRIFT_KIND,
        severity="warning",
        labels={"tenant": "acme"},
        window=12,
        pending_since=at,
        rate=0.11,
        rate_interval=Interval(0.09, 0.13),
        baseline=0.08,
        baseline_interval=Interval(0.079, 0.081),
        delta=0.03,
        claims=3000,
        onset=at - 10 * MIN,
        driving_verdict="contradicted",
        updated_at=at,
    )
    base.update(kw)
    return Alert(**base)


def test_state_follows_the_timestamps():
    a = alert(starts_at=T0 + 5 * MIN, ends_at=T0 + 30 * MIN)
    assert alert_state(a, T0) == "pending"
    assert alert_state(a, T0 + 5 * MIN) == "firing"
    assert alert_state(a, T0 + 29 * MIN) == "firing"
    assert alert_state(a, T0 + 30 * MIN) == "resolved"
    never_fired = alert(ends_at=T0 + 3 * MIN)
    assert [alert_state(never_fired, T0 + k * MIN) for k in (0, 3)] == ["pending", "resolved"]


def test_silences_and_acks_do_not_change_state_but_are_reported():
    a = ack(alert(starts_at=T0), by="ana", now=T0 + MIN, note="looking")
    silence = Silence.create(["route=billing-faq"], T0, duration="1h", created_by="ana", comment="reindex")
    other = Silence.create(["route=parcel-status"], T0, duration="1h", created_by="bo", comment="x")
    assert status(a, [silence], T0 + 2 * MIN).state == "firing"
    assert status(a, [silence, other], T0 + 2 * MIN) == status(a, [silence], T0 + 2 * MIN)
    assert silenced_by(a, [silence, other], T0 + 2 * MIN) == (silence.silence_id,)
    assert silenced_by(a, [silence], T0 + 2 * timedelta(hours=1)) == ()
    assert is_acked(a) and (a.acked_by, a.ack_note) == ("ana", "looking")
    assert not is_acked(alert())


def test_silence_can_match_extra_labels_and_severity():
    a = alert(starts_at=T0)
    by_tenant = Silence.create(["tenant=acme", "severity=warning"], T0, duration="1h", created_by="ana", comment="c")
    assert silenced_by(a, [by_tenant], T0) == (by_tenant.silence_id,)
    assert silenced_by(replace(a, severity="critical"), [by_tenant], T0) == ()


def test_merge_keeps_identity_ack_and_first_start():
    first = ack(alert(starts_at=T0 + MIN), by="ana", now=T0 + 2 * MIN)
    later = alert(at=T0 + 9 * MIN, starts_at=T0 + 9 * MIN, rate=0.12, delta=0.04, claims=5000)
    merged = merge(first, later)
    assert merged.alert_id == first.alert_id and merged.pending_since == T0
    assert merged.starts_at == T0 + MIN
    assert (merged.acked_by, merged.acked_at) == ("ana", T0 + 2 * MIN)
    assert (merged.rate, merged.delta, merged.claims, merged.updated_at) == (0.12, 0.04, 5000, T0 + 9 * MIN)
    assert merge(None, later) == later


def test_one_open_alert_per_route_and_kind_a_closed_one_starts_afresh():
    closed = resolve(alert(starts_at=T0), T0 + 20 * MIN)
    fresh = alert(at=T0 + 60 * MIN)
    assert merge(closed, fresh).alert_id == fresh.alert_id != closed.alert_id
    with pytest.raises(ValueError, match="look up the open alert by route and kind"):
        merge(alert(), alert(route="parcel-status"))


def test_resolve_and_ack_rules():
    open_alert = alert(starts_at=T0)
    closed = resolve(open_alert, T0 + 10 * MIN)
    assert closed.ends_at == T0 + 10 * MIN and resolve(closed, T0 + 20 * MIN) == closed
    with pytest.raises(ValueError, match="nothing to ack"):
        ack(closed, by="ana", now=T0 + 11 * MIN)
    with pytest.raises(ValueError, match="who is acknowledging"):
        ack(open_alert, by=" ", now=T0)


def test_should_notify_reasons():
    pending = alert()
    firing = merge(pending, alert(at=T0 + 3 * MIN, starts_at=T0 + 3 * MIN))
    assert should_notify(None, pending, T0, RESEND) is Notify.NOTHING  # pending is not sent
    assert should_notify(pending, firing, T0 + 3 * MIN, RESEND) is Notify.NEW_FIRING
    again = replace(firing, updated_at=T0 + 4 * MIN)
    assert should_notify(firing, again, T0 + 4 * MIN, RESEND) is Notify.NOTHING  # unchanged
    tick = replace(firing, updated_at=T0 + 8 * MIN)
    assert should_notify(replace(firing, updated_at=T0 + 7 * MIN), tick, T0 + 8 * MIN, RESEND) is Notify.RESEND
    resolved = resolve(tick, T0 + 20 * MIN)
    assert should_notify(tick, resolved, T0 + 20 * MIN, RESEND) is Notify.RESOLVED
    assert should_notify(resolved, resolved, T0 + 21 * MIN, RESEND) is Notify.NOTHING  # said once
    assert should_notify(pending, resolve(pending, T0 + MIN), T0 + MIN, RESEND) is Notify.NOTHING  # never fired
    assert should_notify(None, firing, T0 + 3 * MIN, RESEND) is Notify.NEW_FIRING


def test_a_silenced_alert_is_not_sent():
    silence = Silence.create(["route=billing-faq"], T0, duration="1h", created_by="ana", comment="c")
    firing = alert(starts_at=T0)
    assert should_notify(None, firing, T0, RESEND, silences=[silence]) is Notify.NOTHING
    assert should_notify(None, firing, T0 + 2 * timedelta(hours=1), RESEND, silences=[silence]) is Notify.NEW_FIRING


def test_transition_record_shape_and_round_trip():
    firing = alert(starts_at=T0 + 3 * MIN, suspect_changes=({"dim": "version.model", "value": "gen-11"},))
    record = firing.transition_record()
    assert list(record) == [
        "route",
        "kind",
        "state",
        "at",
        "rate",
        "baseline",
        "expected",
        "delta",
        "mix_effect",
        "rate_effect",
        "mix_slice",
        "suspect_changes",
        "unit",
        "details",
    ]
    assert (record["state"], record["at"]) == ("firing", "2026-11-21T09:03:00+00:00")
    assert record["suspect_changes"] == [{"dim": "version.model", "value": "gen-11"}]
    json.dumps(record)
    stored = json.loads(json.dumps(ack(firing, by="ana", now=T0 + 4 * MIN).as_dict()))
    assert Alert.from_dict(stored) == ack(firing, by="ana", now=T0 + 4 * MIN)


def test_severity():
    assert severity_for(0.045, 0.02) == "critical"
    assert severity_for(0.025, 0.02) == severity_for(None, 0.02) == "warning"


def minute_stream(seed, rates, answers=60):
    rng = np.random.default_rng(seed)
    out = []
    for rate in rates:
        n = rng.integers(1, 9, rng.poisson(answers))
        f = rng.binomial(n, rng.beta(rate * 9, (1 - rate) * 9, n.size))
        out.append(
            Counts(
                events=n.size,
                claims=int(n.sum()),
                failed=int(f.sum()),
                claims_sq=int((n * n).sum()),
                failed_sq=int((f * f).sum()),
                failed_claims=int((f * n).sum()),
                unsupported=int(f.sum()),
            )
        )
    return out


def test_a_detector_run_becomes_pending_firing_resolved_records():
    detector, current, records = DriftDetector(), None, []
    stream = minute_stream(3, [0.08] * 600 + [0.14] * 60 + [0.08] * 120)
    for i, counts in enumerate(stream):
        now = T0 + i * MIN
        detector.update(counts, now)
        previous, current = (
            current,
            next_alert(current, "billing-faq", detector.regression, now, labels={"tenant": "acme"}),
        )
        if current is not None and (
            previous is None
            or previous.recorded_state != current.recorded_state
            or previous.alert_id != current.alert_id
        ):
            records.append(current.transition_record())
    states = [r["state"] for r in records]
    assert states[-3:] == ["pending", "firing", "resolved"]
    firing = records[-2]
    assert firing["delta"] == pytest.approx(0.06, abs=0.02) and firing["baseline"] == pytest.approx(0.08, abs=0.01)
    assert T0 + 600 * MIN <= datetime.fromisoformat(firing["at"]) <= T0 + 610 * MIN
    assert current.starts_at is not None and current.ends_at is not None and current.onset <= current.starts_at


def test_observed_alert_is_none_while_ok_and_carries_suspects():
    detector = DriftDetector()
    detector.update(Counts.zero(), T0)
    assert observed_alert("billing-faq", detector.regression, T0) is None
    stream = minute_stream(4, [0.08] * 600 + [0.15] * 15)
    for i, counts in enumerate(stream, 1):
        detector.update(counts, T0 + i * MIN)
    observed = observed_alert("billing-faq", detector.regression, T0 + 616 * MIN, suspects=[{"value": "gen-11"}])
    assert observed.starts_at == T0 + 616 * MIN and observed.suspect_changes == ({"value": "gen-11"},)
    assert observed.driving_verdict == "unsupported" and observed.claims == detector.regression.claims_counted


def test_the_alert_list_puts_firing_before_pending_before_resolved_each_newest_first():
    """The stored order is newest first; a resolved alert newer than a firing one still lists below it."""
    from services.alerts.oncall.service import AlertsService

    class Records:  # what AlertsService reads of its repository: alerts newest first, and silences
        def __init__(self, alerts):
            self.alerts = alerts

        def list(self, route=None, limit=500, **filters):  # kind, states, at: the list filters again itself
            return self.alerts

        def silences(self):
            return []

        def open_alerts(self):  # the sources of inhibition (services/alerts/lifecycle/inhibition.py)
            return [a for a in self.alerts if a.ends_at is None]

    newest_first = [
        alert(T0 + 50 * MIN, alert_id="resolved-new", starts_at=T0 + 51 * MIN, ends_at=T0 + 55 * MIN),
        alert(T0 + 40 * MIN, alert_id="pending-new"),
        alert(T0 + 30 * MIN, alert_id="firing-new", starts_at=T0 + 31 * MIN),
        alert(T0 + 20 * MIN, alert_id="resolved-old", starts_at=T0 + 21 * MIN, ends_at=T0 + 25 * MIN),
        alert(T0, alert_id="firing-old", starts_at=T0 + MIN),
    ]
    listed = [v.alert.alert_id for v in AlertsService(Records(newest_first)).list(T0 + 60 * MIN)]
    assert listed == ["firing-new", "firing-old", "pending-new", "resolved-new", "resolved-old"]
