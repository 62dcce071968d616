"""What engineers do with issues (list, show, members, map, resolve, merge, runbook): API and CLI share it."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from clustering.issue import IssueRecord
from services.alerts.detection.expectations import published
from services.alerts.explain.explainer import AlertExplainer, alert_window, explainable
from services.alerts.lifecycle.records import AlertRecords
from services.core.clock import utcnow
from services.core.errors import Conflict
from services.core.numbers import plural
from services.issues.activity import ActivityPage, activity, latest_notes, triage_fields, view_state, wanted
from services.issues.figures import MAX_TRACES, IssueFigures, issue_figures, zero_filled
from services.issues.merges import suggest_merges
from services.issues.owners import OwnerRules
from services.issues.priority import DRIVING_SHARE, PrioritySignals, gather, priority_key
from services.issues.records import IssueRecords, surviving
from services.store.rates import RateRepository

SORTS = {"priority", "last_seen", "first_seen", "count", "name"}


class IssuesService:
    def __init__(
        self,
        issues: IssueRecords,
        rates: RateRepository,
        alerts: AlertRecords,
        base_url: str = "http://127.0.0.1:8080",
        clock: Callable[[], datetime] = utcnow,
        explainer: AlertExplainer | None = None,
        distinct: Callable[[list[str], list[str], int], list[int]] | None = None,
        owners: OwnerRules | None = None,
        runbook: Callable[..., str] | None = None,
        eval_items: Callable[[list[str]], dict[str, str]] | None = None,
    ):
        self.owners = owners or OwnerRules()  # an issue's team: its dominant route's owner (services/triage)
        self.explainer = explainer
        # (event ids, questions, limit) -> the indices a promote command can propose together (services/evalset)
        self.distinct = distinct  # the alerts an issue contributes to, with its share of each one's excess
        self.eval_items = eval_items  # event ids -> the eval items they already are (services/evalset)
        self.issues = issues
        self.rates = rates
        self.alerts = alerts
        self.base_url = base_url.rstrip("/")
        # (record, figures, exemplars, details, traces_from, notes, fmt) -> the runbook (runbooks/issues.py)
        self.write_runbook = runbook
        self.clock = clock

    def _signals(self) -> PrioritySignals:
        explain = self.explainer.explain if self.explainer is not None else None
        return gather(self.issues, self.alerts.open_alerts(), self.clock(), explain)

    def _view(self, r: IssueRecord, counts: dict, signals: PrioritySignals | None = None) -> dict:
        # Event time: first/last seen and the trend come from the members' observed_at, not the clustering run.
        c = counts.get(r.issue_id, {"count": 0, "hourly": {}, "first": None, "last": None})
        hours = zero_filled(c["hourly"])
        signals = signals if signals is not None else self._signals()
        return {
            "issue_id": r.issue_id,
            "name": r.name,
            "subtitle": r.subtitle or " ".join(r.keywords),
            "count": c["count"],
            "recent_count": signals.recent(r.issue_id),
            "escalating": signals.escalating(r.issue_id),
            "drives_alerts": signals.drives(r.issue_id),
            **triage_fields(r, self.owners),
            "state": view_state(r),
            "first_seen": c["first"].isoformat() if c["first"] else None,
            "last_seen": c["last"].isoformat() if c["last"] else None,
            "clustered_at": r.last_seen.isoformat(),
            "routes": sorted(r.routes, key=lambda k: -r.routes[k]),
            "keywords": list(r.keywords),
            "trend": [n for _, n in hours],
            "triaged": r.triaged,
            "config": r.config_name,
            "merged_into": r.merged_into,
            "runbook_url": f"{self.base_url}/issues/{r.issue_id}",
        }

    # Below this method, `list` in the class body names it, so later annotations say builtins.list.
    def list(
        self,
        *,
        state: str | None = None,
        route: str | None = None,
        q: str | None = None,
        sort: str = "priority",
        limit: int = 100,
        owner: str | None = None,
        assignee: str | None = None,
    ) -> list[dict]:
        """Issues; by default in priority order (services/issues/priority.py): those driving a firing alert
        first, then regressed or escalating ones, then the rest, each by recent volume. Archived issues only
        with ``state="archived"``; ``owner`` matches the team or the owner."""
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {sorted(SORTS)}, got {sort!r}")
        # records before counts: a re-cluster saves members before issues, so every issue read is counted
        records = [r for r in self.issues.load() if r.merged_into is None]
        counts, signals = self.issues.member_counts(), self._signals()
        views = [self._view(r, counts, signals) for r in records]
        views = [
            v
            for v in views
            if wanted(v, state, owner, assignee)
            and (route is None or route in v["routes"])
            and (q is None or q.lower() in " ".join([v["name"], v["subtitle"], *v["keywords"]]).lower())
        ]
        if sort == "priority":
            views.sort(key=priority_key)
        else:
            views.sort(key=lambda v: (v[sort] or "", v["issue_id"]), reverse=sort != "name")
        return views[:limit]

    def summary(self, issue_id: str) -> dict:
        return self._view(self.issues.get(issue_id), self.issues.member_counts())

    def show(self, issue_id: str, alert_id: str | None = None, activity: ActivityPage = ActivityPage()) -> dict:
        """``alert_id``: the page the reader came from; its window gives the representative traces. ``activity``:
        which of its activity entries (newest first) to give: a page, as notes have no bound in number."""
        return self._show(self.issues.get(issue_id), alert_id, activity)[0]

    def page(
        self, issue_id: str, alert_id: str | None = None, activity: ActivityPage = ActivityPage()
    ) -> tuple[dict, str]:
        """The issue page: ``show`` and the HTML runbook, its figures and traces read once for both (a merged
        issue's runbook is its survivor's, read apart)."""
        record = self.issues.get(issue_id)
        shown, figures, exemplars, source = self._show(record, alert_id, activity)
        if surviving(self.issues, record) is not record:
            return shown, self.runbook(issue_id, "html", alert_id)
        return shown, self._runbook(record, figures, exemplars, source, "html")

    def _show(
        self, record: IssueRecord, alert_id: str | None, page: ActivityPage = ActivityPage()
    ) -> tuple[dict, IssueFigures, builtins.list[dict], str]:
        view = self._view(record, self.issues.member_counts())
        figures = self.figures(record.issue_id, alert_id)
        explain = self._explain_once()  # the traces' choice and the alerts list read the same explanations
        exemplars, source = self._representatives(record, alert_id=alert_id, explain=explain)
        entries = activity(record)
        out = {
            **view,
            "exemplars": exemplars,
            "exemplars_from": source,
            **page.of(entries),
            "split_from": record.split_from,
            **self.figures_json(figures, exemplars, source),
        }
        out["alerts"] = self.contributes_to(record.issue_id, set(out["routes"]) | set(record.routes), explain=explain)
        out["merge_candidates"] = [c.as_dict() for c in suggest_merges(record, self.issues.load())]
        return out, figures, exemplars, source

    def contributes_to(
        self, issue_id: str, routes: set[str], newest: int = 20, explain: Callable | None = None
    ) -> builtins.list[dict]:
        """The alerts on the issue's routes (newest ``newest``) it has failing claims behind: alert id, route,
        state, and its share of the alert's excess (services/alerts/explain/shares.py)."""
        if self.explainer is None or not routes:
            return []
        alerts = [a for a in self.alerts.list() if a.route in routes][:newest]
        return [a.as_dict() for a in self.explainer.alerts_of_issue(issue_id, alerts, self.clock(), explain)]

    def _explain_once(self) -> Callable | None:
        """(alert) -> its explanation, each alert explained at most once for one read of an issue."""
        if self.explainer is None:
            return None
        explainer, now, found = self.explainer, self.clock(), {}

        def explain(alert):
            if alert.alert_id not in found:
                found[alert.alert_id] = explainer.explain(alert, now)
            return found[alert.alert_id]

        return explain

    def figures(self, issue_id: str, alert_id: str | None = None) -> IssueFigures:
        """The issue's figures over every member (event time, verdicts, routes beside what is expected of them);
        ``alert_id``: the alert the reader came from, whose route's figures it gives."""
        return issue_figures(
            issue_id,
            self.issues.member_span(issue_id),
            self.issues.member_breakdown(issue_id),
            self.issues.member_events(issue_id),
            self.rates,
            self.alerts.open_alerts(),
            published(self.alerts),
            alert_id,
        )

    @staticmethod
    def figures_json(figures: IssueFigures, exemplars: builtins.list[dict], source: str = "") -> dict:
        out = figures.as_dict()
        out.pop("issue_id")
        out["route_figures"] = out.pop("routes")  # each route's rate beside what is expected of it
        out["routes"] = [r["route"] for r in out["route_figures"]]
        out["trend"] = [h["count"] for h in out["hourly"]]
        out["exemplars_note"] = (
            ""
            if len(exemplars) >= MAX_TRACES
            else f"{plural(len(exemplars), 'representative trace')}: the issue's {figures.count} "
            "failing claims come from "
            f"{figures.traces} distinct traces"
            + (
                ""
                if len(exemplars) >= figures.traces
                else f"; the others {f'lie outside {source}, ' if source else ''}repeat a "
                "question shown here or already in the eval set, or are no longer "
                "stored"
            )
        )
        return out

    def representatives(
        self, record: IssueRecord, limit: int = MAX_TRACES, alert_id: str | None = None
    ) -> builtins.list[dict]:
        """Up to ``limit`` members from distinct traces whose questions a promote command can propose together (no
        near duplicates). While the issue has members in an open alert's window, they come from there: after the
        onset, on the alert's suspect version when it has one. Otherwise the clustering's exemplars come first,
        then the most typical members. The runbook, the issue page and `promote propose` all use this set.
        ``alert_id``: the alert the reader came from, when the issue has members in its window."""
        return self._representatives(record, limit, alert_id)[0]

    def _representatives(
        self, record: IssueRecord, limit: int = MAX_TRACES, alert_id: str | None = None, explain: Callable | None = None
    ) -> tuple[builtins.list[dict], str]:
        """The representatives, and where they come from ("" for the whole issue)."""
        members, source = self._alert_window_members(record, alert_id) if alert_id else ([], "")
        if not members:
            members, source = self._alert_window_members(record, explain=explain or self._explain_once())
        if not members:
            rank = {k: i for i, k in enumerate(record.exemplar_ids)}
            members = sorted(
                self.issues.members(record.issue_id, 500),
                key=lambda m: (rank.get(m["claim_key"], len(rank)), -(m.get("probability") or 0)),
            )
        chosen, traces = [], set()
        for m in members:
            key = m.get("trace_id") or m["claim_key"]
            if m.get("event_id") and key not in traces:
                traces.add(key)
                chosen.append(m)
        if self.distinct is None:
            return chosen[:limit], source
        keep = self.distinct([m["event_id"] for m in chosen], [m.get("question") or "" for m in chosen], limit)
        if keep or self.eval_items is None:
            return [chosen[i] for i in keep], source
        # every one is an eval item already: show them as such rather than none (nothing is left to propose)
        held = self.eval_items([m["event_id"] for m in chosen])
        return [{**m, "eval_item": held[m["event_id"]]} for m in chosen if m["event_id"] in held][:limit], source

    def _alert_window_members(
        self, record: IssueRecord, alert_id: str | None = None, explain: Callable | None = None
    ) -> tuple[builtins.list[dict], str]:
        """The issue's members in the window of the open alert it matters most to (firing before pending): only
        those on the alert's top suspect version when there are any. ([], "") without such an alert.

        "Matters most": where it ranks highest among the issues behind the alert's excess, then where it holds
        the largest share of it (the explainer's, as the alert page names them); without an explainer, the
        largest share of the window's clustered failing claims. An alert where the issue is under
        ``DRIVING_SHARE`` is the route's usual noise, not the issue's page, so it is passed over.

        ``alert_id``: that alert only, whatever the issue's share of it (the reader came from its page)."""
        now = self.clock()
        candidates = []
        for alert in self.alerts.open_alerts():
            # the alert asked for may be on a route the issue reached after it was clustered (online assignment)
            wanted = alert.alert_id == alert_id if alert_id else alert.route in record.routes
            if not wanted or not explainable(alert):
                continue
            start, end = alert_window(alert, now)
            until = end + timedelta(minutes=1, milliseconds=-1)
            rank, share = (0, 1.0) if alert_id else self._standing(record.issue_id, alert, start, until, explain)
            if share >= DRIVING_SHARE:
                candidates.append((alert.starts_at is None, rank, -share, alert.alert_id, start, until, alert))
        if not candidates:
            return [], ""
        *_, start, until, alert = min(candidates, key=lambda c: c[:4])
        members = self.issues.members_in_window(record.issue_id, alert.route, start, until, 500)
        source = f"alert {alert.alert_id}'s window on {alert.route} (since the onset, {start:%Y-%m-%d %H:%M} UTC)"
        suspect = next(iter(alert.suspect_changes or ()), None)
        if suspect:
            on_suspect = [m for m in members if dict(m.get("versions") or {}).get(suspect["key"]) == suspect["value"]]
            if on_suspect:
                return on_suspect, f"{source[:-1]}, on the suspect {suspect['key']} {suspect['value']})"
        return members, source

    def _standing(
        self, issue_id: str, alert, start: datetime, until: datetime, explain: Callable | None
    ) -> tuple[int, float]:
        """(the issue's rank among the alert's issues, its share): see ``_alert_window_members``."""
        if explain is not None:
            ranked = [c for c in explain(alert).issues if c.issue_id and c.share]
            ranked.sort(key=lambda c: -c.share)
            at = next((i for i, c in enumerate(ranked) if c.issue_id == issue_id), None)
            return (len(ranked), 0.0) if at is None else (at, ranked[at].share)
        counts = self.issues.members_on_route(alert.route, start, until)
        return 0, counts.get(issue_id, 0) / max(1, sum(counts.values()))

    def members(self, issue_id: str, limit: int = 200) -> builtins.list[dict]:
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
        points = [
            {
                "x": p["x"],
                "y": p["y"],
                "issue_id": p["issue_id"],
                "member": p["issue_id"] == issue_id,
                "text": names.get(p["issue_id"], ""),
                "claim_key": p["claim_key"],
            }
            for p in self.issues.map_points(shown, per_issue)
        ]
        return {
            "issue_id": issue_id,
            "issues": [{"issue_id": i, "name": names.get(i, "")} for i in shown],
            "points": points,
        }

    def merge(self, issue_id: str, into: str, by: str) -> dict:
        if issue_id == into:
            raise ValueError("merge: an issue cannot be merged into itself")
        source, target = self.issues.get(issue_id), self.issues.get(into)
        if source.merged_into:
            raise Conflict(f"issue {issue_id} was already merged into {source.merged_into}")
        if target.merged_into:  # merging into it would hide the source, and close a cycle if the chain leads back
            raise Conflict(self._merged_target(issue_id, target))
        now = self.clock().isoformat()
        self.issues.save(
            [
                replace(
                    source,
                    merged_into=into,
                    history=source.history + ({"at": now, "event": "merged_into", "issue": into, "by": by},),
                ),
                replace(
                    target,
                    triaged=True,
                    history=target.history + ({"at": now, "event": "absorbed", "issue": issue_id, "by": by},),
                ),
            ]
        )
        self.issues.move_members({issue_id: into})
        return self.show(into)

    def _merged_target(self, issue_id: str, target: IssueRecord) -> str:
        """Why a merge into an issue that was itself merged away is refused, naming where its chain ends."""
        chain, current = [target.issue_id], target
        while current.merged_into and current.merged_into not in chain and len(chain) < 100:  # bounded: stored cycles
            if current.merged_into == issue_id:
                return (
                    f"issue {target.issue_id} was itself merged, and its merges lead back to {issue_id}; "
                    f"merging would make a cycle that hides both"
                )
            chain.append(current.merged_into)
            current = self.issues.get(current.merged_into)
        return f"issue {target.issue_id} was merged into {target.merged_into}; merge into {chain[-1]} instead"

    def runbook(self, issue_id: str, fmt: str = "md", alert_id: str | None = None) -> str:
        """The issue's runbook; a merged issue's is the one of the issue its merges lead to (its members are there),
        as a runbook command printed before a re-cluster merged it still leads somewhere useful."""
        if fmt not in ("md", "html"):
            raise ValueError(f"format must be md or html, got {fmt!r}")
        record = surviving(self.issues, self.issues.get(issue_id))
        exemplars, source = self._representatives(record, alert_id=alert_id)
        return self._runbook(record, self.figures(record.issue_id, alert_id), exemplars, source, fmt)

    def _runbook(
        self, record: IssueRecord, figures: IssueFigures, exemplars: builtins.list[dict], source: str, fmt: str
    ) -> str:
        if self.write_runbook is None:
            raise RuntimeError("this IssuesService was built without a runbook writer (services/app/compose.py)")
        details = self.issues.event_details([m["event_id"] for m in exemplars])
        return self.write_runbook(record, figures, exemplars, details, source, latest_notes(record), fmt)
