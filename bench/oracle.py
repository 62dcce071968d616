"""The detection-delay limit a drift detector is measured against (issue 55): a CUSUM that knows the route's true
pre-change rate and design effect, tuned for the very shift it looks for, at the stated false-alarm rate.

Each minute's claim-level rate is taken as normal around the true rate, with the variance of a rate over the
minute's claims inflated by answer clustering (``deff``). Its threshold is the one whose in-control run length is
the allowed minutes between false alarms, and its delay the run length after the change (Siegmund's approximation:
services/alerts/detection/run_length.py, the same computation the shipped detector sets its own thresholds with,
here without any error in the expectation). With a daily volume swing the delay is averaged over the day: a rise in
the trough, at half the volume, takes longer. Nothing here knows claimwatch's detector: it is the yardstick.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.alerts.detection.run_length import average_run_length, delay, minute_sd, threshold

__all__ = ["MINUTES_PER_DAY", "Oracle", "average_run_length", "design_effect", "minute_sd"]
MINUTES_PER_DAY = 24 * 60
PHASES = np.linspace(0, 2 * np.pi, 96, endpoint=False)


def design_effect(mean_claims: float, mean_claims_sq: float, icc: float) -> float:
    """Kish's design effect of answers of varying size: 1 + (E[m^2] / E[m] - 1) x the intra-answer correlation."""
    return 1 + (mean_claims_sq / mean_claims - 1) * icc


@dataclass(frozen=True)
class Oracle:
    """The limit for a route: its true rate, claims a minute (the daily mean) and design effect, the false alarms
    allowed, and its daily volume swing (0.5: ±50%)."""

    rate: float
    claims_per_minute: float
    deff: float
    minutes_per_false_alarm: float  # e.g. 90 days: one false alarm per route per 90 days
    volume_swing: float = 0.0

    def delay(self, shift: float) -> float:
        """Minutes from the change to the alarm, on average over the day, for a rise of ``shift`` (0.03: +3 points)."""
        sd = float(minute_sd(self.rate, self.claims_per_minute, self.deff))
        h = threshold(shift / sd, self.minutes_per_false_alarm)
        sd_now = minute_sd(self.rate, self.claims_per_minute * (1 + self.volume_swing * np.sin(PHASES)), self.deff)
        return float(np.mean(delay(shift / sd_now, shift / sd_now, h)))
