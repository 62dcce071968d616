"""Run lengths of a CUSUM: the threshold a stated false-alarm rate asks for, and the delay a rise then takes.

A route's minute rates are taken as normal around the expectation, with the standard deviation of a minute
(``minute_sd``: binomial over the route's claims a minute, inflated by answer clustering). A CUSUM tuned for a rise
``design`` sums each minute's log-likelihood ratio; in units of the minute's standard deviation its increments have
mean ``d - k`` for a true rise ``d`` and reference ``k = design / 2``. Siegmund's approximation gives the average run
length at a threshold ``h`` (in the same units; b = h + 1.166 corrects for the overshoot):

    ARL(m) = (exp(-2 m b) + 2 m b - 1) / (2 m^2),  m = the increments' mean; b^2 at m = 0.

Siegmund's approximation overstates the run length when one minute is a large share of the threshold (a busy
route: at 500 answers a minute by 1.4 times), so where the reference is large the threshold is corrected by the
exact run length of a discretised CUSUM (Brook and Evans' Markov chain), computed once per rounded (k, h).

The expectation is itself estimated: its error (``error_sd``, in the same units) shifts the in-control mean, and the
false-alarm rate is averaged over it (Gauss-Hermite), so a route with a thin history gets the higher threshold its
uncertain expectation needs. Everything is vectorised over routes. bench/oracle.py measures the detector against
a CUSUM that knows the true rate, with these same formulas.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import ndtr

OVERSHOOT = 1.166  # Siegmund's correction for the CUSUM's overshoot of its threshold (normal increments)
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(9)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()  # expectations over a standard normal
_BISECTIONS = 40
EXACT_FROM_K = 0.5  # below this reference Siegmund's run length is within 2% of the exact one
_STATES = 120  # the Markov chain's states over [0, h)


def average_run_length(mean: np.ndarray | float, h: np.ndarray | float) -> np.ndarray:
    """Siegmund's average run length of a CUSUM with standardised increments of ``mean`` and threshold ``h``."""
    m, b = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(h, dtype=float) + OVERSHOOT)
    small = np.abs(m) < 1e-9
    safe = np.where(small, 1.0, m)
    x = np.minimum(-2 * safe * b, 700.0)
    arl = (np.exp(x) + 2 * safe * b - 1) / (2 * safe * safe)
    out: np.ndarray = np.where(small, b * b, arl)
    return out


def minute_sd(rate: np.ndarray | float, claims_per_minute: np.ndarray | float, deff: np.ndarray | float) -> np.ndarray:
    """The standard deviation of one minute's claim-level rate: binomial, inflated by the design effect."""
    p, claims = np.asarray(rate, dtype=float), np.maximum(np.asarray(claims_per_minute, dtype=float), 1e-9)
    out: np.ndarray = np.sqrt(p * (1 - p) * np.asarray(deff, dtype=float) / claims)
    return out


def false_alarms_per_minute(k: np.ndarray, h: np.ndarray, error_sd: np.ndarray | float = 0.0) -> np.ndarray:
    """The in-control alarm rate of a CUSUM with reference ``k`` and standardised threshold ``h``, averaged over an
    error of the expectation that is normal with ``error_sd`` (all in minute standard deviations)."""
    k, h, e = (np.asarray(a, dtype=float)[..., None] for a in (k, h, error_sd))
    rate = 1.0 / average_run_length(e * _NODES - k, h)
    return np.asarray((rate * _WEIGHTS).sum(axis=-1))


def exact_run_length(mean: float, h: float, states: int = _STATES) -> float:
    """The average run length from 0 of a CUSUM with standard normal increments of ``mean`` and threshold ``h``,
    by Brook and Evans' Markov chain on ``states`` cells of [0, h) and an atom at 0."""
    width = h / states
    at = np.r_[0.0, (np.arange(states) + 0.5) * width]  # the atom, then each cell's midpoint
    edges = np.arange(states + 1) * width
    below = ndtr(edges[None, :] - at[:, None] - mean)  # P(next <= edge | now)
    moves = np.concatenate([below[:, :1], np.diff(below, axis=1)], axis=1)  # to the atom, then to each cell
    return float(np.linalg.solve(np.eye(states + 1) - moves, np.ones(states + 1))[0])


@lru_cache(maxsize=65_536)
def _overstatement(k: float, h: float) -> float:
    """log(Siegmund's in-control run length / the exact one) at reference ``k``, threshold ``h`` (rounded)."""
    return float(np.log(average_run_length(-k, h)) - np.log(exact_run_length(-k, h)))


def _solve(k: np.ndarray, log_target: np.ndarray, error_sd: np.ndarray | float) -> np.ndarray:
    """The standardised threshold whose (Siegmund) alarm rate, averaged over the expectation's error, is
    exp(log_target) a minute."""
    low, high = np.zeros_like(k), np.full_like(k, 1e4)
    for _ in range(_BISECTIONS + 20):  # the range is wide: 60 halvings leave it far below 1e-9
        mid = (low + high) / 2
        too_many = np.log(false_alarms_per_minute(k, mid, error_sd)) > log_target
        low, high = np.where(too_many, mid, low), np.where(too_many, high, mid)
    return high


def threshold(
    delta: np.ndarray | float, minutes_per_false_alarm: float, error_sd: np.ndarray | float = 0.0
) -> np.ndarray:
    """The CUSUM threshold, in log-likelihood-ratio units, whose alarm rate is one per ``minutes_per_false_alarm``
    for a route whose design rise is ``delta`` minute standard deviations (expectation error ``error_sd``)."""
    shape = np.shape(delta)
    design: np.ndarray = np.atleast_1d(np.maximum(np.asarray(delta, dtype=float), 1e-6))
    k = design / 2
    errors: np.ndarray = np.broadcast_to(np.asarray(error_sd, dtype=float), k.shape)
    log_target = np.full_like(k, np.log(1.0 / minutes_per_false_alarm))
    h = _solve(k, log_target, errors)
    busy: np.ndarray = k >= EXACT_FROM_K
    if busy.any():  # Siegmund overstates the run length here: ask it for that much longer a one
        rounded = np.round(k[busy], 2), np.round(h[busy], 1)
        excess = np.array([_overstatement(float(a), float(b)) for a, b in zip(*rounded)])
        log_target[busy] -= excess
        h[busy] = _solve(k[busy], log_target[busy], errors[busy])
    out: np.ndarray = (h * design).reshape(shape)
    return out


def delay(rise: np.ndarray | float, delta: np.ndarray | float, h: np.ndarray | float) -> np.ndarray:
    """Mean minutes to an alarm after a rise of ``rise`` minute standard deviations, for a CUSUM designed for
    ``delta`` with threshold ``h`` (log-likelihood-ratio units)."""
    delta = np.maximum(np.asarray(delta, dtype=float), 1e-6)
    return average_run_length(np.asarray(rise, dtype=float) - delta / 2, np.asarray(h, dtype=float) / delta)


def minimum_detectable_rise(delta: np.ndarray | float, h: np.ndarray | float, within_minutes: float) -> np.ndarray:
    """The smallest rise, in minute standard deviations, detected within ``within_minutes`` on average."""
    delta = np.maximum(np.asarray(delta, dtype=float), 1e-6)
    h = np.asarray(h, dtype=float)
    low, high = np.zeros_like(delta + h), np.full_like(delta + h, 100.0)
    for _ in range(_BISECTIONS):
        mid = (low + high) / 2
        slow = delay(mid, delta, h) > within_minutes
        low, high = np.where(slow, mid, low), np.where(slow, high, mid)
    return high
