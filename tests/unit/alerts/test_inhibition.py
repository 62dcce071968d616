"""Inhibition rules (issue 53), as Alertmanager has them: a firing route_silent or events_rejected alert inhibits the
same route's drift alerts, which show as inhibited and are not notified; when it resolves, a drift alert still firing
is notified then. The evaluator's alerts themselves are not changed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from services.alerts.evaluation.cycle import AlertCycle
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.inhibition import INHIBIT_RULES, Inhibition, InhibitRule
from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    DRIFT_KIND,
    MIX_KIND,
    REJECTED_KIND,
    SILENT_KIND,
)
from services.alerts.lifecycle.silences import Silence
from services.alerts.notify.dispatch import Dispatcher
from services.alerts.notify.receivers import ALERTMANAGER, WEBHOOK
from services.alerts.oncall.rules import alert_rules
from services.alerts.oncall.service import AlertView
from services.app.compose import agreement_test, rules_in_force
from services.app.settings import Settings, SettingsError, load_settings
from services.core.metrics import Metrics

NOW = datetime(2026, 11, 21, 14, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
RESEND = timedelta(minutes=1)


def alert(kind: str, route: str = "billing-faq", **fields) -> Alert:
    fields = {
        "labels": {"service": "claimwatch"},
        "pending_since": NOW - 10 * MIN,
        "starts_at": NOW - 8 * MIN,
        "window": 30,
        **fields,
    }
    severity = "critical" if kind in (SILENT_KIND, REJECTED_KIND) else "warning"
    return Alert(f"a-{kind}-{route}", route, kind, severity, **fields)


def inhibited_by(target: Alert, *alerts: Alert, rules=INHIBIT_RULES) -> tuple[str, ...]:
    return Inhibition.at(rules, alerts, NOW).inhibited_by(target)


# -- which alerts inhibit which -----------------------------------------------------------------------------------
def test_a_silent_or_rejecting_route_inhibits_its_own_drift_alerts_only():
    silent, rejected = alert(SILENT_KIND), alert(REJECTED_KIND)
    regression, mix = alert(DRIFT_KIND), alert(MIX_KIND)
    assert inhibited_by(regression, silent, regression) == (silent.alert_id,)
    assert inhibited_by(mix, silent, rejected, mix) == (silent.alert_id, rejected.alert_id)
    # not another route's, not a kind outside the rule, and never the other way round
    assert inhibited_by(alert(DRIFT_KIND, "parcel-status"), silent, rejected) == ()
    assert inhibited_by(alert(ABSTENTION_KIND), silent) == ()
    assert inhibited_by(silent, regression, rejected) == ()


def test_only_a_firing_source_inhibits():
    regression = alert(DRIFT_KIND)
    pending = alert(SILENT_KIND, starts_at=None)
    resolved = alert(SILENT_KIND, ends_at=NOW - MIN)
    later = alert(SILENT_KIND, starts_at=NOW + MIN)  # fires after now
    assert inhibited_by(regression, pending) == inhibited_by(regression, resolved) == inhibited_by(regression, later)
    assert inhibited_by(regression, resolved) == ()
    assert inhibited_by(regression, alert(SILENT_KIND, ends_at=NOW + MIN)) != ()  # ends later: still firing now


def test_equal_can_name_another_label_and_a_missing_label_matches_as_empty():
    rule = InhibitRule(source_kinds=(SILENT_KIND,), target_kinds=(DRIFT_KIND,), equal=("region",))
    source = alert(SILENT_KIND, "a", labels={"region": "eu"})
    assert inhibited_by(alert(DRIFT_KIND, "b", labels={"region": "eu"}), source, rules=[rule]) == (source.alert_id,)
    assert inhibited_by(alert(DRIFT_KIND, "b", labels={"region": "us"}), source, rules=[rule]) == ()
    unlabelled = InhibitRule(source_kinds=(SILENT_KIND,), target_kinds=(DRIFT_KIND,), equal=("zone",))
    assert inhibited_by(alert(DRIFT_KIND, "b"), source, rules=[unlabelled]) == (source.alert_id,)


# -- the rule as a setting ---------------------------------------------------------------------------------------
def test_the_rule_is_a_setting_with_the_issues_default_and_bad_rules_are_refused_in_a_sentence():
    assert Settings().notify.inhibit_rules == list(INHIBIT_RULES)
    (rule,) = INHIBIT_RULES
    assert (rule.source_kinds, rule.target_kinds, rule.equal) == (
        (SILENT_KIND, REJECTED_KIND),
        (DRIFT_KIND, MIX_KIND),
        ("route",),
    )
    off = load_settings(environ={"CLAIMWATCH_NOTIFY__INHIBIT_RULES": "[]"})
    assert off.notify.inhibit_rules == []
    for rules, said in (
        (
            '[{"source_kinds": ["route_silentt"], "target_kinds": ["mix_shift"]}]',
            "'route_silentt' is not an alert kind",
        ),
        ('[{"source_kinds": ["mix_shift"], "target_kinds": ["mix_shift"]}]', "both a source and a target"),
        ('[{"source_kinds": ["route_silent"], "target_kinds": ["mix_shift"], "equal": []}]', "at least 1"),
        ('[{"source_kinds": ["route_silent"], "target_kinds": []}]', "target_kinds"),
    ):
        with pytest.raises(SettingsError, match="notify.inhibit_rules") as refused:
            load_settings(environ={"CLAIMWATCH_NOTIFY__INHIBIT_RULES": rules})
        assert said in str(refused.value), str(refused.value)


def test_the_rules_list_names_the_inhibition_on_each_kind_it_concerns():
    rules = {r.kind: r.read() for r in rules_in_force(Settings())}
    for kind in (SILENT_KIND, REJECTED_KIND, DRIFT_KIND, MIX_KIND):
        (said,) = rules[kind].inhibition
        assert said.setting == "notify.inhibit_rules" and said.equal == ["route"]
        assert said.text.startswith(
            "a firing route_silent or events_rejected alert inhibits the hallucination_rate_rise and mix_shift "
            "alerts with the same route"
        ), said.text
    assert rules[ABSTENTION_KIND].inhibition == []
    s = Settings()
    none = alert_rules(s.drift.detector_config(), s.drift.input_health, agreement_test(), {}, inhibit_rules=[])
    assert all(r.read().inhibition == [] for r in none)


# -- how an alert reads -----------------------------------------------------------------------------------------
def test_an_inhibited_alert_reads_firing_inhibited_and_names_its_source():
    silent, regression = alert(SILENT_KIND), alert(DRIFT_KIND)
    inhibition = Inhibition.at(INHIBIT_RULES, [silent, regression], NOW)
    read = AlertView.of(regression, [], NOW, inhibition=inhibition).read()
    assert (read.state, read.state_text, read.inhibited_by) == ("firing", "firing·inhibited", [silent.alert_id])
    assert [(i.alert_id, i.kind, i.route) for i in read.inhibitors] == [(silent.alert_id, SILENT_KIND, "billing-faq")]
    assert AlertView.of(silent, [], NOW, inhibition=inhibition).read().state_text == "firing"
    # a resolved alert is not inhibited any longer: there is nothing left to notify
    done = AlertView.of(alert(DRIFT_KIND, ends_at=NOW - MIN), [], NOW, inhibition=inhibition).read()
    assert (done.state_text, done.inhibited_by) == ("resolved", [])
    pending = AlertView.of(alert(MIX_KIND, starts_at=None), [], NOW, inhibition=inhibition).read()
    assert pending.state_text == "pending·inhibited"


# -- what is notified -------------------------------------------------------------------------------------------
def dispatcher(**kwargs) -> Dispatcher:
    return Dispatcher(
        "http://am.invalid",
        "http://hook.invalid",
        "http://claimwatch.invalid",
        RESEND,
        retry_initial_seconds=0.5,
        retry_max_seconds=30,
        attempt_timeout_seconds=10,
        **kwargs,
    )


def test_an_inhibited_firing_is_not_sent_nor_re_sent_and_the_same_without_rules_is():
    silent, regression = alert(SILENT_KIND), alert(DRIFT_KIND)
    d = dispatcher()
    inhibition = d.inhibition([silent, regression], NOW)
    assert d.plan(None, regression, [], NOW, inhibition=inhibition) == []
    assert {o.target for o in d.plan(None, silent, [], NOW, inhibition=inhibition)} == {ALERTMANAGER, WEBHOOK}
    (resend,) = d.resend([silent, regression], [], NOW)
    assert [p["labels"]["kind"] for p in resend.body] == [SILENT_KIND]
    free = dispatcher(inhibit_rules=[])
    assert len(free.plan(None, regression, [], NOW, inhibition=free.inhibition([silent, regression], NOW))) == 2
    (resend,) = free.resend([silent, regression], [], NOW)
    assert [p["labels"]["kind"] for p in resend.body] == [SILENT_KIND, DRIFT_KIND]


def test_an_inhibited_resolution_is_sent_only_when_its_firing_was_and_then_names_what_inhibits_it():
    silent = alert(SILENT_KIND)
    resolved = alert(DRIFT_KIND, ends_at=NOW)
    d = dispatcher()
    inhibition = d.inhibition([silent], NOW)
    assert d.plan(None, resolved, [], NOW, inhibition=inhibition) == []  # never told it fired: nothing to close
    am, hook = d.plan(None, resolved, [], NOW, inhibition=inhibition, told=True)
    assert am.body[0]["annotations"]["inhibited_by"] == f"{silent.alert_id} (route_silent on billing-faq)"
    assert am.body[0]["endsAt"] == NOW.isoformat() and am.key == f"alert/{resolved.alert_id}/resolved"
    assert hook.body["reason"] == "resolved" and hook.body["inhibited_by"] == [silent.alert_id]
    assert f"Inhibited by {silent.alert_id} (route_silent on billing-faq)." in hook.body["text"]


def test_when_the_source_resolves_a_drift_alert_still_firing_is_notified_unless_silenced_or_still_inhibited():
    regression, mix = alert(DRIFT_KIND), alert(MIX_KIND)
    silent_done = alert(SILENT_KIND, ends_at=NOW)
    d = dispatcher()
    am, hook = d.released([silent_done], [regression], [], NOW)
    assert am.key == hook.key == f"alert/{regression.alert_id}/firing"  # once per receiver, as its firing
    assert hook.body["reason"] == "inhibition ended" and hook.body["alert"]["alert_id"] == regression.alert_id
    assert am.body[0]["labels"]["kind"] == DRIFT_KIND and "inhibited_by" not in am.body[0]["annotations"]
    # still inhibited by a rejecting route, silenced, resolved itself, or another route's: nothing
    assert d.released([silent_done], [regression, alert(REJECTED_KIND)], [], NOW) == []
    silence = Silence.create(["route=billing-faq"], NOW - MIN, duration="1h", created_by="me", comment="deploy")
    assert d.released([silent_done], [regression], [silence], NOW) == []
    assert d.released([silent_done], [alert(DRIFT_KIND, ends_at=NOW - MIN)], [], NOW) == []
    assert d.released([silent_done], [alert(MIX_KIND, "parcel-status")], [], NOW) == []
    assert d.released([alert(DRIFT_KIND, "x", ends_at=NOW)], [mix], [], NOW) == []  # a target frees nothing


# -- the leader's cycle, from one evaluation to the next ----------------------------------------------------------
class Scripted:
    """An evaluator that gives the transitions it is told to, with its open alerts after them."""

    last_minute = None

    def __init__(self):
        self.open: dict[str, Alert] = {}
        self.next: list[Alert] = []

    def evaluate(self, now):
        for a in self.next:
            self.open[a.kind] = a
            if a.ends_at is not None:
                del self.open[a.kind]
        done, self.next = self.next, []
        return done


class NoSilences:
    def silences(self, at=None):
        return []


async def inline(fn, *args):
    return fn(*args)


def test_the_cycle_mutes_the_drift_alert_while_its_route_is_silent_and_tells_it_when_the_route_is_back():
    evaluator, d = Scripted(), dispatcher()
    cycle = AlertCycle(evaluator, NoSilences(), d, Metrics(), inline)
    silent, regression = alert(SILENT_KIND), alert(DRIFT_KIND)

    def tick(now, *transitions):
        evaluator.next = list(transitions)
        records = asyncio.run(cycle.evaluate(now))
        sent = d.queued()
        for queue in d.receivers.values():
            queue.waiting.clear()
        return records, sent

    records, sent = tick(NOW, silent, regression)  # the route went silent as the regression fired
    assert len(records) == 2  # both transitions are recorded and published, as before
    assert {(o.target, o.key) for o in sent} == {
        (t, f"alert/{silent.alert_id}/firing") for t in (ALERTMANAGER, WEBHOOK)
    }
    asyncio.run(cycle.resend(NOW + MIN))
    (resend,) = d.queued()
    assert [p["labels"]["kind"] for p in resend.body] == [SILENT_KIND]
    for queue in d.receivers.values():
        queue.waiting.clear()

    back = alert(SILENT_KIND, ends_at=NOW + 5 * MIN)
    _, sent = tick(NOW + 5 * MIN, back)
    told = {(o.target, o.key, o.body.get("reason") if o.target == WEBHOOK else None) for o in sent}
    assert told == {
        (ALERTMANAGER, f"alert/{silent.alert_id}/resolved", None),
        (WEBHOOK, f"alert/{silent.alert_id}/resolved", "resolved"),
        (ALERTMANAGER, f"alert/{regression.alert_id}/firing", None),
        (WEBHOOK, f"alert/{regression.alert_id}/firing", "inhibition ended"),
    }
    asyncio.run(cycle.resend(NOW + 6 * MIN))
    (resend,) = d.queued()
    assert [p["labels"]["kind"] for p in resend.body] == [DRIFT_KIND]
