"""Alert lifecycle, Alertmanager-style: state follows from timestamps, merge is pure.

- pending: ``pending_since`` set, ``starts_at`` not yet reached;
- firing: ``starts_at <= now`` and no ``ends_at`` reached;
- resolved: ``ends_at <= now``.
Acks and silences never change the state; they change who gets told
(``should_notify``). People read it as ``state_text``: an alert that ended without ever
firing was ``cleared``, not resolved, and an open one says whether it is acked or silenced.
One open alert per (route, kind): ``merge`` folds every new observation into the open one,
keeping its identity, ack and original start.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from services.alerts.silences import Silence
from services.rates.intervals import Interval

if TYPE_CHECKING:
    from services.alerts.suspects import Suspect

DRIFT_KIND = "hallucination_rate_rise"  # worse on the same mix of questions: a regression, pages
MIX_KIND = "mix_shift"  # the rise is mostly a change in the mix of questions: a warning
KINDS = (DRIFT_KIND, MIX_KIND)  # the drift evaluator's kinds
AGREEMENT_KIND = "verifier_agreement"  # the verifier agrees with human labels less than it did: a warning
SILENT_KIND = "route_silent"  # the route's events fell far below its time of day: pages
REJECTED_KIND = "events_rejected"  # the route's share of dead-lettered events rose: pages
ABSTENTION_KIND = "abstention_rise"  # the route abstains more while serving less: a warning by default
INPUT_KINDS = (SILENT_KIND, REJECTED_KIND, ABSTENTION_KIND)  # the input-health kinds (services/alerts/input_health.py)
EVALUATED_KINDS = KINDS + INPUT_KINDS  # every kind the minute evaluator opens
CARDINALITY_KIND = (
    "route_cardinality"  # new routes are refused over routes.max_active: pages (services/alerts/cardinality.py)
)
MONITOR_KINDS = INPUT_KINDS + (CARDINALITY_KIND,)  # alerts on the monitor's own input, each with a runbook of its own
FLEET_ROUTE = "*"  # the route of an alert on every route at once (no route may be named "*")
UNITS = (
    "share",
    "per_minute",
)  # rate, expected, baseline and delta: a share of claims/answers/events, or events a minute
STATES = ("pending", "firing", "resolved")
SERVICE_LABELS = {"service": "claimwatch"}  # the extra labels the evaluators put on every alert
MATCH_LABEL_NAMES = ("route", "kind", "severity", *SERVICE_LABELS)  # what silences can match (see match_labels)


def make_alert_id(route: str, kind: str, started: datetime) -> str:
    """Stable identity: the same route, kind and first-active time give the same id."""
    return "a-" + hashlib.sha256(f"{route}|{kind}|{started.isoformat()}".encode()).hexdigest()[:16]


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.isoformat()


def _interval(i: Interval | None) -> list[float] | None:
    return None if i is None else [i.lo, i.hi]


@dataclass(frozen=True)
class Alert:
    alert_id: str
    route: str
    kind: str
    severity: str
    labels: dict[str, str]
    window: int  # minutes of evidence behind `rate`
    pending_since: datetime  # first seen active; part of the identity
    starts_at: datetime | None = None  # firing since
    ends_at: datetime | None = None  # resolved at
    acked_at: datetime | None = None
    acked_by: str | None = None
    ack_note: str | None = None
    rate: float | None = None
    rate_interval: Interval | None = None
    baseline: float | None = None
    baseline_interval: Interval | None = None
    delta: float | None = None
    claims: int = 0
    onset: datetime | None = None
    driving_verdict: str | None = None
    suspect_changes: tuple[dict[str, Any], ...] = ()  # Suspect.as_dict() records, most likely first
    updated_at: datetime | None = None
    expected: float | None = None  # the rate expected over the window at this time of day
    expected_basis: str = ""  # why: the time-of-day profile, or the trailing level when history is short
    mix_effect: float | None = None  # the part of delta the slice mix explains (more hard questions) …
    rate_effect: float | None = None  # … and the part on the same mix (worse answers); they add up to delta
    mix_slice: str | None = None  # the slice whose share moved most, with its shares
    unit: str = "share"  # what rate, expected, baseline and delta measure (UNITS)
    # kind-specific figures (input health: received, top rule, …)
    details: dict[str, Any] = field(default_factory=dict)
    # unhashable, as labels is a dict; typeshed types object.__hash__ as a method, which None cannot override
    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    @property
    def match_labels(self) -> dict[str, str]:
        """The labels silences match against: the extra labels plus route, kind and severity."""
        return {**self.labels, "route": self.route, "kind": self.kind, "severity": self.severity}

    @property
    def recorded_state(self) -> str:
        """State as of the alert's own latest timestamp."""
        return "resolved" if self.ends_at else "firing" if self.starts_at else "pending"

    @property
    def transition_at(self) -> datetime:
        return self.ends_at or self.starts_at or self.pending_since

    @property
    def tested_against(self) -> float | None:
        """The rate the rise is measured from: the expectation; the baseline for an alert stored before alerts
        carried one."""
        return self.expected if self.expected is not None else self.baseline

    def transition_record(self) -> dict[str, Any]:
        """One line of `claimwatch backtest --alerts-out` and of topic claimwatch.alerts."""
        return {
            "route": self.route,
            "kind": self.kind,
            "state": self.recorded_state,
            "at": self.transition_at.isoformat(),
            "rate": self.rate,
            "baseline": self.baseline,
            "expected": self.expected,
            "delta": self.delta,
            "mix_effect": self.mix_effect,
            "rate_effect": self.rate_effect,
            "mix_slice": self.mix_slice,
            "suspect_changes": list(self.suspect_changes),
            "unit": self.unit,
            "details": dict(self.details),
        }

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready record for storage."""
        return {
            "alert_id": self.alert_id,
            "route": self.route,
            "kind": self.kind,
            "severity": self.severity,
            "labels": dict(self.labels),
            "window": self.window,
            "pending_since": _iso(self.pending_since),
            "starts_at": _iso(self.starts_at),
            "ends_at": _iso(self.ends_at),
            "acked_at": _iso(self.acked_at),
            "acked_by": self.acked_by,
            "ack_note": self.ack_note,
            "rate": self.rate,
            "rate_interval": _interval(self.rate_interval),
            "baseline": self.baseline,
            "baseline_interval": _interval(self.baseline_interval),
            "delta": self.delta,
            "claims": self.claims,
            "onset": _iso(self.onset),
            "driving_verdict": self.driving_verdict,
            "suspect_changes": list(self.suspect_changes),
            "updated_at": _iso(self.updated_at),
            "expected": self.expected,
            "expected_basis": self.expected_basis,
            "mix_effect": self.mix_effect,
            "rate_effect": self.rate_effect,
            "mix_slice": self.mix_slice,
            "unit": self.unit,
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alert:
        def time(key: str) -> datetime | None:
            return None if data.get(key) is None else datetime.fromisoformat(data[key])

        def interval(key: str) -> Interval | None:
            return None if data.get(key) is None else Interval(*data[key])

        return cls(
            alert_id=data["alert_id"],  # the fields without a default are in every stored alert
            route=data["route"],
            kind=data["kind"],
            severity=data["severity"],
            labels=dict(data.get("labels") or {}),
            window=data["window"],
            pending_since=datetime.fromisoformat(data["pending_since"]),
            starts_at=time("starts_at"),
            ends_at=time("ends_at"),
            acked_at=time("acked_at"),
            acked_by=data.get("acked_by"),
            ack_note=data.get("ack_note"),
            rate=data.get("rate"),
            rate_interval=interval("rate_interval"),
            baseline=data.get("baseline"),
            baseline_interval=interval("baseline_interval"),
            delta=data.get("delta"),
            claims=int(data.get("claims") or 0),
            onset=time("onset"),
            driving_verdict=data.get("driving_verdict"),
            suspect_changes=tuple(data.get("suspect_changes") or ()),
            updated_at=time("updated_at"),
            expected=data.get("expected"),
            expected_basis=data.get("expected_basis") or "",
            mix_effect=data.get("mix_effect"),
            rate_effect=data.get("rate_effect"),
            mix_slice=data.get("mix_slice"),
            unit=data.get("unit") or "share",
            details=dict(data.get("details") or {}),
        )


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


def state_text(state: str, fired: bool, acked: bool, silenced: bool) -> str:
    """The state as people read it: ``cleared`` when it ended without ever firing (only pending: nothing was
    resolved), and an open alert's ack and silence beside its state (``firing·acked``)."""
    if state == "resolved":
        return "resolved" if fired else "cleared"
    return "·".join([state, *["acked"] * acked, *["silenced"] * silenced])


def silenced_by(alert: Alert, silences: Iterable[Silence], now: datetime) -> tuple[str, ...]:
    labels = alert.match_labels
    return tuple(s.silence_id for s in silences if s.matches(labels, now))


def is_acked(alert: Alert) -> bool:
    return alert.acked_at is not None


def status(alert: Alert, silences: Iterable[Silence], now: datetime) -> Status:
    return Status(alert_state(alert, now), is_acked(alert), silenced_by(alert, silences, now))


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
    NOTHING = "nothing"  # silenced, pending, never fired, or nothing new to say


def should_notify(
    previous: Alert | None,
    current: Alert | None,
    now: datetime,
    resend_every: timedelta,
    silences: Iterable[Silence] = (),
) -> Notify:
    """Why to send `current` now, or ``Notify.NOTHING``.

    `previous` is the alert as of the last evaluation. A silenced alert is never
    sent; a pending one or one that never fired is not either.
    """
    if current is None or silenced_by(current, silences, now):
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


CRITICAL_THRESHOLDS = 2  # a regression is critical from this many times its threshold


def severity_for(delta: float | None, threshold: float, kind: str = DRIFT_KIND) -> str:
    """A regression is critical from twice the threshold, warning below; a mix shift is always a warning."""
    critical = delta is not None and delta >= CRITICAL_THRESHOLDS * threshold
    return "critical" if kind == DRIFT_KIND and critical else "warning"


class DetectorView(Protocol):
    """What an alert reads of a detector's view of a route (fleet.RouteView, input_health.Finding)."""

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


def observed_alert(
    route: str,
    detector: DetectorView,
    now: datetime,
    kind: str = DRIFT_KIND,
    severity: str = "warning",
    labels: Mapping[str, str] | None = None,
    suspects: Iterable[Suspect | dict[str, Any]] = (),
) -> Alert | None:
    """What a detector says about a route now, as an Alert to merge; None when the detector is ok.

    `detector` is a view of a route: a drift detector's ``regression`` or ``mix_shift`` (RouteView), or
    an input-health view; `suspects` are Suspect objects or their dicts.
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
