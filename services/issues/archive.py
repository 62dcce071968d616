"""Archiving, as Sentry does it: an archived issue leaves the default list until its condition is met.

Three forms: until it escalates (the default; the issue list's escalating test, services/issues/priority.py),
until a time (archived for a duration), or until N more failing claims (observed after it was archived). The
condition is plain data kept on the issue; ``wake_reason`` says whether it is met, from figures handed to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from services.issues.priority import is_escalating

ESCALATING, DURATION, CLAIMS = "escalating", "duration", "claims"
FORMS = (ESCALATING, DURATION, CLAIMS)


@dataclass(frozen=True)
class Archive:
    until: str  # one of FORMS
    since: datetime
    ends_at: datetime | None = None  # DURATION
    claims: int | None = None  # CLAIMS: this many more failing claims wake it

    @classmethod
    def start(cls, now: datetime, duration: timedelta | None = None, claims: int | None = None) -> Archive:
        """Until escalating, unless a duration or a number of claims is given (not both)."""
        if duration is not None and claims is not None:
            raise ValueError("archive for a duration or until a number of claims, not both")
        if duration is not None:
            if duration <= timedelta(0):
                raise ValueError("the archive's duration must be positive, e.g. 2h or 7d")
            return cls(DURATION, now, ends_at=now + duration)
        if claims is not None:
            if claims < 1:
                raise ValueError("archive until at least 1 more claim")
            return cls(CLAIMS, now, claims=claims)
        return cls(ESCALATING, now)

    def wake_reason(self, now: datetime, claims_since: int, hours_ago: Mapping[int, int]) -> str | None:
        """Why the issue wakes up now, or None. ``claims_since``: its failing claims observed after ``since``;
        ``hours_ago``: its claims per whole hour before ``now`` (0 is the last hour)."""
        if self.until == DURATION:
            assert self.ends_at is not None, "a duration archive has an end"
            return f"its archive ended at {self.ends_at.isoformat()}" if now >= self.ends_at else None
        if self.until == CLAIMS:
            assert self.claims is not None, "a claims archive has a count"
            return (
                f"{claims_since} more failing claims (woken at {self.claims})" if claims_since >= self.claims else None
            )
        # The escalation must be new: the hour it is measured on lies wholly after the archive.
        if now - self.since >= timedelta(hours=1) and is_escalating(hours_ago):
            return f"escalating: {hours_ago.get(0, 0)} failing claims in the last hour"
        return None

    def describe(self) -> str:
        if self.until == DURATION:
            return f"until {self.ends_at:%Y-%m-%d %H:%M} UTC"
        if self.until == CLAIMS:
            return f"until {self.claims} more claims"
        return "until escalating"

    def as_dict(self) -> dict[str, Any]:
        return {
            "until": self.until,
            "since": self.since.isoformat(),
            "ends_at": self.ends_at.isoformat() if self.ends_at else None,
            "claims": self.claims,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Archive:
        ends = data.get("ends_at")
        return cls(
            data["until"],
            datetime.fromisoformat(data["since"]),
            datetime.fromisoformat(ends) if ends else None,
            data.get("claims"),
        )
