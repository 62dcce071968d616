"""An alert: one open episode of one kind on one route, with its figures; stored and published as a record.

Its identity is stable (``make_alert_id``): the same route, kind and first-active time give the same id, so a
transition derived twice (a restart) is the same alert.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from services.rates.intervals import Interval


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
