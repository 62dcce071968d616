"""Which alerts a list shows (by state now, kind, route and team), and which a silence would match before it is
made (its preview). The API, the CLI, the pages and the MCP tools all filter here."""

from __future__ import annotations

from dataclasses import dataclass

from services.alerts.lifecycle.kinds import STATES
from services.alerts.oncall.rules import RULE_KINDS

ACTIVE = "active"  # pending or firing: what may still need a person
ACTIVE_STATES = ("pending", "firing")
STATE_FILTERS = (ACTIVE, *STATES)  # active, pending, firing, resolved
LIST_LIMIT = 500  # the newest alerts a list holds (services/store/alerts.py), after its filters


def _choice(field: str, value: str | None, choices: tuple[str, ...]) -> str | None:
    if value is not None and value not in choices:
        raise ValueError(f"{field} {value[:100]!r} is not one of the choices: {', '.join(choices)}")
    return value


def _text(field: str, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError(f"{field}: give a name, or leave it out for every {field}")
    return value


@dataclass(frozen=True)
class AlertFilter:
    """What a list keeps: ``state`` one of STATE_FILTERS (as of now), ``kind`` one of the rules' kinds, ``route`` and
    ``team`` exact names; None keeps every value. An unknown state or kind is refused, naming the choices."""

    state: str | None = None
    kind: str | None = None
    route: str | None = None
    team: str | None = None

    def __post_init__(self) -> None:
        _choice("state", self.state, STATE_FILTERS)
        _choice("kind", self.kind, RULE_KINDS)
        _text("route", self.route)
        _text("team", self.team)

    @property
    def states(self) -> tuple[str, ...] | None:
        """The states kept (None: every state)."""
        if self.state is None:
            return None
        return ACTIVE_STATES if self.state == ACTIVE else (self.state,)

    def keeps(self, state: str, kind: str, route: str, team: str | None) -> bool:
        """Whether an alert in ``state`` now, of ``kind`` on ``route`` and owned by ``team``, passes every filter
        (the store applies all but the team's before its bound; this checks them all on what it read)."""
        states = self.states
        return (
            (states is None or state in states)
            and self.kind in (None, kind)
            and self.route in (None, route)
            and self.team in (None, team)
        )

    def given(self) -> dict[str, str]:
        """The filters set, in order: what a page or a reply says it shows."""
        return {
            k: v
            for k, v in (("state", self.state), ("kind", self.kind), ("route", self.route), ("team", self.team))
            if v
        }

    def described(self) -> str:
        """``state active, kind route_silent``, or ``no filter``."""
        return ", ".join(f"{k} {v}" for k, v in self.given().items()) or "no filter"


__all__ = ["ACTIVE", "ACTIVE_STATES", "LIST_LIMIT", "STATE_FILTERS", "AlertFilter"]
