"""What engineers do with issues (list, show, members, map, resolve, merge, runbook): API and CLI share it."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Callable

from clustering.issue import RESOLVED, IssueRecord
from runbooks import RunbookRenderer
from services.alerts.records import AlertRecords
from services.core.clock import utcnow
from services.core.errors import Conflict
from services.issues.records import IssueRecords
from services.issues.runbook_context import build_context
from services.store.rates import RateRepository

SORTS = {"last_seen", "first_seen", "count", "name"}


class IssuesService:
    def __init__(self, issues: IssueRecords, rates: RateRepository, alerts: AlertRecords,
                 base_url: str = "http://127.0.0.1:8080", template_dirs: list[Path] | None = None,
                 clock: Callable[[], datetime] = utcnow):
        self.issues = issues
        self.rates = rates
        self.alerts = alerts
        self.base_url = base_url.rstrip("/")
        self.renderer = RunbookRenderer(template_dirs or [])
        self.clock = clock

    def _view(self, r: IssueRecord, counts: dict) -> dict:
        c = counts.get(r.issue_id, {"count": r.size, "hourly": dict(r.hourly_counts)})
        hours = sorted(c["hourly"].items())[-24:]
        return {
            "issue_id": r.issue_id, "name": r.name, "state": r.state, "count": c["count"],
            "first_seen": r.first_seen.isoformat(), "last_seen": r.last_seen.isoformat(),
            "routes": sorted(r.routes, key=lambda k: -r.routes[k]), "keywords": list(r.keywords),
            "trend": [n for _, n in hours], "triaged": r.triaged, "config": r.config_name,
            "merged_into": r.merged_into, "runbook_url": f"{self.base_url}/issues/{r.issue_id}",
        }

    def list(self, *, state: str | None = None, route: str | None = None, q: str | None = None,
             sort: str = "last_seen", limit: int = 100) -> list[dict]:
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {sorted(SORTS)}, got {sort!r}")
        counts = self.issues.member_counts()
        views = [self._view(r, counts) for r in self.issues.load() if r.merged_into is None]
        views = [v for v in views if (state is None or v["state"] == state) and (route is None or route in v["routes"])
                 and (q is None or q.lower() in (v["name"] + " " + " ".join(v["keywords"])).lower())]
        reverse = sort != "name"
        views.sort(key=lambda v: (v[sort], v["issue_id"]), reverse=reverse)
        return views[:limit]

    def show(self, issue_id: str) -> dict:
        record = self.issues.get(issue_id)
        view = self._view(record, self.issues.member_counts())
        members = self.issues.members(issue_id, 200)
        exemplars = [m for m in members if m["claim_key"] in set(record.exemplar_ids)] or members[:5]
        return {**view, "exemplars": exemplars, "history": list(record.history), "split_from": record.split_from}

    def members(self, issue_id: str, limit: int = 200) -> list[dict]:
        self.issues.get(issue_id)
        return self.issues.members(issue_id, limit)

    def map(self, issue_id: str, neighbours: int = 4, per_issue: int = 150) -> dict:
        """The issue's members in 2-D, with the nearest issues (by centroid) around them for context."""
        import numpy as np

        record = self.issues.get(issue_id)
        others = [r for r in self.issues.load() if r.issue_id != issue_id and r.centroid and r.merged_into is None]
        if record.centroid and others:
            me = np.asarray(record.centroid)
            others.sort(key=lambda r: -float(np.dot(me, np.asarray(r.centroid))))
        shown = [issue_id] + [r.issue_id for r in others[:neighbours]]
        names = {r.issue_id: r.name for r in [record, *others]}
        points = [{"x": p["x"], "y": p["y"], "issue_id": p["issue_id"], "member": p["issue_id"] == issue_id,
                   "text": names.get(p["issue_id"], ""), "claim_key": p["claim_key"]}
                  for p in self.issues.map_points(shown, per_issue)]
        return {"issue_id": issue_id, "issues": [{"issue_id": i, "name": names.get(i, "")} for i in shown],
                "points": points}

    def resolve(self, issue_id: str, by: str) -> dict:
        if not by.strip():
            raise ValueError("by: say who resolves the issue")
        record = self.issues.get(issue_id)
        if record.state == RESOLVED:
            raise Conflict(f"issue {issue_id} is already resolved")
        now = self.clock()
        history = record.history + ({"at": now.isoformat(), "event": "resolved", "by": by},)
        updated = replace(record, state=RESOLVED, triaged=True, history=history)
        self.issues.save([updated])
        return self._view(updated, self.issues.member_counts())

    def merge(self, issue_id: str, into: str, by: str) -> dict:
        if issue_id == into:
            raise ValueError("merge: an issue cannot be merged into itself")
        source, target = self.issues.get(issue_id), self.issues.get(into)
        if source.merged_into:
            raise Conflict(f"issue {issue_id} was already merged into {source.merged_into}")
        now = self.clock().isoformat()
        self.issues.save([
            replace(source, merged_into=into, history=source.history + ({"at": now, "event": "merged_into", "issue": into,
                                                                         "by": by},)),
            replace(target, triaged=True, history=target.history + ({"at": now, "event": "absorbed", "issue": issue_id,
                                                                      "by": by},)),
        ])
        self.issues.move_members(issue_id, into)
        return self.show(into)

    def runbook(self, issue_id: str, fmt: str = "md", base_url: str | None = None) -> str:
        if fmt not in ("md", "html"):
            raise ValueError(f"format must be md or html, got {fmt!r}")
        record = self.issues.get(issue_id)
        counts = self.issues.member_counts().get(issue_id, {"count": record.size, "hourly": dict(record.hourly_counts)})
        members = self.issues.members(issue_id, 500)
        details = self.issues.event_details(list({m["event_id"] for m in members if m.get("event_id")}))
        ctx = build_context(record, members, details, self.rates.totals("", None), self.alerts.open_alerts(),
                            counts["count"], counts["hourly"], base_url or self.base_url)
        return self.renderer.render(ctx, format=fmt)


