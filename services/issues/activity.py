"""An issue's activity: its history entries (who did what, when), and the triage fields every view shows.

Every change people make, every note and merge, and what claimwatch does by itself (created, regressed, woke
up, escalating) is one entry ``{"at", "event", "by", ...}`` in the issue's history; claimwatch's own are by
``SYSTEM``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from clustering.issue import RESOLVED, IssueRecord
from services.issues.archive import Archive
from services.issues.owners import OwnerRules

SYSTEM = "claimwatch"
ARCHIVED = "archived"  # the state an archived issue shows, and the list filter that finds it
MERGED = "merged"  # the state a merged issue shows (lists leave merged issues out)
NOTES_SHOWN = 3  # the runbook's latest notes
ACTIVITY_PAGE = 50  # activity entries an issue read gives by default
MAX_ACTIVITY_PAGE = 200


def entry(now: datetime, event: str, by: str = SYSTEM, **details) -> dict:
    return {"at": now.isoformat(), "event": event, "by": by, **details}


@dataclass(frozen=True)
class ActivityPage:
    """Which of an issue's activity entries (newest first) a read gives: ``limit`` from ``offset``. Notes have no
    bound in number, so neither would an issue read that gave them all (400 notes made one 3.5 MB)."""

    offset: int = 0
    limit: int = ACTIVITY_PAGE

    def of(self, entries: list[dict]) -> dict:
        return {
            "activity": entries[self.offset : self.offset + self.limit],
            "activity_total": len(entries),
            "activity_offset": self.offset,
        }


def activity(record: IssueRecord) -> list[dict]:
    """Every entry, newest first, each with who (``SYSTEM`` when claimwatch did it) and ``summary``: what it says."""
    return [{**e, "by": e.get("by") or SYSTEM, "summary": describe(e)} for e in reversed(record.history)]


def describe(entry: Mapping) -> str:
    """One entry in words: the event, a note's text in quotes, then what else it carries."""
    details = {
        k: v
        for k, v in entry.items()
        if k not in ("at", "event", "by", "text", "summary") and v not in (None, "", {}, [])
    }
    said = f'"{entry["text"]}"' if entry.get("text") else ""
    rest = ", ".join(
        _plain(v) if str(v).startswith(k) else f"{k.replace('_', ' ')} {_plain(v)}"  # until …
        for k, v in details.items()
    )
    return " ".join(p for p in (entry.get("event", ""), said, f"({rest})" if rest else "") if p)


def _plain(value) -> str:
    if isinstance(value, Mapping):
        return " ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def latest_notes(record: IssueRecord, n: int = NOTES_SHOWN) -> list[dict]:
    return [e for e in activity(record) if e.get("event") == "note"][:n]


def entries_between(record: IssueRecord, after: datetime, until: datetime, events: tuple[str, ...]) -> list[dict]:
    return [e for e in record.history if e.get("event") in events and after < datetime.fromisoformat(e["at"]) <= until]


def dominant_route(record: IssueRecord) -> str | None:
    return max(sorted(record.routes), key=lambda r: record.routes[r], default=None)


def view_state(record: IssueRecord) -> str:
    """``merged`` once merged into another issue (its claims continue there: it is not a fixed issue, whatever
    state it was stored with); ``archived`` while an archive holds (a resolved issue shows resolved); else the
    clustering's state. The page, ``issues show`` and the API all show this one."""
    if record.merged_into:
        return MERGED
    return ARCHIVED if record.archive and record.state != RESOLVED else record.state


def triage_fields(record: IssueRecord, owners: OwnerRules) -> dict:
    """Team and owner (the assignee, else the dominant route's owner, else its team), the archive, the ticket."""
    owner = owners.of(dominant_route(record) or "")
    archive = Archive.from_dict(record.archive) if record.archive else None
    return {
        "team": owner.team,
        "owner": record.assignee or owner.owner or owner.team,
        "assignee": record.assignee,
        "archive": None if archive is None else {**archive.as_dict(), "text": archive.describe()},
        "ticket_url": record.ticket_url,
        "resolved_in": dict(record.resolved_in),
    }


def wanted(view: Mapping, state: str | None, owner: str | None, assignee: str | None) -> bool:
    """The issue list's filters: archived issues only when asked for by state; owner matches team or owner."""
    if (state is None and view["state"] == ARCHIVED) or (state is not None and view["state"] != state):
        return False
    return (owner is None or owner in (view["team"], view["owner"])) and (
        assignee is None or view["assignee"] == assignee
    )
