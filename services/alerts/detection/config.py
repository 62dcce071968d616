"""The drift detector's settings: the shared part and one model per engine, each validated by pydantic.

A bad value names itself and what it must be. Settings arrive flat, as ``drift.detector.h`` in the
settings file or ``CLAIMWATCH_DRIFT__DETECTOR__H=9`` as text (pydantic reads "9" as the number it
stands for). ``DetectorConfig.from_mapping`` hands each engine its own settings. This module imports
nothing from the detector, its engines or its baseline, which all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

MAX_GAP_MINUTES = 90  # longer gaps replay this many empty minutes; enough to flush every window
MINUTES_PER_90_DAYS = 90 * 24 * 60
KINDS = ("cusum", "window", "naive")  # the engines, in services/alerts/detection/engines.py's ENGINES order


def plain(exc: ValidationError, what: str) -> str:
    """A validation error as one sentence: ``detector setting h='high': must be a number``."""
    first = exc.errors()[0]
    name = ".".join(str(p) for p in first["loc"])
    reason = str(first["ctx"]["error"]) if first["type"] == "value_error" else first["msg"]
    if first["type"] == "extra_forbidden":
        return f"unknown {what} setting {name}"
    reason = reason[:1].lower() + reason[1:]
    return reason if not name else f"{what} setting {name}={first['input']!r}: {reason}"


class Settings(BaseModel):
    """A frozen settings model whose errors read as one sentence naming the setting."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    what: ClassVar[str] = "detector"  # names the settings in errors

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ValueError(plain(exc, self.what)) from None

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated as a new one is."""
        return type(self)(**{**dict(self), **changes})

    @classmethod
    def names(cls) -> set[str]:
        return set(cls.model_fields)


def refuse_unknown(values: Mapping[str, Any], known: set[str], what: str) -> None:
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {what} setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def must(ok: bool, name: str, value: Any, expected: str) -> None:
    if not ok:
        raise ValueError(f"detector setting {name}={value!r}: must be {expected}")


class CusumConfig(Settings):
    """``cusum``: a quasi-binomial CUSUM of "expected + design rise" against "expected" (the shipped engine)."""

    # fire when the log-likelihood ratio reaches h; None: each route's own, from the stated false-alarm rate
    h: float | None = Field(default=None, gt=0)
    pending_fraction: float = Field(
        default=0.5, gt=0, le=1
    )  # pending from h * pending_fraction until the CUSUM is back at 0
    resolve_h: float = Field(default=5.0, gt=0)  # resolve when the mirror CUSUM (back at baseline) reaches this
    design_shift: float | None = Field(
        default=None, gt=0, lt=1
    )  # the rise it is tuned for; None = design_ratio × threshold
    design_ratio: float = Field(default=1.25, gt=0)  # 1.25 balances the +2 and +3 delay targets (bench/drift.py)

    def design(self, threshold: float) -> float:
        """The rise detection is tuned for, with the detector's ``threshold``."""
        return self.design_shift or self.design_ratio * threshold


class WindowConfig(Settings):
    """``window``: z-tests of several windows against the expectation, with a ``for``."""

    windows: tuple[int, ...] = Field(default=(10, 30, 60), min_length=1)  # test windows in minutes
    z_fire: float = Field(default=4.0, gt=0)  # z of any window against the baseline …
    window_for_minutes: int = Field(default=3, ge=0)  # … held for this many minutes
    z_resolve: float = 1.0  # resolve when every window is below this z …
    resolve_minutes: int = Field(default=10, ge=1)  # … for this many minutes

    @model_validator(mode="after")
    def _consistent(self) -> WindowConfig:
        must(all(1 <= w <= MAX_GAP_MINUTES for w in self.windows), "windows", self.windows,
             f"minutes in [1, {MAX_GAP_MINUTES}]")  # fmt: skip
        must(self.z_resolve < self.z_fire, "z_resolve", self.z_resolve, "below z_fire")
        return self


class NaiveConfig(Settings):
    """``naive``: a Prometheus-style rule, the window's rate at least threshold over the expectation for a while."""

    naive_window: int = Field(default=30, ge=1, le=MAX_GAP_MINUTES)  # the rule's window in minutes
    for_minutes: int = Field(default=10, ge=0)  # its `for` duration


ENGINE_CONFIGS: dict[str, type[Settings]] = {"cusum": CusumConfig, "window": WindowConfig, "naive": NaiveConfig}


class DetectorConfig(Settings):
    """Defaults chosen by bench/drift.py (60 answers/min, ~8% base rate, correlation 0.1).

    ``kind`` picks the engine; every engine's settings are kept, so switching kind keeps the others'."""

    kind: Literal["cusum", "window", "naive"] = "cusum"
    threshold: float = Field(default=0.02, gt=0, lt=1)  # minimum rise over the baseline, absolute
    # the false alarms each route may raise in 90 days; the cusum derives each route's threshold from it
    false_alarms_per_route_per_90d: float = Field(default=1.0, gt=0, le=1000)
    min_claims: int = Field(default=200, ge=1)  # claims behind a rise before it may fire
    baseline_minutes: int = 24 * 60  # trailing level; a pending run's minutes wait, a firing one's are left out
    block_minutes: int = Field(
        default=60, ge=1
    )  # the baseline moves in whole wall-clock blocks; the current one is excluded
    season_days: int = Field(default=7, ge=0)  # history behind the time-of-day profile; 0 = the flat trailing level
    hold_pending: bool = True  # False = drop pending minutes from the baseline (the biased previous way)
    slice_prior_claims: float = Field(
        default=2_000.0, gt=0
    )  # a slice's rate is shrunk towards its route's with this many
    mix_share: float = Field(default=0.5, gt=0, le=1)  # a rise is a mix shift when at least this share of it is mix
    min_baseline_claims: int = Field(
        default=50_000, ge=1
    )  # warm-up: no alarms before the history holds this many claims
    learning_level_minutes: int = 120  # learning (under a day of history): the level is this recent …
    # … and a test adds a margin: learning_margin before any hour is seen, then what the route's finished hours show
    learning_margin: float = Field(default=0.0075, ge=0, lt=1)
    margin_prior_hours: float = Field(default=1.0, gt=0)  # the weight of learning_margin among the hours seen
    margin_spread: float = Field(default=1.25, ge=0)  # the margin covers this many spreads of the hours seen
    confidence: float = Field(default=0.95, ge=0.5, lt=1)  # a fired rise must not be credibly smaller than threshold …
    min_rise_fraction: float = Field(default=0.75, ge=0, le=1)  # … and its estimate must reach this fraction of it
    overdispersion: bool = True  # False = treat claims as independent (ablation only)
    rate_window_minutes: int = Field(default=30, ge=1)  # window of `rate` while nothing is pending
    cusum: CusumConfig = Field(default_factory=CusumConfig)
    window: WindowConfig = Field(default_factory=WindowConfig)
    naive: NaiveConfig = Field(default_factory=NaiveConfig)

    @model_validator(mode="after")
    def _consistent(self) -> DetectorConfig:
        must(1440 % self.block_minutes == 0, "block_minutes", self.block_minutes, "a divisor of 1440 (a day)")
        must(self.baseline_minutes >= self.block_minutes, "baseline_minutes", self.baseline_minutes,
             "at least block_minutes")  # fmt: skip
        must(self.learning_level_minutes >= self.block_minutes, "learning_level_minutes",
             self.learning_level_minutes, "at least block_minutes")  # fmt: skip
        must(self.threshold * self.cusum.design_ratio < 1, "design_ratio", self.cusum.design_ratio,
             "positive, with threshold × design_ratio below 1")  # fmt: skip
        return self

    @property
    def engine(self) -> CusumConfig | WindowConfig | NaiveConfig:
        """The settings of the engine ``kind`` picks."""
        engine: CusumConfig | WindowConfig | NaiveConfig = getattr(self, self.kind)
        return engine

    @property
    def minutes_per_false_alarm(self) -> float:
        """The stated false-alarm rate as the in-control run length it asks of each route's detector."""
        return MINUTES_PER_90_DAYS / self.false_alarms_per_route_per_90d

    @property
    def history_minutes(self) -> int:
        """The history a fresh detector replays: its level and, with seasonality, its time-of-day profile."""
        return max(self.baseline_minutes, self.season_days * 1440)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> DetectorConfig:
        """From flat settings (``drift.detector``: kind, threshold, h, windows, …): each engine's go to its config."""
        own = {kind: engine.names() for kind, engine in ENGINE_CONFIGS.items()}
        shared = cls.names() - set(ENGINE_CONFIGS)
        refuse_unknown(values, shared.union(*own.values()), "detector")
        engines = {kind: ENGINE_CONFIGS[kind](**{k: v for k, v in values.items() if k in own[kind]}) for kind in own}
        return cls(**{k: v for k, v in values.items() if k in shared}, **engines)


DEFAULTS = DetectorConfig()  # each default read by name (DEFAULTS.threshold), defined once above
# The three the drift settings hold themselves (drift.threshold, ...): every surface names them there.
SHARED_WITH_DRIFT = ("threshold", "min_claims", "baseline_minutes", "false_alarms_per_route_per_90d")


class FlatDetectorSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def config(self, **shared: Any) -> DetectorConfig:
        """The detector configuration with the drift settings' ``shared`` ones (SHARED_WITH_DRIFT)."""
        return DetectorConfig.from_mapping({**self.model_dump(), **shared})


# ``[drift.detector]`` as the settings file has it: every engine's settings and the shared ones side by side (flat,
# each name once), typed and defaulted as DetectorConfig and the engines' configs define them, less SHARED_WITH_DRIFT.
if TYPE_CHECKING:
    DetectorSettings = FlatDetectorSettings
else:
    DetectorSettings = create_model(
        "DetectorSettings",
        __base__=FlatDetectorSettings,
        **{
            name: (info.annotation, info)
            for model in (DetectorConfig, *ENGINE_CONFIGS.values())
            for name, info in model.model_fields.items()
            if name not in (*ENGINE_CONFIGS, *SHARED_WITH_DRIFT)
        },
    )
