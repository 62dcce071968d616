"""What to send, pure: the notifications an alert's transition or a resend makes, receiver by receiver
(services/alerts/notify/dispatch.py sends them)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from services.alerts.explain.shares import AlertExplanation
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.inhibition import INHIBIT_RULES, NO_INHIBITION, Inhibition, InhibitRule
from services.alerts.lifecycle.silences import Silence
from services.alerts.lifecycle.status import Notify, should_notify
from services.alerts.notify.payloads import alertmanager_payload, webhook_payload
from services.alerts.notify.receivers import ALERTMANAGER, WEBHOOK, Outgoing


def alert_key(alert_id: str, state: str) -> str:
    """The notification log's key for an alert's transition to ``state``: each is told once per receiver."""
    return f"alert/{alert_id}/{state}"


class NotificationPlanner:
    """The notifications to send: to Alertmanager (every firing alert, re-sent) and the webhook (each transition),
    each alert with its team's labels; none for a silenced or inhibited alert (``inhibit_rules``:
    services/alerts/lifecycle/inhibition.py)."""

    def __init__(
        self,
        alertmanager_url: str | None,
        webhook_url: str | None,
        external_url: str,
        resend_every: timedelta,
        owner_labels: Callable[[Alert], Mapping[str, str]] = lambda alert: {},
        inhibit_rules: Sequence[InhibitRule] = INHIBIT_RULES,
    ):
        self.alertmanager_url = alertmanager_url.rstrip("/") if alertmanager_url else None
        self.webhook_url = webhook_url
        self.external_url = external_url.rstrip("/")
        self.resend_every = resend_every
        self.owner_labels = owner_labels  # each alert's team (and owner): how Alertmanager routes it
        self.inhibit_rules = tuple(inhibit_rules)  # notify.inhibit_rules

    def inhibition(self, open_alerts: Iterable[Alert], now: datetime) -> Inhibition:
        """The rules in force over ``open_alerts`` (the alerts open after an evaluation) at ``now``."""
        return Inhibition.at(self.inhibit_rules, open_alerts, now)

    def plan(
        self,
        previous: Alert | None,
        current: Alert,
        silences: Iterable[Silence],
        now: datetime,
        explanation: AlertExplanation | None = None,
        inhibition: Inhibition = NO_INHIBITION,
        told: bool = False,
    ) -> list[Outgoing]:
        """What to send of ``current``'s transition. An inhibited alert is sent nothing, unless it resolves and its
        firing was ``told`` (sent before the inhibition began): that resolution goes out, naming what inhibits it."""
        inhibitors = inhibition.sources(current)
        muted = () if told and current.recorded_state == "resolved" else tuple(a.alert_id for a in inhibitors)
        reason = should_notify(previous, current, now, self.resend_every, silences, muted)
        return self._outgoing(current, reason, now, explanation, inhibitors)

    def released(
        self,
        resolved: Iterable[Alert],
        open_alerts: Iterable[Alert],
        silences: Iterable[Silence],
        now: datetime,
        explanations: Mapping[str, AlertExplanation] | None = None,
    ) -> list[Outgoing]:
        """The firing alerts that ``resolved`` (alerts that have just resolved) inhibited and nothing inhibits now,
        silenced by nothing: each is told now, as its firing (once per receiver: the log holds a firing already
        told), as Alertmanager notifies an alert whose inhibition ends."""
        silences, open_alerts = list(silences), list(open_alerts)
        inhibition, explanations = self.inhibition(open_alerts, now), explanations or {}
        freed = {a.alert_id: a for r in resolved for a in inhibition.released(r, open_alerts, now)}
        out = []
        for alert in freed.values():
            if not any(s.matches(alert.match_labels, now) for s in silences):
                out += self._outgoing(alert, Notify.RELEASED, now, explanations.get(alert.alert_id))
        return out

    def _outgoing(
        self,
        current: Alert,
        reason: Notify,
        now: datetime,
        explanation: AlertExplanation | None,
        inhibitors: Sequence[Alert] = (),
    ) -> list[Outgoing]:
        if reason is Notify.NOTHING:
            return []
        key = None if reason is Notify.RESEND else alert_key(current.alert_id, current.recorded_state)
        out = []
        if self.alertmanager_url:
            payload = alertmanager_payload(
                current, self.external_url, now, self.resend_every, explanation, self.owner_labels(current), inhibitors
            )
            out.append(Outgoing(ALERTMANAGER, f"{self.alertmanager_url}/api/v2/alerts", [payload], key=key))
        if self.webhook_url and reason is not Notify.RESEND:
            body = webhook_payload(current, reason.value, self.external_url, explanation, inhibitors)
            out.append(Outgoing(WEBHOOK, self.webhook_url, body, key=key))
        return out

    def resend(
        self,
        open_alerts: Iterable[Alert],
        silences: Iterable[Silence],
        now: datetime,
        explanations: Mapping[str, AlertExplanation] | None = None,
    ) -> list[Outgoing]:
        """Alertmanager expects firing alerts to be re-sent; silenced and inhibited ones stay quiet (the sources of
        inhibition: ``open_alerts`` themselves)."""
        silences, open_alerts = list(silences), list(open_alerts)
        explanations = explanations or {}
        if not self.alertmanager_url:
            return []
        inhibition = self.inhibition(open_alerts, now)
        payloads = [
            alertmanager_payload(
                a, self.external_url, now, self.resend_every, explanations.get(a.alert_id), self.owner_labels(a)
            )
            for a in open_alerts
            if a.recorded_state == "firing"
            and not any(s.matches(a.match_labels, now) for s in silences)
            and not inhibition.sources(a)
        ]
        return [Outgoing(ALERTMANAGER, f"{self.alertmanager_url}/api/v2/alerts", payloads)] if payloads else []
