"""Drift-detector benchmark: detection delay, missed rises and false alarms per route-day.

Simulates per-route minute buckets (the sums of table rate_minute) and drives the
shipped detector engines, many routes at once, minute by minute. Traffic:
- 20, 60 and 200 answers a minute on average, diurnal volume (peak/trough 3:1,
  random phase per route), Poisson arrivals;
- 1 to 8 non-trivial claims per answer (uniform); base rate 8%;
- intra-answer correlation 0.1: each answer's failure probability is drawn from
  a beta distribution (beta-binomial claims);
- after a one-day warm-up, step rises of 2, 3 or 5 points lasting 120 minutes at
  random times, separated by 12 to 36 hours of pure noise; also rises of 1 point,
  half the threshold, to show how often a sub-threshold rise gets alerted.

A rise is detected when the detector enters "firing" within 90 minutes of its
onset; the delay counts the elevated minutes seen, so a detector firing on the
first elevated bucket has delay 1. False alarms are entries into "firing" in
noise, outside [onset, end of rise + 90 min), after the warm-up day.

Besides the shipped detector it runs the previous default, the shipped CUSUM made as
quiet as the naive rule, a window test, a CUSUM that treats claims as independent, the
naive rule and the naive rule tuned to catch +2; the targets table adds Lorden's
first-order bound on delay at a given false-alarm rate.

Run: python bench/drift.py --seed 7 --days 60 --routes 200   (~10,200 noise route-days per level)
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from numba import njit
from rich.console import Console
from rich.table import Table
from scipy.stats import betabinom, chi2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from services.alerts.detector import FIRING, DetectorConfig, make_engine  # noqa: E402

BASE_RATE, RHO, MAX_CLAIMS = 0.08, 0.1, 8
SHIFTS = (0.01, 0.02, 0.03, 0.05)  # +1 point is below the 2-point threshold: alerting on it is not wanted
TRAFFIC = (20, 60, 200)
RISE_MINUTES, DETECT_WITHIN, GAP_HOURS = 120, 90, (12, 36)
DIURNAL_AMPLITUDE = 0.5
FLEET = 50
NAIVE = "naive: 30m rate >= base+2pt, for 10m"
# The naive rule's threshold lowered until it just meets the 2-point target (>= 95% within 90 min) at
# 60/min: its best false-alarm rate at the sensitivity the issue asks for (measured with this bench).
NAIVE_TUNED_THRESHOLD = 0.016
NAIVE_TUNED = "naive tuned: base+1.6pt, for 10m"
PREVIOUS = "previous: h=10.5, tuned for +2"  # the default before the design moved to 1.25 x threshold
QUIET_H = 15.0  # the shipped CUSUM made about as quiet as the naive rule, to show what that costs in delay
QUIET = f"shipped at h={QUIET_H:g} (~naive's quiet)"


def claim_cdfs(rates) -> np.ndarray:
    """cdf[level, n, j] = P(f <= j failed claims | n claims) under a beta-binomial."""
    out = np.ones((len(rates), MAX_CLAIMS + 1, MAX_CLAIMS + 1))
    scale = 1 / RHO - 1
    for i, p in enumerate(rates):
        for n in range(1, MAX_CLAIMS + 1):
            out[i, n, : n + 1] = betabinom.cdf(np.arange(n + 1), n, p * scale, (1 - p) * scale)
    return out


@njit(cache=True)
def seed_numba(seed):
    np.random.seed(seed)


@njit(cache=True)
def simulate_minutes(volume, level, cdf):
    """Per-minute sums (events, claims, failed, Σn², Σf², Σf·n) for volume/level of shape (T, R)."""
    steps, routes = volume.shape
    out = np.zeros((steps, routes, 6))
    for t in range(steps):
        for r in range(routes):
            answers = np.random.poisson(volume[t, r])
            table = cdf[level[t, r]]
            e = n_sum = f_sum = nn = ff = fn = 0.0
            for _ in range(answers):
                n = np.random.randint(1, MAX_CLAIMS + 1)
                u = np.random.random()
                f = 0
                while table[n, f] < u:
                    f += 1
                e += 1.0
                n_sum += n
                f_sum += f
                nn += n * n
                ff += f * f
                fn += f * n
            out[t, r, 0] = e
            out[t, r, 1] = n_sum
            out[t, r, 2] = f_sum
            out[t, r, 3] = nn
            out[t, r, 4] = ff
            out[t, r, 5] = fn
    return out


def schedule(rng, routes: int, minutes: int):
    """Rise level per (minute, route) and the list of rises (route, onset, shift index)."""
    level = np.zeros((minutes, routes), dtype=np.int64)
    rises = []
    for r in range(routes):
        t = 1440 + int(rng.uniform(0, GAP_HOURS[1] * 60))
        while t + RISE_MINUTES + DETECT_WITHIN < minutes:
            k = int(rng.integers(len(SHIFTS)))
            level[t : t + RISE_MINUTES, r] = k + 1
            rises.append((r, t, k))
            t += RISE_MINUTES + int(rng.uniform(*GAP_HOURS) * 60)
    return level, np.array(rises, dtype=np.int64).reshape(-1, 3)


def run_level(rate_per_min: int, configs: dict, days: int, routes: int, seed: int):
    rng = np.random.default_rng(seed)
    seed_numba(seed)
    minutes = days * 1440
    level, rises = schedule(rng, routes, minutes)
    phase = rng.uniform(0, 2 * np.pi, routes)
    cdf = claim_cdfs((BASE_RATE, *(BASE_RATE + s for s in SHIFTS)))
    engines = {name: make_engine(cfg, routes) for name, cfg in configs.items()}
    states = {name: np.zeros((minutes, routes), dtype=np.int8) for name in configs}
    sim_seconds = det_seconds = 0.0
    for day in range(days):
        t0 = time.perf_counter()
        t = np.arange(day * 1440, (day + 1) * 1440)
        volume = rate_per_min * (1 + DIURNAL_AMPLITUDE * np.sin(2 * np.pi * t[:, None] / 1440 + phase[None, :]))
        sums = simulate_minutes(volume, level[t], cdf)
        t1 = time.perf_counter()
        for name, engine in engines.items():
            out = states[name]
            for i, minute in enumerate(t):
                engine.step(sums[i], int(minute))
                out[minute] = engine.state
        sim_seconds += t1 - t0
        det_seconds += time.perf_counter() - t1
    return {name: score(states[name], rises, minutes, routes) for name in configs}, sim_seconds, det_seconds


def score(state: np.ndarray, rises: np.ndarray, minutes: int, routes: int) -> dict:
    firing = state == FIRING
    entered = firing & ~np.vstack([np.zeros((1, routes), bool), firing[:-1]])
    exposed = np.ones_like(firing)
    exposed[:1440] = False
    delays = {k: [] for k in range(len(SHIFTS))}
    masked = 0
    for r, onset, k in rises:
        exposed[onset : onset + RISE_MINUTES + DETECT_WITHIN, r] = False
        if firing[onset - 1, r]:
            masked += 1  # already firing from an earlier false alarm: no delay to measure
            continue
        hits = np.flatnonzero(entered[onset : onset + DETECT_WITHIN, r])
        delays[k].append(hits[0] + 1 if hits.size else math.inf)
    exposure_days = exposed.sum() / 1440
    false_alarms = int((entered & exposed).sum())
    return {"delays": {k: np.array(v) for k, v in delays.items()}, "false_alarms": false_alarms,
            "exposure_days": exposure_days, "masked": masked}


def quantile(values: np.ndarray, q: float) -> float:
    """Quantile where missed rises count as infinitely late."""
    if values.size == 0:
        return math.nan
    x = np.quantile(np.where(np.isinf(values), 1e9, values), q, method="higher")
    return math.inf if x >= 1e9 else float(x)


def fmt_quantile(values: np.ndarray, q: float) -> str:
    x = quantile(values, q)
    return "-" if math.isnan(x) else f">{DETECT_WITHIN}" if math.isinf(x) else f"{x:.0f}"


def parse_override(item: str) -> dict:
    key, _, text = item.partition("=")
    if key not in DetectorConfig.__dataclass_fields__ or not text:
        raise SystemExit(f"--set {item!r}: use NAME=VALUE with a DetectorConfig field, e.g. h=11")
    default = getattr(DetectorConfig(), key)
    if key == "windows":
        return {key: tuple(int(v) for v in text.split(","))}
    if isinstance(default, bool):
        return {key: text.lower() in ("1", "true", "yes")}
    if isinstance(default, str):
        return {key: text}
    if default is None and text.lower() == "none":
        return {key: None}
    return {key: int(text) if isinstance(default, int) else float(text)}


def detector_configs(overrides: list[str]) -> dict:
    shipped = DetectorConfig()
    for item in overrides:
        shipped = replace(shipped, **parse_override(item))
    return {
        f"shipped ({shipped.kind})": shipped,
        PREVIOUS: replace(shipped, kind="cusum", h=10.5, design_ratio=1.0),
        QUIET: replace(shipped, kind="cusum", h=QUIET_H),
        "window test": replace(shipped, kind="window"),
        "cusum, independent claims": replace(shipped, kind="cusum", overdispersion=False),
        NAIVE: replace(shipped, kind="naive"),
        NAIVE_TUNED: replace(shipped, kind="naive", threshold=NAIVE_TUNED_THRESHOLD),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--days", type=int, default=30, help="simulated days per route (first day is warm-up)")
    ap.add_argument("--routes", type=int, default=100, help="routes per traffic level")
    ap.add_argument("--traffic", type=int, nargs="+", default=list(TRAFFIC), help="mean answers per minute")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a shipped-detector setting")
    args = ap.parse_args(argv)
    if args.days < 3 or args.routes < 1:
        ap.error("--days must be at least 3 and --routes at least 1")
    configs = detector_configs(args.set)
    console = Console(width=150)
    delay_table = Table(title="Detection delay in minutes (rise of +2, +3, +5 points over an 8% base rate)")
    for col in ("answers/min", "detector", "shift", "rises", "median", "p90", "missed (>90 min)"):
        delay_table.add_column(col, justify="right" if col not in ("detector",) else "left")
    fa_table = Table(title="False alarms in pure noise")
    for col in ("answers/min", "detector", "route-days", "false alarms", "per route-day", "per route per 60 days",
                f"fleet of {FLEET}: pages/day"):
        fa_table.add_column(col, justify="right" if col != "detector" else "left")
    results = {}
    started = time.perf_counter()
    for i, rate in enumerate(args.traffic):
        res, sim_s, det_s = run_level(rate, configs, args.days, args.routes, args.seed + 1000 * i)
        results[rate] = res
        masked = ", ".join(f"{name}: {r['masked']}" for name, r in res.items() if r["masked"])
        console.print(f"[dim]{rate}/min: simulated in {sim_s:.1f}s, {len(configs)} detectors in {det_s:.1f}s"
                      + (f"; rises left out because a false alarm was still firing at onset: {masked}" if masked else "")
                      + "[/dim]")
        for name, r in res.items():
            for k, shift in enumerate(SHIFTS):
                d = r["delays"][k]
                missed = int(np.isinf(d).sum())
                label = f"+{shift * 100:.0f}" + (" (below threshold)" if shift < configs[name].threshold else "")
                delay_table.add_row(str(rate), name, label, str(d.size), fmt_quantile(d, 0.5),
                                    fmt_quantile(d, 0.9), f"{missed} ({missed / max(d.size, 1):.1%})")
            per_day = r["false_alarms"] / r["exposure_days"]
            fa_table.add_row(str(rate), name, f"{r['exposure_days']:.0f}", str(r["false_alarms"]),
                             f"{per_day:.4f}", f"{per_day * 60:.2f}", f"{per_day * FLEET:.2f}")
        delay_table.add_section()
        fa_table.add_section()
    console.print(delay_table)
    console.print(fa_table)
    if 60 in results:
        console.print(targets(results[60], next(iter(configs))))
    console.print(f"[dim]seed {args.seed}, {args.days} days x {args.routes} routes per traffic level, "
                  f"total {time.perf_counter() - started:.0f}s[/dim]")
    return 0


def targets(res: dict, shipped: str) -> Table:
    s = res[shipped]
    d = {SHIFTS.index(x): s["delays"][SHIFTS.index(x)] for x in (0.02, 0.03, 0.05)}
    two, three, five = (SHIFTS.index(x) for x in (0.02, 0.03, 0.05))
    med = {k: quantile(v, 0.5) for k, v in d.items()}
    p90 = {k: quantile(v, 0.9) for k, v in d.items()}
    hit2 = float(np.mean(np.isfinite(d[two]))) if d[two].size else 0.0
    fa60 = s["false_alarms"] / s["exposure_days"] * 60
    rows = [
        ("false alarms per route per 60 days <= 1", f"{fa60:.2f}", fa60 <= 1),
        ("+3 points: median delay <= 12 min", f"{med[three]:.0f}", med[three] <= 12),
        ("+3 points: p90 delay <= 25 min", f"{p90[three]:.0f}", p90[three] <= 25),
        ("+2 points: detected within 90 min >= 95%", f"{hit2:.1%}", hit2 >= 0.95),
        ("+2 points: median delay <= 25 min", f"{med[two]:.0f}", med[two] <= 25),
        ("+5 points: median delay <= 7 min", f"{med[five]:.0f}", med[five] <= 7),
    ]
    for naive in (NAIVE, NAIVE_TUNED):
        n = res[naive]
        naive_med = {k: quantile(n["delays"][k], 0.5) for k in d}
        naive_fa60 = n["false_alarms"] / n["exposure_days"] * 60
        faster = all(med[k] < naive_med[k] for k in d if d[k].size)
        rows.append((f"median delay below {naive.split(':')[0]} at every shift",
                     " / ".join(f"{med[k]:.0f} vs {naive_med[k]:.0f}" for k in d), faster))
        rows.append((f"false alarms below {naive.split(':')[0]} (per 60 days)", f"{fa60:.2f} vs {naive_fa60:.2f}",
                     fa60 < naive_fa60))
    for name in (PREVIOUS, QUIET):
        other = res[name]
        other_med = {k: quantile(other["delays"][k], 0.5) for k in d}
        other_fa60 = other["false_alarms"] / other["exposure_days"] * 60
        rows.append((f"for comparison, {name}: false alarms; median delays",
                     f"{other_fa60:.2f}; " + " / ".join(f"{other_med[k]:.0f}" for k in d), None))
    naive = res[NAIVE]
    quiet = chi2.ppf(0.95, 2 * (naive["false_alarms"] + 1)) / 2 / naive["exposure_days"]  # Poisson 95% upper limit
    rows.append((f"Lorden bound on mean delay at {quiet * 60:.3f} false alarms / 60 days (naive's, 95% upper limit)",
                 " / ".join(f"+{x * 100:.0f}: >= {lorden_bound(quiet, x, 60):.0f}" for x in (0.02, 0.03, 0.05)),
                 None))
    rows.append((f"same bound at the shipped detector's {fa60:.2f} false alarms / 60 days",
                 " / ".join(f"+{x * 100:.0f}: >= {lorden_bound(fa60 / 60, x, 60):.0f}" for x in (0.02, 0.03, 0.05)),
                 None))
    table = Table(title=f"Targets at 60 answers/min, {shipped}")
    for col in ("target", "measured", "met"):
        table.add_column(col)
    for name, value, ok in rows:
        table.add_row(name, value, "" if ok is None else "[green]yes[/green]" if ok else "[red]no[/red]")
    return table


def lorden_bound(false_alarms_per_day: float, shift: float, rate: float) -> float:
    """Lorden's first-order lower bound on the worst-case mean delay (minutes) of any detector raising
    false alarms no more often than this: log(minutes between false alarms) / KL information per minute.
    Information per minute: mean answers × mean claims / design effect, times KL(base + shift || base)."""
    if false_alarms_per_day <= 0:
        return math.inf
    sizes = np.arange(1, MAX_CLAIMS + 1)
    claims, claims_sq = sizes.mean(), (sizes * sizes).mean()
    effective_claims = rate * claims / (1 + RHO * (claims_sq / claims - 1))
    p0, p1 = BASE_RATE, BASE_RATE + shift
    kl = p1 * math.log(p1 / p0) + (1 - p1) * math.log((1 - p1) / (1 - p0))
    return math.log(1440 / false_alarms_per_day) / (effective_claims * kl)


if __name__ == "__main__":
    raise SystemExit(main())
