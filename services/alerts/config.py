"""The drift detector's settings: the shared part and one dataclass per engine, each checked where it is made.

A bad value names itself and what it must be. Settings arrive flat, as ``drift.detector.h`` in the
settings file or ``CLAIMWATCH_DRIFT__DETECTOR__H=9`` as text. ``DetectorConfig.from_mapping`` gives
each value its default's type and hands each engine its own settings. This module imports nothing
from the detector, its engines or its baseline, which all read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import fields as dc_fields
from typing import Any

MAX_GAP_MINUTES = 90  # longer gaps replay this many empty minutes; enough to flush every window
KINDS = ("cusum", "window", "naive")  # the engines, in services/alerts/engines.py's ENGINES order

Rules = dict[str, tuple[Callable[[Any, Any], bool], str]]  # name: (check(value, config), what a valid value is)


def check(config: Any, rules: Rules) -> None:
    """Refuse the first setting of ``config`` that breaks its rule."""
    for name, (ok, expected) in rules.items():
        value = getattr(config, name)
        try:
            valid = ok(value, config)
        except TypeError:
            valid = False
        if not valid:
            raise ValueError(f"detector setting {name}={value!r}: must be {expected}")


CUSUM_RULES: Rules = {
    "h": (lambda v, c: v > 0, "positive"),
    "pending_fraction": (lambda v, c: 0 < v <= 1, "in (0, 1]"),
    "resolve_h": (lambda v, c: v > 0, "positive"),
    "design_shift": (lambda v, c: v is None or 0 < v < 1, "None or a fraction between 0 and 1"),
    "design_ratio": (lambda v, c: 0 < v, "positive, with threshold × design_ratio below 1"),
}
WINDOW_RULES: Rules = {
    "windows": (
        lambda v, c: len(v) > 0 and all(1 <= w <= MAX_GAP_MINUTES for w in v),
        f"minutes in [1, {MAX_GAP_MINUTES}]",
    ),
    "z_fire": (lambda v, c: v > 0, "positive"),
    "window_for_minutes": (lambda v, c: v >= 0, "0 or more"),
    "z_resolve": (lambda v, c: v < c.z_fire, "below z_fire"),
    "resolve_minutes": (lambda v, c: v >= 1, "at least 1"),
}
NAIVE_RULES: Rules = {
    "naive_window": (lambda v, c: 1 <= v <= MAX_GAP_MINUTES, f"in [1, {MAX_GAP_MINUTES}]"),
    "for_minutes": (lambda v, c: v >= 0, "0 or more"),
}
SHARED_RULES: Rules = {
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
}


@dataclass(frozen=True)
class CusumConfig:
    """``cusum``: a quasi-binomial CUSUM of "expected + design rise" against "expected" (the shipped engine)."""

    h: float = 11.25  # fire when the log-likelihood ratio reaches h
    pending_fraction: float = 0.5  # pending from h * pending_fraction until the CUSUM is back at 0
    resolve_h: float = 5.0  # resolve when the mirror CUSUM (back at baseline) reaches this
    design_shift: float | None = None  # the rise it is tuned for; None = design_ratio × threshold
    design_ratio: float = 1.25  # 1.25 balances the +2 and +3 delay targets (bench/drift.py)

    def __post_init__(self) -> None:
        check(self, CUSUM_RULES)

    def design(self, threshold: float) -> float:
        """The rise detection is tuned for, with the detector's ``threshold``."""
        return self.design_shift or self.design_ratio * threshold


@dataclass(frozen=True)
class WindowConfig:
    """``window``: z-tests of several windows against the expectation, with a ``for``."""

    windows: tuple[int, ...] = (10, 30, 60)  # test windows in minutes
    z_fire: float = 4.0  # z of any window against the baseline …
    window_for_minutes: int = 3  # … held for this many minutes
    z_resolve: float = 1.0  # resolve when every window is below this z …
    resolve_minutes: int = 10  # … for this many minutes

    def __post_init__(self) -> None:
        check(self, WINDOW_RULES)


@dataclass(frozen=True)
class NaiveConfig:
    """``naive``: a Prometheus-style rule, the window's rate at least threshold over the expectation for a while."""

    naive_window: int = 30  # the rule's window in minutes
    for_minutes: int = 10  # its `for` duration

    def __post_init__(self) -> None:
        check(self, NAIVE_RULES)


ENGINE_CONFIGS = {"cusum": CusumConfig, "window": WindowConfig, "naive": NaiveConfig}  # kind: its settings


@dataclass(frozen=True)
class DetectorConfig:
    """Defaults chosen by bench/drift.py (60 answers/min, ~8% base rate, correlation 0.1).

    ``kind`` picks the engine; every engine's settings are kept, so switching kind keeps the others'."""

    kind: str = "cusum"
    threshold: float = 0.02  # minimum rise over the baseline, absolute
    min_claims: int = 200  # claims behind a rise before it may fire
    baseline_minutes: int = 24 * 60  # trailing level; a pending run's minutes wait, a firing one's are left out
    block_minutes: int = 60  # the baseline moves in whole wall-clock blocks; the current one is excluded
    season_days: int = 7  # history behind the time-of-day profile; 0 = the flat trailing level
    hold_pending: bool = True  # False = drop pending minutes from the baseline (the biased previous way)
    slice_prior_claims: float = 2_000.0  # a slice's rate is shrunk towards its route's with this many claims
    mix_share: float = 0.5  # a rise is a mix shift when at least this share of it is mix
    min_baseline_claims: int = 50_000  # warm-up: no alarms before the history holds this many claims
    learning_level_minutes: int = 120  # learning (under a day of history): the level is this recent …
    learning_margin: float = 0.0075  # … and a test adds this to the expectation (bench/drift.py --day-one)
    confidence: float = 0.95  # a fired rise must not be credibly smaller than threshold …
    min_rise_fraction: float = 0.75  # … and its estimate must reach this fraction of it
    overdispersion: bool = True  # False = treat claims as independent (ablation only)
    rate_window_minutes: int = 30  # window of `rate` while nothing is pending
    cusum: CusumConfig = field(default_factory=CusumConfig)
    window: WindowConfig = field(default_factory=WindowConfig)
    naive: NaiveConfig = field(default_factory=NaiveConfig)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"detector kind {self.kind!r} is unknown; use one of {', '.join(KINDS)}")
        check(self, SHARED_RULES)
        for kind, engine in ENGINE_CONFIGS.items():
            if not isinstance(getattr(self, kind), engine):
                raise TypeError(f"detector setting {kind}: must be a {engine.__name__}, got {getattr(self, kind)!r}")
        check(self.cusum, {"design_ratio": (lambda v, c: self.threshold * v < 1, CUSUM_RULES["design_ratio"][1])})

    @property
    def engine(self) -> CusumConfig | WindowConfig | NaiveConfig:
        """The settings of the engine ``kind`` picks."""
        return getattr(self, self.kind)

    @property
    def history_minutes(self) -> int:
        """The history a fresh detector replays: its level and, with seasonality, its time-of-day profile."""
        return max(self.baseline_minutes, self.season_days * 1440)

    @classmethod
    def from_mapping(cls, values: dict) -> DetectorConfig:
        """From flat settings (``drift.detector``: kind, threshold, h, windows, …): each engine's go to its config."""
        own = {kind: setting_names(engine) for kind, engine in ENGINE_CONFIGS.items()}
        shared = setting_names(cls) - set(ENGINE_CONFIGS)
        refuse_unknown(values, shared.union(*own.values()), "detector")
        engines = {
            kind: engine(**typed_settings(engine, {k: v for k, v in values.items() if k in own[kind]}, "detector"))
            for kind, engine in ENGINE_CONFIGS.items()
        }
        return cls(**typed_settings(cls, {k: v for k, v in values.items() if k in shared}, "detector"), **engines)


def setting_names(cls) -> set[str]:
    return {f.name for f in dc_fields(cls)}


def refuse_unknown(values: dict, known: set[str], what: str) -> None:
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {what} setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def typed_settings(cls, values: dict, what: str) -> dict:
    """``values`` for the dataclass ``cls``, each as its default's type; an unknown name is refused with the known ones."""
    refuse_unknown(values, setting_names(cls), what)
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
