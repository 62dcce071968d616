"""The one way figures are written (services/core/numbers.py)."""

from __future__ import annotations

import pytest

from services.core.numbers import interval_text, pct, pts, utc_minute


@pytest.mark.parametrize(
    "value, text",
    [
        (0.023, "+2.3 pts"),
        (-0.004, "-0.4 pts"),
        (-0.0001, "+0.0 pts"),
        (-0.0004999, "+0.0 pts"),
        (0.0, "+0.0 pts"),
        (None, "—"),
    ],
)
def test_a_change_is_signed_and_never_minus_zero(value, text):
    """The alerts page read "rise +5.0 pts = mix -0.0 pts + rate +5.0 pts"."""
    assert pts(value) == text


def test_shares_intervals_and_moments():
    assert (pct(0.1318), interval_text(0.123, 0.141)) == ("13.2%", "12.3%–14.1%")
    assert utc_minute("2026-12-05T02:27:45.334445+00:00") == "2026-12-05 02:27 UTC"
