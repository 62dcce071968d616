"""Who owns what: ``[[owners]]`` rules match a route and version patterns to a team, first match wins.

A rule's patterns are shell globs (``billing-*``); every pattern a rule gives must match, and a version
pattern matches only a subject that has that version. Nothing matching: the default owner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

VERSION_KEYS = ("corpus", "model", "prompt")  # the versions a rule can match and a resolve records
DEFAULT_TEAM = "on-call"  # the team of what no rule matches, unless the settings name another


@dataclass(frozen=True)
class Owner:
    team: str
    owner: str = ""  # a person or handle within the team, when the rule names one

    def labels(self) -> dict[str, str]:
        """Alertmanager labels: ``team``, and ``owner`` when set."""
        return {"team": self.team, **({"owner": self.owner} if self.owner else {})}


@dataclass(frozen=True)
class OwnerRule:
    owner: Owner
    route: str | None = None
    versions: Mapping[str, str] | None = None  # VERSION_KEYS -> pattern

    def matches(self, route: str, versions: Mapping[str, str]) -> bool:
        if self.route is not None and not fnmatchcase(route, self.route):
            return False
        return all(
            key in versions and fnmatchcase(versions[key], pattern) for key, pattern in (self.versions or {}).items()
        )


class OwnerRules:
    def __init__(self, rules: Sequence[OwnerRule] = (), default: Owner = Owner(DEFAULT_TEAM)):
        self.rules = tuple(rules)
        self.default = default

    def of(self, route: str, versions: Mapping[str, str] | None = None) -> Owner:
        """The first rule's owner that matches, else the default."""
        versions = versions or {}
        return next((r.owner for r in self.rules if r.matches(route, versions)), self.default)

    def slo_labels(self, slo) -> dict[str, str]:
        """The owner labels of an SLO (services.rates.slo.Slo): its routes' glob read as a route."""
        return self.of(slo.routes).labels()

    def slo_team(self, slo) -> str:
        return self.of(slo.routes).team

    def alert_labels(self, alert) -> dict[str, str]:
        """The owner labels of an alert (services.alerts.lifecycle.alert.Alert): its route and its top suspect
        version."""
        top = next(iter(alert.suspect_changes or ()), None) or {}
        versions = {top["key"]: str(top.get("value"))} if top.get("key") in VERSION_KEYS else {}
        return self.of(alert.route, versions).labels()
