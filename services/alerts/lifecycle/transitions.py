"""One evaluation step of an alert, pure: observe what a detector says, then merge it into the open alert or
resolve that one.

One open alert per (route, kind): ``merge`` folds every new observation into the open one, keeping its identity,
ack and original start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from services.alerts.lifecycle.alert import Alert, make_alert_id
from services.alerts.lifecycle.kinds import DRIFT_KIND
from services.rates.intervals import Interval


def merge(previous: Alert | None, observed: Alert) -> Alert:
    """Fold an observation into the open alert of its route and kind (dedupe); a closed one starts afresh."""
    if previous is None or previous.ends_at is not None:
        return observed
    if (previous.route, previous.kind) != (observed.route, observed.kind):
        raise ValueError(
            f"cannot merge alert for {observed.route}/{observed.kind} into {previous.alert_id} "
            f"({previous.route}/{previous.kind}); look up the open alert by route and kind"
        )
    return replace(
        observed,
        alert_id=previous.alert_id,
        pending_since=previous.pending_since,
        starts_at=previous.starts_at or observed.starts_at,
        acked_at=previous.acked_at,
        acked_by=previous.acked_by,
        ack_note=previous.ack_note,
        onset=observed.onset or previous.onset,
        suspect_changes=observed.suspect_changes or previous.suspect_changes,
    )


def resolve(previous: Alert, now: datetime) -> Alert:
    """Close the open alert at `now` (an already closed one is returned unchanged)."""
    if previous.ends_at is not None:
        return previous
    return replace(previous, ends_at=now, updated_at=now)


CRITICAL_THRESHOLDS = 2  # a regression is critical from this many times its threshold


def severity_for(delta: float | None, threshold: float, kind: str = DRIFT_KIND) -> str:
    """A regression is critical from twice the threshold, warning below; a mix shift is always a warning."""
    critical = delta is not None and delta >= CRITICAL_THRESHOLDS * threshold
    return "critical" if kind == DRIFT_KIND and critical else "warning"


class DetectorView(Protocol):
    """What an alert reads of a detector's view of a route (services.alerts.detection.route_view.RouteView,
    services.alerts.detection.input_health.Finding)."""

    @property
    def state(self) -> str: ...
    @property
    def window_minutes(self) -> int: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def rate_interval(self) -> Interval | None: ...
    @property
    def baseline(self) -> float | None: ...
    @property
    def baseline_interval(self) -> Interval | None: ...
    @property
    def delta(self) -> float | None: ...
    @property
    def claims_counted(self) -> int: ...
    @property
    def onset(self) -> datetime | None: ...
    @property
    def driving_verdict(self) -> str | None: ...


class SuspectRecord(Protocol):
    """A suspect change an alert can carry (services.alerts.explain.suspects.Suspect)."""

    def as_dict(self) -> dict[str, Any]: ...


def observed_alert(
    route: str,
    detector: DetectorView,
    now: datetime,
    kind: str = DRIFT_KIND,
    severity: str = "warning",
    labels: Mapping[str, str] | None = None,
    suspects: Iterable[SuspectRecord | dict[str, Any]] = (),
) -> Alert | None:
    """What a detector says about a route now, as an Alert to merge; None when the detector is ok.

    `detector` is a view of a route: a drift detector's ``regression`` or ``mix_shift`` (RouteView), or
    an input-health view; `suspects` are Suspect objects (services/alerts/explain/suspects.py) or their dicts.
    """
    current = detector.state
    if current == "ok":
        return None
    return Alert(
        alert_id=make_alert_id(route, kind, now),
        route=route,
        kind=kind,
        severity=severity,
        labels=dict(labels or {}),
        window=detector.window_minutes,
        pending_since=now,
        starts_at=now if current == "firing" else None,
        rate=detector.rate,
        rate_interval=detector.rate_interval,
        baseline=detector.baseline,
        baseline_interval=detector.baseline_interval,
        delta=detector.delta,
        claims=detector.claims_counted,
        onset=detector.onset,
        driving_verdict=detector.driving_verdict,
        suspect_changes=tuple(s if isinstance(s, dict) else s.as_dict() for s in suspects),
        updated_at=now,
        expected=getattr(detector, "expected", None),
        expected_basis=getattr(detector, "expected_basis", ""),
        mix_effect=getattr(detector, "mix_effect", None),
        rate_effect=getattr(detector, "rate_effect", None),
        mix_slice=getattr(detector, "mix_slice", None),
        unit=getattr(detector, "unit", "share"),
        details=dict(getattr(detector, "details", None) or {}),
    )


def next_alert(
    previous: Alert | None, route: str, detector: DetectorView, now: datetime, **observed_kwargs: Any
) -> Alert | None:
    """One evaluation step: observe, then merge into the open alert or resolve it."""
    observed = observed_alert(route, detector, now, **observed_kwargs)
    if observed is None:
        return resolve(previous, now) if previous is not None and previous.ends_at is None else previous
    return merge(previous, observed)
