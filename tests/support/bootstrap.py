"""An answer (cluster) bootstrap: the reference the analytic ratio interval is checked against
(services/rates/intervals.py), slow and obviously right, so it lives with the tests."""

from __future__ import annotations

import numpy as np

from services.rates.intervals import Interval, z_value


def bootstrap_interval(
    numerators,
    denominators=None,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> Interval | None:
    """Item (cluster) bootstrap percentile interval for Σnum/Σden (or the mean of values).

    Each item is one answer or one eval-set item; items are resampled with
    replacement. Returns None for no items, or when every resample has a zero
    denominator.
    """
    num = np.asarray(numerators, dtype=np.float64)
    den = np.ones_like(num) if denominators is None else np.asarray(denominators, dtype=np.float64)
    if num.ndim != 1 or num.shape != den.shape:
        raise ValueError(
            f"numerators and denominators must be 1-D and the same length, got {num.shape} and {den.shape}"
        )
    if n_boot < 100:
        raise ValueError(f"n_boot must be at least 100, got {n_boot}")
    alpha = 1 - level
    z_value(level)
    if num.size == 0:
        return None
    rng = np.random.default_rng(seed)
    stats = np.empty(n_boot)
    chunk = max(1, 4_000_000 // num.size)  # bounds memory at ~32 MB per chunk
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, num.size, size=(stop - start, num.size))
        top, bottom = num[idx].sum(axis=1), den[idx].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            stats[start:stop] = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)
    stats = stats[~np.isnan(stats)]
    if stats.size == 0:
        return None
    lo, hi = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return Interval(float(lo), float(hi))
