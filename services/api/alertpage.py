"""A page per alert (`/alerts/{id}`): what happened to it, in order, and the range its chart shows.

The handler lives in services/api/pages.py; these are the page's facts, testable without a request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from services.store.convert import parse_ch_time

CHART_LEAD = timedelta(hours=1)  # the chart starts this long before the alert's onset (or pending)
MAX_CHART = timedelta(days=31)  # as long as a route's chart may be


@dataclass(frozen=True)
class Moment:
    at: datetime
    what: str


def _time(text: str | None) -> datetime | None:
    return None if not text else parse_ch_time(text)


def timeline(alert: dict[str, Any], silences: list[dict[str, Any]]) -> list[Moment]:
    """Onset, pending, firing, resolved (its transitions), the ack and the silences that held it, oldest first."""
    moments = []
    if (onset := _time(alert.get("onset"))) is not None:
        moments.append(Moment(onset, "onset: the rise began (estimated)"))
    for t in alert.get("transitions") or []:
        moments.append(Moment(parse_ch_time(t["at"]), t["state"]))
    if (acked := _time(alert.get("acked_at"))) is not None:
        note = f": {alert['ack_note']}" if alert.get("ack_note") else ""
        moments.append(Moment(acked, f"acked by {alert.get('acked_by')}{note}"))
    for s in silences:
        if s["silence_id"] in alert.get("silenced_by", ()):
            moments.append(Moment(parse_ch_time(s["starts_at"]), f"silenced by {s['silence_id']} ({s['comment']})"))
            ended = "ended early by " + s["ended_by"] if s.get("ended_by") else "silence ends"
            moments.append(Moment(parse_ch_time(s["ends_at"]), f"{ended} ({s['silence_id']})"))
    return sorted(moments, key=lambda m: m.at)


def chart_range(alert: dict[str, Any], now: datetime) -> tuple[str, datetime]:
    """The chart's window (as /api/routes takes it) and its end: from CHART_LEAD before the onset (or pending) to
    the resolve, or now."""
    start = (_time(alert.get("onset")) or parse_ch_time(alert["pending_since"])) - CHART_LEAD
    end = _time(alert.get("ends_at")) or now
    minutes = math.ceil(min(max(end - start, CHART_LEAD), MAX_CHART) / timedelta(minutes=1))
    return f"{minutes}m", end
