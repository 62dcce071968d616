"""What a decoder says about an input it refuses: the rule broken, where, and why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Problem:
    rule: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "path": self.path, "message": self.message}


@dataclass(frozen=True)
class Rejection:
    """Why an input is not a valid event; ``problems[0]`` is the reason it is counted under.

    ``route`` and ``observed_at`` are read leniently from what the input holds, so a dead letter can be
    counted per route and minute; None where it holds no usable value."""

    problems: tuple[Problem, ...]
    event_id: str | None = None
    route: str | None = None
    observed_at: datetime | None = None

    @property
    def rule(self) -> str:
        return self.problems[0].rule

    @property
    def reason(self) -> str:
        return str(self.problems[0])

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "reason": self.reason, "problems": [p.to_dict() for p in self.problems]}


class ContractError(ValueError):
    """Raised by helpers that refuse an event at the source (producer, adapters)."""

    def __init__(self, rejection: Rejection):
        super().__init__(rejection.reason)
        self.rejection = rejection


def reject(
    rule: str,
    path: str,
    message: str,
    *,
    event_id: str | None = None,
    route: str | None = None,
    observed_at: datetime | None = None,
) -> Rejection:
    return Rejection((Problem(rule, path, message),), event_id=event_id, route=route, observed_at=observed_at)
