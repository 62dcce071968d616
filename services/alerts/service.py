"""What engineers do with alerts (list, show, ack, silence, unsilence), shared by the API and the CLI."""
from __future__ import annotations

from datetime import datetime

from services.alerts.lifecycle import Alert, ack, status
from services.alerts.records import AlertRecords
from services.alerts.silences import Silence
from services.core.errors import NotFound


def alert_view(alert: Alert, silences: list[Silence], now: datetime) -> dict:
    st = status(alert, silences, now)
    return {**alert.as_dict(), "state": st.state, "acked": st.acked, "silenced_by": list(st.silenced_by)}


class AlertsService:
    def __init__(self, alerts: AlertRecords):
        self.alerts = alerts

    def list(self, now: datetime, route: str | None = None, state: str | None = None) -> list[dict]:
        silences = self.alerts.silences()
        views = [alert_view(a, silences, now) for a in self.alerts.list(route)]
        return [v for v in views if state is None or v["state"] == state]

    def show(self, alert_id: str, now: datetime) -> dict:
        alert = self.alerts.get(alert_id)
        return {**alert_view(alert, self.alerts.silences(), now), "transitions": self.alerts.transitions(alert_id)}

    def ack(self, alert_id: str, by: str, note: str, now: datetime) -> dict:
        alert = self.alerts.get(alert_id)  # NotFound for an unknown id: an error, not a no-op
        acked = ack(alert, by, now, note)
        self.alerts.save(acked)
        return alert_view(acked, self.alerts.silences(), now)

    def silence(self, matchers: list[str], by: str, comment: str, now: datetime,
                duration: str | None = None, ends_at: datetime | None = None) -> dict:
        silence = Silence.create(matchers, now, ends_at=ends_at, duration=duration, created_by=by, comment=comment)
        self.alerts.save_silence(silence)
        return silence.as_dict()

    def unsilence(self, silence_id: str, now: datetime) -> dict:
        silence = self.alerts.silence(silence_id).expire(now)
        self.alerts.save_silence(silence)
        return silence.as_dict()

    def silences(self, now: datetime, active_only: bool = False) -> list[dict]:
        return [{**s.as_dict(), "active": s.is_active(now)} for s in self.alerts.silences(now if active_only else None)]


__all__ = ["AlertsService", "NotFound", "alert_view"]
