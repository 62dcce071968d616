"""The detection-delay limit a drift detector is measured against (issue 55): a CUSUM that knows the route's true
pre-change rate and design effect, tuned for the shift it looks for, at a stated false-alarm rate.

Each minute's claim-level rate is taken as normal around the true rate, with the variance of a rate over ``claims``
claims inflated by answer clustering (``deff``). The CUSUM sums the log-likelihood ratio of "rate + shift" against
"rate": in units of the minute's standard deviation its increments have mean -k before the change and shift - k
after, with k = shift / 2 (the optimal reference for that shift). Siegmund's approximation gives its average run
length at threshold h (with b = h + 1.166, the overshoot correction):

    ARL(m) = (exp(-2 m b) + 2 m b - 1) / (2 m^2),  m = the increments' mean; b^2 at m = 0.

The threshold is the one whose in-control run length is the allowed minutes between false alarms; the delay is the
run length after the change. Nothing here knows claimwatch's detector: it is the yardstick, not a rival.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import brentq

OVERSHOOT = 1.166  # Siegmund's correction for the CUSUM's overshoot of its threshold (normal increments)
MINUTES_PER_DAY = 24 * 60


def average_run_length(mean: float, h: float) -> float:
    """Siegmund's ARL of a CUSUM with standardized normal increments of ``mean``, threshold ``h``."""
    b = h + OVERSHOOT
    if abs(mean) < 1e-9:
        return b * b
    return (math.exp(-2 * mean * b) + 2 * mean * b - 1) / (2 * mean * mean)


def threshold_for(in_control_minutes: float, k: float) -> float:
    """The threshold h whose in-control run length (increments of mean -k) is ``in_control_minutes``."""
    return brentq(lambda h: average_run_length(-k, h) - in_control_minutes, 0.0, 200.0)


def minute_sd(rate: float, claims_per_minute: float, deff: float) -> float:
    """The standard deviation of one minute's claim-level rate: binomial, inflated by the design effect."""
    return math.sqrt(rate * (1 - rate) * deff / claims_per_minute)


def design_effect(mean_claims: float, mean_claims_sq: float, icc: float) -> float:
    """Kish's design effect of answers of varying size: 1 + (E[m^2] / E[m] - 1) x the intra-answer correlation."""
    return 1 + (mean_claims_sq / mean_claims - 1) * icc


@dataclass(frozen=True)
class Oracle:
    """The limit for a route: its true rate, claims a minute and design effect, and the false alarms allowed."""

    rate: float
    claims_per_minute: float
    deff: float
    minutes_per_false_alarm: float  # e.g. 60 days: one false alarm per route per 60 days

    def delay(self, shift: float) -> float:
        """Minutes from the change to the alarm, on average, for a rise of ``shift`` (a share: 0.03 is +3 points)."""
        standardized = shift / minute_sd(self.rate, self.claims_per_minute, self.deff)
        k = standardized / 2
        h = threshold_for(self.minutes_per_false_alarm, k)
        return average_run_length(standardized - k, h)
