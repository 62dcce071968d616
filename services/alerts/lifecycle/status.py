"""An alert's state, Alertmanager-style: it follows from timestamps.

- pending: ``pending_since`` set, ``starts_at`` not yet reached;
- firing: ``starts_at <= now`` and no ``ends_at`` reached;
- resolved: ``ends_at <= now``.
Acks, silences and inhibition (services/alerts/lifecycle/inhibition.py) never change the state; they change who
gets told (``should_notify``). People read it as ``state_text``: an alert that ended without ever firing was
``cleared``, not resolved, and an open one says whether it is acked, silenced or inhibited.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.silences import Silence


@dataclass(frozen=True)
class Status:
    state: str
    acked: bool
    silenced_by: tuple[str, ...] = field(default=())


def alert_state(alert: Alert, now: datetime) -> str:
    if alert.ends_at is not None and alert.ends_at <= now:
        return "resolved"
    if alert.starts_at is not None and alert.starts_at <= now:
        return "firing"
    return "pending"


def state_text(state: str, fired: bool, acked: bool, silenced: bool, inhibited: bool = False) -> str:
    """The state as people read it: ``cleared`` when it ended without ever firing (only pending: nothing was
    resolved), and an open alert's ack, silence and inhibition beside its state (``firing·acked``,
    ``firing·inhibited``)."""
    if state == "resolved":
        return "resolved" if fired else "cleared"
    return "·".join([state, *["acked"] * acked, *["silenced"] * silenced, *["inhibited"] * inhibited])


def silenced_by(alert: Alert, silences: Iterable[Silence], now: datetime) -> tuple[str, ...]:
    labels = alert.match_labels
    return tuple(s.silence_id for s in silences if s.matches(labels, now))


def is_acked(alert: Alert) -> bool:
    return alert.acked_at is not None


def status(alert: Alert, silences: Iterable[Silence], now: datetime) -> Status:
    return Status(alert_state(alert, now), is_acked(alert), silenced_by(alert, silences, now))


def ack(alert: Alert, by: str, now: datetime, note: str = "") -> Alert:
    if not by or not by.strip():
        raise ValueError("ack: say who is acknowledging (by)")
    if alert.ends_at is not None and alert.ends_at <= now:
        raise ValueError(f"alert {alert.alert_id} resolved at {alert.ends_at.isoformat()}; there is nothing to ack")
    return replace(alert, acked_at=now, acked_by=by.strip(), ack_note=note)


class Notify(Enum):
    """What ``should_notify`` decides; a reason to send is sent as its value (the webhook's ``reason``)."""

    NEW_FIRING = "new firing"  # it fires, and did not at the last evaluation
    RESEND = "resend"  # still firing, and a resend interval has passed since the last evaluation
    RESOLVED = "resolved"  # it fired once and has now ended
    RELEASED = "inhibition ended"  # still firing, and the alert that inhibited it has resolved
    NOTHING = "nothing"  # silenced, inhibited, pending, never fired, or nothing new to say


def should_notify(
    previous: Alert | None,
    current: Alert | None,
    now: datetime,
    resend_every: timedelta,
    silences: Iterable[Silence] = (),
    inhibited_by: Sequence[str] = (),
) -> Notify:
    """Why to send `current` now, or ``Notify.NOTHING``.

    `previous` is the alert as of the last evaluation. A silenced alert is never
    sent, nor an inhibited one (``inhibited_by``: the firing alerts that inhibit it);
    a pending one or one that never fired is not either.
    """
    if current is None or silenced_by(current, silences, now) or inhibited_by:
        return Notify.NOTHING
    same = previous is not None and previous.alert_id == current.alert_id
    before = previous.recorded_state if previous is not None and same else None
    now_state = current.recorded_state
    if now_state == "firing":
        if previous is None or before != "firing":
            return Notify.NEW_FIRING
        started = current.starts_at
        assert started is not None  # recorded_state is "firing" only once the alert has started
        last = previous.updated_at or started

        def ticks(t: datetime) -> int:
            return (t - started) // resend_every

        return Notify.RESEND if ticks(now) > ticks(last) else Notify.NOTHING
    if now_state == "resolved" and current.starts_at is not None and before != "resolved":
        return Notify.RESOLVED
    return Notify.NOTHING
