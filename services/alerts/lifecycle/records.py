"""The alert repository bound to this stage's domain types (the store does not import them)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.silences import Silence
from services.core.clock import utcnow
from services.store.alerts import AlertRepository
from services.store.backends import Store

AlertRecords = AlertRepository[Alert, Silence]


def alert_repository(store: Store, clock: Callable[[], datetime] = utcnow) -> AlertRecords:
    """Alerts, transitions, silences, the evaluator's state and expectations; alerts and silences read back as ``Alert``
    and ``Silence``."""
    return AlertRepository(store, Alert.from_dict, Silence.from_dict, clock)
