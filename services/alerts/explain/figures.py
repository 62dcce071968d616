"""An alert's figures and sentences as every surface writes them (CLI, pages, Alertmanager, runbooks).

``rate``, ``expected``, ``baseline`` and ``delta`` are shares or events a minute (``Alert.unit``); the
input-health kinds carry a few more figures in ``details``. Each is put into words here, once, so the
terminal, the page and the page that wakes someone up never disagree. So is a route's expectation
(``expected_text``; services/alerts/detection/expectations.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import Any

from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    AGREEMENT_KIND,
    CARDINALITY_KIND,
    REJECTED_KIND,
    SILENT_KIND,
    UNITS,
)
from services.core.numbers import pct, pts

# What `claims` counts for each kind (the drift kinds count claims).
COUNTED = {
    SILENT_KIND: "events",
    REJECTED_KIND: "events",
    ABSTENTION_KIND: "answers",
    AGREEMENT_KIND: "labels",
    CARDINALITY_KIND: "events",
}


def figure(value: float | None, unit: str | None = "share", change: bool = False, missing: str = "—") -> str:
    """``12.5%``, ``41.0/min`` or a burn rate ``14.4x``; a ``change`` (a delta) is signed: ``+2.0 pts``, ``-38.2/min``,
    ``+1.6x``.

    ``unit`` None is a share: alerts stored before units were all shares.
    """
    unit = unit or "share"
    if unit not in UNITS:
        raise ValueError(f"alert unit {unit!r} is unknown; use one of {', '.join(UNITS)}")
    if value is None:
        return missing
    if unit == "per_minute":
        return f"{value:+,.1f}/min" if change else f"{value:,.1f}/min"
    if unit == "burn":  # a multiple of the error budget's pace
        return f"{value:+,.1f}x" if change else f"{value:,.1f}x"
    return pts(value) if change else pct(value)


def counted(kind: str) -> str:
    """What the alert's ``claims`` figure counts: claims, events, answers or labels."""
    return COUNTED.get(kind, "claims")


def _share(value: float | None) -> str:
    return figure(value, "share", missing="n/a")


def served_sentence(details: Mapping[str, Any]) -> str:
    """abstention_rise, the served share: ``62.0% of answers (71.0% before)``; empty when unknown."""
    now, before = details.get("served_share"), details.get("served_share_before")
    if now is None:
        return ""
    return f"{_share(now)} of answers ({_share(before)} before)"


def hallucination_sentence(details: Mapping[str, Any]) -> str:
    """abstention_rise: what the hallucination rate did meanwhile. When it fell, the gaming case is said plainly."""
    now, before = details.get("hallucination_rate"), details.get("hallucination_rate_before")
    if now is None or before is None:
        return ""
    if details.get("hallucination_fell"):
        return (
            f"the hallucination rate fell from {_share(before)} to {_share(now)} at the same time: "
            "abstaining may be hiding failures (the gaming case)"
        )
    return f"the hallucination rate did not fall ({_share(before)} before, {_share(now)} now)"


def refused_sentence(details: Mapping[str, Any]) -> str:
    """route_cardinality: what the route bound refused, and the producer sending most of it."""
    head = (
        f"{details.get('refused_events', 0):,} events of {details.get('refused_routes', 0):,} new routes refused "
        f"over routes.max_active ({details.get('max_active', 0):,})"
    )
    sources = details.get("sources") or []
    if not sources:
        return head
    top = sources[0]
    return (
        f"{head}; most from {top['source']} ({top['events']:,} events, {top['routes']:,} routes, "
        f"e.g. {top['example']!r})"
    )


def other_sources(details: Mapping[str, Any]) -> list[str]:
    """route_cardinality: the producers after the first, one phrase each."""
    return [
        f"{s['source']} ({s['events']:,} events, {s['routes']:,} routes, e.g. {s['example']!r})"
        for s in (details.get("sources") or [])[1:]
    ]


REFUSED_REMEDY = (
    "Routes already active are stored as before; the refused ones have no rates and no alerts. A "
    "producer that puts request ids or other unbounded values into the route is the usual cause: fix "
    "it, or raise routes.max_active if the routes are real."
)


def dlq_command(route: str, quote: Callable[[str], str] = shlex.quote, cli: str = "claimwatch") -> str:
    """The command that lists the route's dead letters (``quote`` makes the route and ``cli``, how the reader runs
    claimwatch, one shell word each)."""
    return f"{quote(cli)} dlq --route {quote(route)}"


def expected_text(entry: dict[str, Any]) -> str:
    """The expectation as every surface writes it: ``4.6%``; while under the day of history a time-of-day
    expectation needs, the recent level the detector compares with (and its alerts carry), marked
    ``6.4% (learning, 5 h)``, or ``learning`` with no level yet; ``—``: the drift evaluator has not evaluated it."""
    expected, rise = entry.get("expected"), entry.get("detectable_rise")
    sees = "" if rise is None or expected is None else f"; sees {pts(rise)} in 1 h"
    if entry.get("learning"):
        hours = entry.get("history_hours")
        if expected is None:
            return "learning" if hours is None else f"learning ({hours} h of history)"
        return f"{figure(expected)} (learning{'' if hours is None else f', {hours} h'}{sees})"
    return "—" if expected is None else figure(expected) + (f" ({sees[2:]})" if sees else "")
