"""One named issue as it persists between runs, and its pure converters to and from a store row."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

NEW, ONGOING, REGRESSED, RESOLVED = "new", "ongoing", "regressed", "resolved"
STATES = (NEW, ONGOING, REGRESSED, RESOLVED)
COMPLETE_SAMPLE = 2**63 - 1  # sample_hash_cap of a sample that holds every member


def hash_of(claim_id: str) -> int:
    """Stable 63-bit hash of a claim id: orders the bottom-k member sketch."""
    return int.from_bytes(hashlib.blake2b(claim_id.encode(), digest_size=8).digest(), "big") >> 1


@dataclass(frozen=True)
class IssueRecord:
    issue_id: str
    name: str
    keywords: tuple[str, ...]
    config_name: str
    first_seen: datetime
    last_seen: datetime
    state: str = NEW
    size: int = 0  # members in the latest run that saw it
    hourly_counts: Mapping[str, int] = field(default_factory=dict)  # "YYYY-MM-DDTHH" UTC -> claims
    routes: Mapping[str, int] = field(default_factory=dict)  # route -> members in the latest run
    centroid: list[float] | None = None  # unit vector in the config's embedding space
    member_sample: tuple[str, ...] = ()  # bottom-k sketch of member ids by hash_of
    sample_hash_cap: int = COMPLETE_SAMPLE  # every member with hash_of(id) <= cap is in the sample
    exemplar_ids: tuple[str, ...] = ()
    triaged: bool = False
    merged_into: str | None = None
    split_from: str | None = None
    history: tuple[dict, ...] = ()  # {"at", "event": created|regressed|resolved|merged_into|absorbed|split_*}
    subtitle: str = ""  # keywords, verdict, route, stage, versions; ``name`` is the title (clustering/naming.py)
    # issue id -> link ratio of the two issues' claims' nearest neighbours, in the run that last saw both
    # (clustering/neighbours.py): evidence for suggested merges (services/issues/merges.py)
    neighbours: Mapping[str, float] = field(default_factory=dict)
    # Triage, set by people (services/triage): who works it, until when it is parked, where its ticket is, and
    # the versions current when it was resolved "in the next version" (it regresses only on another one).
    assignee: str = ""
    archive: Mapping[str, Any] | None = None  # services.issues.archive.Archive.as_dict()
    ticket_url: str = ""
    resolved_in: Mapping[str, str] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        """The ``issues`` row as plain values: times as aware datetimes (the store formats them), history as JSON
        text."""
        return {
            "issue_id": self.issue_id,
            "name": self.name,
            "subtitle": self.subtitle,
            "keywords": list(self.keywords),
            "config_name": self.config_name,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "state": self.state,
            "size": self.size,
            "hourly_counts": dict(self.hourly_counts),
            "routes": dict(self.routes),
            "centroid": list(self.centroid or []),
            "member_sample": list(self.member_sample),
            "sample_hash_cap": self.sample_hash_cap,
            "exemplar_ids": list(self.exemplar_ids),
            "triaged": int(self.triaged),
            "merged_into": self.merged_into or "",
            "split_from": self.split_from or "",
            "history": orjson.dumps(list(self.history)).decode(),
            "assignee": self.assignee,
            "archive": orjson.dumps(self.archive).decode() if self.archive else "",
            "ticket_url": self.ticket_url,
            "resolved_in": dict(self.resolved_in),
            "neighbours": dict(self.neighbours),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> IssueRecord:
        state = row.get("state") or NEW
        if state not in STATES:
            raise ValueError(f"issue {row.get('issue_id')!r}: state {state!r} is not one of {STATES}")
        history = row.get("history") or "[]"
        return cls(
            issue_id=row["issue_id"],
            name=row.get("name", ""),
            subtitle=row.get("subtitle") or "",
            keywords=tuple(row.get("keywords") or ()),
            config_name=row["config_name"],
            first_seen=_time(row["first_seen"]),
            last_seen=_time(row["last_seen"]),
            state=state,
            size=int(row.get("size") or 0),
            hourly_counts={k: int(v) for k, v in (row.get("hourly_counts") or {}).items()},
            routes={k: int(v) for k, v in (row.get("routes") or {}).items()},
            centroid=[float(x) for x in row["centroid"]] if row.get("centroid") else None,
            member_sample=tuple(row.get("member_sample") or ()),
            sample_hash_cap=int(row.get("sample_hash_cap") or COMPLETE_SAMPLE),
            exemplar_ids=tuple(row.get("exemplar_ids") or ()),
            triaged=bool(int(row.get("triaged") or 0)),
            merged_into=row.get("merged_into") or None,
            split_from=row.get("split_from") or None,
            history=tuple(orjson.loads(history) if isinstance(history, (str, bytes)) else history),
            assignee=row.get("assignee") or "",
            archive=orjson.loads(row["archive"]) if row.get("archive") else None,
            ticket_url=row.get("ticket_url") or "",
            resolved_in={k: str(v) for k, v in (row.get("resolved_in") or {}).items()},
            neighbours={k: float(v) for k, v in (row.get("neighbours") or {}).items()},
        )

    def to_line(self) -> dict[str, Any]:
        """The offline ISSUES.jsonl line."""
        return {
            "issue_id": self.issue_id,
            "name": self.name,
            "subtitle": self.subtitle,
            "size": self.size,
            "keywords": list(self.keywords),
            "exemplar_ids": list(self.exemplar_ids),
            "routes": list(self.routes),
            "state": self.state,
        }


def _time(value: Any) -> datetime:
    ts = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts
