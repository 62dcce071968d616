"""What the benches measured of each alert rule: its false-alarm rate and detection delay (issue 21, part D).

The figures live in services/alerts/rule_quality.json (at the stage's root, where ``bench/drift.py`` and
``bench/input_health.py`` write them); a figure that is not there is "not measured", never guessed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUALITY_FILE = Path(__file__).parents[1] / "rule_quality.json"
MISSED = "missed"  # a median delay past the bench's horizon: most of its changes were not caught in time


@dataclass(frozen=True)
class Quality:
    """What a bench measured for one kind; None: not measured."""

    false_alarms_per_route_per_60_days: float | None = None
    median_delay_minutes: Mapping[str, float | str] | None = None  # condition (e.g. "+3 pts") -> minutes, or MISSED
    # per route per 90 days at each volume (e.g. "5 answers/min"), where a rule promises a rate
    false_alarms_by_volume: Mapping[str, float] | None = None
    measured_by: str | None = None
    measured_on: str | None = None  # YYYY-MM-DD
    note: str = ""

    @classmethod
    def from_mapping(cls, kind: str, data: Mapping[str, Any]) -> Quality:
        where = f"{QUALITY_FILE.name}: {kind}"
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
        rate = data.get("false_alarms_per_route_per_60_days")
        delays = data.get("median_delay_minutes")
        if rate is not None and not (_number(rate) and not math.isinf(rate)):
            raise ValueError(f"{where}: false_alarms_per_route_per_60_days must be a number or null, got {rate!r}")
        if delays is not None and not (
            isinstance(delays, Mapping) and all(v is None or _number(v) for v in delays.values())
        ):
            raise ValueError(
                f"{where}: median_delay_minutes must map conditions to minutes, or be null; got {delays!r}"
            )
        by_volume = data.get("false_alarms_by_volume")
        if by_volume is not None and not (isinstance(by_volume, Mapping) and all(map(_number, by_volume.values()))):
            raise ValueError(f"{where}: false_alarms_by_volume must map volumes to numbers, or be null")
        # NaN and null: nothing to measure (not measured); infinity: the median change was never caught
        rate = None if rate is None or math.isnan(rate) else float(rate)
        delays = (
            None
            if delays is None
            else {
                str(k): MISSED if math.isinf(v) else float(v)
                for k, v in delays.items()
                if v is not None and not math.isnan(v)
            }
        )
        text = {k: data.get(k) for k in ("measured_by", "measured_on", "note")}
        for name, value in text.items():
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{where}: {name} must be text or null, got {value!r}")
        volumes = {str(k): float(v) for k, v in by_volume.items()} if by_volume else None
        measured_by, measured_on, note = text["measured_by"] or None, text["measured_on"] or None, text["note"] or ""
        return cls(rate, delays or None, volumes, measured_by, measured_on, note)

    @property
    def false_alarms_per_route_per_90_days(self) -> float | None:
        """The measured rate on the scale rules promise theirs (drift.false_alarms_per_route_per_90d)."""
        rate = self.false_alarms_per_route_per_60_days
        return None if rate is None else rate * 90 / 60

    @property
    def measured(self) -> bool:
        return self.false_alarms_per_route_per_60_days is not None or bool(self.median_delay_minutes)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def load_quality(path: Path | None = None) -> dict[str, Quality]:
    """The measured figures per kind (a missing file: nothing measured). A malformed file is an error naming it.
    The benches write Python's JSON, which may hold NaN and Infinity."""
    path = path or QUALITY_FILE  # read at each call: a bench run shows without a restart
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc}); re-run the bench that writes it") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object of kinds")
    return {kind: Quality.from_mapping(kind, value) for kind, value in data.items()}
