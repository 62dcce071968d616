"""What a pass's alerts ask of the store, read after the step (services/alerts/evaluation/step.py): the version
changes around a drift or mix alert's onset when it changes state, and the rule most of a dead-letter alert's
window broke when its figures are fresh. One read per ask, as many as a step that read them on the way made."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from services.alerts.evaluation.step import TOP_RULE_KEYS, Ask, Stepped, SuspectsAsk, TopRuleAsk
from services.alerts.explain.suspects import suspect_changes
from services.alerts.lifecycle.alert import Alert
from services.rates.intervals import Counts
from services.store.dlq import DeadLetterRepository

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)
SUSPECT_LOOKBACK = timedelta(hours=2)


class RouteSlices(Protocol):
    """What the suspects read of the rate buckets (services.store.rates.RateRepository)."""

    def route_slices(self, route: str, start: datetime, end: datetime) -> list[dict[str, Any]]: ...


class Enrichment:
    """Answers a step's asks from the rate buckets and the dead letters, and puts the answers into its alerts."""

    def __init__(self, rates: RouteSlices, dead_letters: DeadLetterRepository):
        self.rates = rates
        self.dead_letters = dead_letters

    def enrich(self, stepped: Stepped) -> Stepped:
        """``stepped`` with its asks answered in the transitions and open alerts they hold for: an alert's version
        of a minute takes the latest ask of its route and kind up to that minute (each version's ``updated_at``)."""
        if not stepped.asks:
            return stepped
        answered: dict[tuple[str, str], list[tuple[Ask, Any]]] = {}
        for ask in stepped.asks:
            answer = self.suspects(ask) if isinstance(ask, SuspectsAsk) else self.top_rule(ask)
            answered.setdefault((ask.route, ask.kind), []).append((ask, answer))

        def filled(alert: Alert) -> Alert:
            at = alert.updated_at
            assert at is not None  # the step gives every version the minute it was stepped at
            held = [(ask, answer) for ask, answer in answered.get((alert.route, alert.kind), ()) if ask.minute <= at]
            if not held:
                return alert
            ask, answer = held[-1]
            if isinstance(ask, SuspectsAsk):
                return replace(alert, suspect_changes=answer)
            return replace(alert, details={**_without_top_rule(alert.details), **answer})

        return Stepped(
            [filled(a) for a in stepped.transitions],
            {key: filled(a) for key, a in stepped.open.items()},
            stepped.routes,
        )

    def suspects(self, ask: SuspectsAsk) -> tuple[dict[str, Any], ...]:
        """Which version values moved in share around the alert's onset (services/alerts/explain/suspects.py)."""
        rows_before = self.rates.route_slices(ask.route, ask.onset - SUSPECT_LOOKBACK, ask.onset - MINUTE)
        rows_after = self.rates.route_slices(ask.route, ask.onset, ask.minute)

        def aggregate(rows: list[dict[str, Any]]) -> dict[tuple[str, str], Counts]:
            return {(r["dim"], r["value"]): Counts.from_row(r) for r in rows}

        try:
            found = suspect_changes(aggregate(rows_before), aggregate(rows_after))
        except ValueError as exc:
            log.warning("suspect changes for %s unavailable: %s", ask.route, exc)
            return ()
        return tuple(s.as_dict() for s in found)

    def top_rule(self, ask: TopRuleAsk) -> dict[str, Any]:
        """The rule most of the window's dead letters broke, with a sample and its source (none: no dead letter)."""
        found = next(
            (r for r in self.dead_letters.rejected_routes(ask.start, ask.minute) if r["route"] == ask.route), None
        )
        if found is None:
            return {}
        # The rule's share of the window's dead letters, of the ones the detector counted: a dead letter that lands
        # after its minute was evaluated is in the store's count but not the alert's, and the page must not say
        # "416 of 416 events dead-lettered; top rule (419 events)".
        counted = found["rejected"] if ask.counted is None else ask.counted
        return {
            "top_rule": found["rule"],
            "top_rule_count": round(found["rule_count"] / found["rejected"] * counted),
            "sample_reason": found["sample"]["reason"],
            "sample_source": found["sample"]["source"],
        }


def _without_top_rule(details: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in details.items() if k not in TOP_RULE_KEYS}
