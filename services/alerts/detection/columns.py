"""Where each figure sits in the drift engines' arrays, and a detector's states.

A minute's sums are ``COUNT_FIELDS`` in order (services/store/rates.py), of which an engine detects on the first
six; after them an engine's sums carry three expected-failure columns. The time-of-day history keeps three columns
of its own.
"""

from __future__ import annotations

EVENTS, CLAIMS, FAILED, CLAIMS_SQ, FAILED_SQ, FAILED_CLAIMS = range(6)
CORE_FIELDS = 6  # the first six COUNT_FIELDS are all an engine needs to detect
TESTED, SEASONAL, MIXED = range(3)  # the expected-failure columns after the input fields
SEASON_CLAIMS, SEASON_FAILED, SEASON_MIX = range(3)  # the columns of the time-of-day history
OK, PENDING, FIRING = 0, 1, 2
STATE_NAMES = ("ok", "pending", "firing")
