"""The drift detector's settings, checked where they are made: a bad value names itself and what it must be."""
from __future__ import annotations

from dataclasses import dataclass, fields as dc_fields
from typing import Any

from services.alerts.engines import KINDS

MAX_GAP_MINUTES = 90  # longer gaps replay this many empty minutes; enough to flush every window


CONFIG_RULES = {  # name: (check(value, config), what a valid value is)
    "threshold": (lambda v, c: 0 < v < 1, "a fraction between 0 and 1, e.g. 0.02 for 2 points"),
    "min_claims": (lambda v, c: v >= 1, "at least 1"),
    "block_minutes": (lambda v, c: v >= 1 and 1440 % v == 0, "at least 1 and a divisor of 1440 (a day)"),
    "season_days": (lambda v, c: v >= 0, "0 (no time-of-day profile) or more days"),
    "slice_prior_claims": (lambda v, c: v > 0, "positive"),
    "mix_share": (lambda v, c: 0 < v <= 1, "in (0, 1]"),
    "baseline_minutes": (lambda v, c: v >= c.block_minutes, "at least block_minutes"),
    "min_baseline_claims": (lambda v, c: v >= 1, "at least 1"),
    "learning_level_minutes": (lambda v, c: c.block_minutes <= v, "at least block_minutes"),
    "learning_margin": (lambda v, c: 0 <= v < 1, "a fraction in [0, 1), e.g. 0.01 for 1 point"),
    "confidence": (lambda v, c: 0.5 <= v < 1, "in [0.5, 1)"),
    "min_rise_fraction": (lambda v, c: 0 <= v <= 1, "in [0, 1]"),
    "rate_window_minutes": (lambda v, c: v >= 1, "at least 1"),
    "h": (lambda v, c: v > 0, "positive"),
    "pending_fraction": (lambda v, c: 0 < v <= 1, "in (0, 1]"),
    "resolve_h": (lambda v, c: v > 0, "positive"),
    "design_shift": (lambda v, c: v is None or 0 < v < 1, "None or a fraction between 0 and 1"),
    "design_ratio": (lambda v, c: 0 < v and c.threshold * v < 1, "positive, with threshold × design_ratio below 1"),
    "windows": (lambda v, c: len(v) > 0 and all(1 <= w <= MAX_GAP_MINUTES for w in v), f"minutes in [1, {MAX_GAP_MINUTES}]"),
    "z_fire": (lambda v, c: v > 0, "positive"),
    "window_for_minutes": (lambda v, c: v >= 0, "0 or more"),
    "z_resolve": (lambda v, c: v < c.z_fire, "below z_fire"),
    "resolve_minutes": (lambda v, c: v >= 1, "at least 1"),
    "naive_window": (lambda v, c: 1 <= v <= MAX_GAP_MINUTES, f"in [1, {MAX_GAP_MINUTES}]"),
    "for_minutes": (lambda v, c: v >= 0, "0 or more"),
}


@dataclass(frozen=True)
class DetectorConfig:
    """Defaults chosen by bench/drift.py (60 answers/min, ~8% base rate, correlation 0.1)."""

    kind: str = "cusum"
    threshold: float = 0.02            # minimum rise over the baseline, absolute
    min_claims: int = 200              # claims behind a rise before it may fire
    baseline_minutes: int = 24 * 60    # trailing level; a pending run's minutes wait, a firing one's are left out
    block_minutes: int = 60            # the baseline moves in whole wall-clock blocks; the current one is excluded
    season_days: int = 7               # history behind the time-of-day profile; 0 = the flat trailing level
    hold_pending: bool = True          # False = drop pending minutes from the baseline (the biased previous way)
    slice_prior_claims: float = 2_000.0  # a slice's rate is shrunk towards its route's with this many claims
    mix_share: float = 0.5             # a rise is a mix shift when at least this share of it is mix
    min_baseline_claims: int = 50_000  # warm-up: no alarms before the history holds this many claims
    learning_level_minutes: int = 120  # learning (under a day of history): the level is this recent …
    learning_margin: float = 0.0075    # … and a test adds this to the expectation (bench/drift.py --day-one)
    confidence: float = 0.95           # a fired rise must not be credibly smaller than threshold …
    min_rise_fraction: float = 0.75    # … and its estimate must reach this fraction of it
    overdispersion: bool = True        # False = treat claims as independent (ablation only)
    rate_window_minutes: int = 30      # window of `rate` while nothing is pending
    h: float = 11.25                   # cusum: fire when the log-likelihood ratio reaches h
    pending_fraction: float = 0.5      # cusum: pending from h * pending_fraction until the CUSUM is back at 0
    resolve_h: float = 5.0             # cusum: resolve when the mirror CUSUM (back at baseline) reaches this
    design_shift: float | None = None  # cusum: the rise it is tuned for; None = design_ratio × threshold
    design_ratio: float = 1.25         # cusum: 1.25 balances the +2 and +3 delay targets (bench/drift.py)
    windows: tuple[int, ...] = (10, 30, 60)  # window: test windows in minutes
    z_fire: float = 4.0                # window: z of any window against the baseline …
    window_for_minutes: int = 3        # … held for this many minutes
    z_resolve: float = 1.0             # window: resolve when every window is below this z …
    resolve_minutes: int = 10          # … for this many minutes
    naive_window: int = 30             # naive: Prometheus-style rule window
    for_minutes: int = 10              # naive: `for` duration

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"detector kind {self.kind!r} is unknown; use one of {', '.join(KINDS)}")
        for name, (ok, expected) in CONFIG_RULES.items():
            value = getattr(self, name)
            try:
                valid = ok(value, self)
            except TypeError:
                valid = False
            if not valid:
                raise ValueError(f"detector setting {name}={value!r}: must be {expected}")

    def __setstate__(self, state: dict) -> None:
        # Evaluator checkpoints pickle detectors with their config. One pickled before design_ratio
        # existed was tuned for the threshold itself and keeps that, so it resumes exactly.
        self.__dict__.update({"design_ratio": 1.0, **state})

    @property
    def history_minutes(self) -> int:
        """The history a fresh detector replays: its level and, with seasonality, its time-of-day profile."""
        return max(self.baseline_minutes, self.season_days * 1440)

    @classmethod
    def from_mapping(cls, values: dict) -> "DetectorConfig":
        return cls(**typed_settings(cls, values, "detector"))


def typed_settings(cls, values: dict, what: str) -> dict:
    """``values`` for the dataclass ``cls``, each as its default's type; an unknown name is refused with the known ones."""
    known = {f.name for f in dc_fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {what} setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    defaults = cls()
    return {k: _as_type_of(getattr(defaults, k), v, k, what) for k, v in values.items()}


def _as_type_of(default: Any, value: Any, name: str, what: str) -> Any:
    """A setting as its default's type: environment variables (CLAIMWATCH_DRIFT__DETECTOR__H=9) arrive as text."""
    text = value.strip().lower() if isinstance(value, str) else None
    try:
        if isinstance(default, bool) and text is not None:
            return {"true": True, "1": True, "false": False, "0": False}[text]
        if isinstance(default, (int, float)) and not isinstance(default, bool) and text is not None:
            number = float(text)
            return int(number) if isinstance(default, int) and number.is_integer() else number
        return tuple(value) if isinstance(default, tuple) else value
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{what} setting {name}={value!r}: expected a {type(default).__name__}") from None
