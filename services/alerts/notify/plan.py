"""What to send, pure: the notifications an alert's transition or a resend makes, receiver by receiver
(services/alerts/notify/dispatch.py sends them)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from services.alerts.explain.shares import AlertExplanation
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.silences import Silence
from services.alerts.lifecycle.status import Notify, should_notify
from services.alerts.notify.payloads import alertmanager_payload, webhook_payload
from services.alerts.notify.receivers import ALERTMANAGER, WEBHOOK, Outgoing


def alert_key(alert_id: str, state: str) -> str:
    """The notification log's key for an alert's transition to ``state``: each is told once per receiver."""
    return f"alert/{alert_id}/{state}"


class NotificationPlanner:
    """The notifications to send: to Alertmanager (every firing alert, re-sent) and the webhook (each transition),
    each alert with its team's labels."""

    def __init__(
        self,
        alertmanager_url: str | None,
        webhook_url: str | None,
        external_url: str,
        resend_every: timedelta,
        owner_labels: Callable[[Alert], Mapping[str, str]] = lambda alert: {},
    ):
        self.alertmanager_url = alertmanager_url.rstrip("/") if alertmanager_url else None
        self.webhook_url = webhook_url
        self.external_url = external_url.rstrip("/")
        self.resend_every = resend_every
        self.owner_labels = owner_labels  # each alert's team (and owner): how Alertmanager routes it

    def plan(
        self,
        previous: Alert | None,
        current: Alert,
        silences: Iterable[Silence],
        now: datetime,
        explanation: AlertExplanation | None = None,
    ) -> list[Outgoing]:
        reason = should_notify(previous, current, now, self.resend_every, silences)
        if reason is Notify.NOTHING:
            return []
        key = None if reason is Notify.RESEND else alert_key(current.alert_id, current.recorded_state)
        out = []
        if self.alertmanager_url:
            out.append(
                Outgoing(
                    ALERTMANAGER,
                    f"{self.alertmanager_url}/api/v2/alerts",
                    [
                        alertmanager_payload(
                            current, self.external_url, now, self.resend_every, explanation, self.owner_labels(current)
                        )
                    ],
                    key=key,
                )
            )
        if self.webhook_url and reason is not Notify.RESEND:
            out.append(
                Outgoing(
                    WEBHOOK,
                    self.webhook_url,
                    webhook_payload(current, reason.value, self.external_url, explanation),
                    key=key,
                )
            )
        return out

    def resend(
        self,
        open_alerts: Iterable[Alert],
        silences: Iterable[Silence],
        now: datetime,
        explanations: Mapping[str, AlertExplanation] | None = None,
    ) -> list[Outgoing]:
        """Alertmanager expects firing alerts to be re-sent; silenced ones stay quiet."""
        silences = list(silences)
        explanations = explanations or {}
        if not self.alertmanager_url:
            return []
        payloads = [
            alertmanager_payload(
                a, self.external_url, now, self.resend_every, explanations.get(a.alert_id), self.owner_labels(a)
            )
            for a in open_alerts
            if a.recorded_state == "firing" and not any(s.matches(a.match_labels, now) for s in silences)
        ]
        return [Outgoing(ALERTMANAGER, f"{self.alertmanager_url}/api/v2/alerts", payloads)] if payloads else []
