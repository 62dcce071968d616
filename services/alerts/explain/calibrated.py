"""What a rate alert's rise is on the calibrated rate (issue 16): whether it holds once the verifier's
sensitivity and specificity, measured on human labels (services/review), are taken into account.
"""

from __future__ import annotations

from typing import Any, Protocol

from services.alerts.lifecycle.alert import Alert
from services.core.stats import rogan_gladen


class Calibration(Protocol):  # services.review.calibration.CalibratedRate, frozen: its fields read-only here
    @property
    def sensitivity(self) -> float | None: ...
    @property
    def specificity(self) -> float | None: ...
    @property
    def labels(self) -> int: ...
    @property
    def stale(self) -> bool: ...
    @property
    def reasons(self) -> tuple[str, ...]: ...
    @property
    def verifier_version(self) -> str: ...


def calibrated_rise(alert: Alert, calibration: Calibration | None) -> dict[str, Any]:
    """Whether the alert's rise holds on the calibrated rate. Se and Sp apply to both windows alike, so the rise
    keeps its sign unless both ends fall below the verifier's false-positive floor (1 - Sp): then the whole rise is
    within what the verifier invents. Unknown when the calibration is stale."""
    expected = alert.expected
    if calibration is None or not calibration.labels:  # nothing to calibrate with: not stale, never fresh
        return {
            "holds": None,
            "stale": False,
            "status": "no labels yet",
            "reasons": ["no human labels yet"],
            "rate": None,
            "expected": None,
            "delta": None,
        }
    status = "stale" if calibration.stale else "current"
    if calibration.sensitivity is None or calibration.specificity is None:
        return {
            "holds": None,
            "stale": True,
            "status": "stale",
            "reasons": list(calibration.reasons),
            "rate": None,
            "expected": None,
            "delta": None,
        }
    se, sp = calibration.sensitivity, calibration.specificity
    rate, base = (None if x is None else rogan_gladen(x, se, sp) for x in (alert.rate, expected))
    delta = None if rate is None or base is None else rate - base
    holds = None if calibration.stale or delta is None else bool(delta > 0)
    return {
        "holds": holds,
        "stale": calibration.stale,
        "status": status,
        "reasons": list(calibration.reasons),
        "rate": rate,
        "expected": base,
        "delta": delta,
        "sensitivity": se,
        "specificity": sp,
        "labels": calibration.labels,
        "false_positive_floor": 1 - sp,
    }


def calibration_suspect(calibration: Calibration | None) -> dict[str, Any] | None:
    """The verifier version that made the route's calibration stale, as a suspect change."""
    if calibration is None:
        return None
    reason = next((r for r in calibration.reasons if "the route now runs" in r), None)
    if reason is None:
        return None
    return {
        "dim": "version.verifier",
        "key": "verifier",
        "value": calibration.verifier_version,
        "kind": "system",
        "share_before": None,
        "share_after": None,
        "rate_before": None,
        "rate_after": None,
        "explained": 0.0,
        "note": f"calibration stale: {reason}",
    }
