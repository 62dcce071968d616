"""The statistics every stage shares, defined once: normal quantiles, the Wilson score interval, the percentile
interval of a bootstrap, and the Rogan–Gladen correction. Plain numpy; no layer of this project below it."""

from __future__ import annotations

from functools import lru_cache
from statistics import NormalDist
from typing import Any, overload

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


@lru_cache(maxsize=64)
def z_value(level: float) -> float:
    """The two-sided normal quantile of a confidence level (0.95 -> 1.96)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(p: float | Floats, n: float | Floats, z: float) -> tuple[Floats, Floats]:
    """Wilson score bounds; numpy-vectorised, n may be an effective (non-integer) size > 0."""
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * np.sqrt(p * (1 - p) / n + z2n / (4 * n))
    lo = np.where(p <= 0, 0.0, np.clip(centre - half, 0.0, 1.0))  # exact ends, not 1 - 1e-16
    hi = np.where(p >= 1, 1.0, np.clip(centre + half, 0.0, 1.0))
    return lo, hi


def percentile_interval(samples: npt.NDArray[Any], confidence: float) -> tuple[float | None, float | None]:
    """The bootstrap's percentile interval over its finite samples; (None, None) when there are none."""
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None, None
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(samples, [tail, 100 - tail])
    return float(lo), float(hi)


@overload
def rogan_gladen(raw: float, sensitivity: float, specificity: float) -> float: ...
@overload
def rogan_gladen(raw: npt.ArrayLike, sensitivity: npt.ArrayLike, specificity: npt.ArrayLike) -> float | Floats: ...
def rogan_gladen(raw: npt.ArrayLike, sensitivity: npt.ArrayLike, specificity: npt.ArrayLike) -> float | Floats:
    """(raw + Sp - 1) / (Se + Sp - 1) clipped to [0, 1]; nan where Se + Sp <= 1 (no better than chance)."""
    raw, se, sp = (np.asarray(x, dtype=np.float64) for x in (raw, sensitivity, specificity))
    youden = se + sp - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.clip((raw + sp - 1) / youden, 0.0, 1.0)
    value = np.where(youden > 0, value, np.nan)
    return float(value) if value.ndim == 0 else value
