"""Build one issue's RunbookContext and render it: pure assembly over data the issues service fetched.

``IssuesService.runbook`` computes the issue's figures (services.issues.figures, over every member),
picks the representative traces and reads their events, and hands them to ``IssueRunbooks``, which the
composition root gives it; nothing in this module touches the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import orjson

from clustering.issue import IssueRecord
from runbooks.context import (
    IssueInfo,
    IssueSignals,
    RouteImpact,
    RunbookContext,
    Summary,
    SuspectChange,
    TimelineEntry,
    TraceExample,
)
from runbooks.render import RunbookRenderer
from services.alerts.lifecycle.alert import Alert
from services.issues.activity import view_state
from services.issues.figures import IssueFigures


def _when(text: str) -> datetime:
    ts = datetime.fromisoformat(text)
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _trace(row: dict, evidence: dict) -> TraceExample:
    versions = {
        e.get("source_id", e["chunk_id"]): e.get("version", "")
        for e in evidence.get(row["event_id"], [])
        if e.get("version")
    }
    return TraceExample(
        trace_id=row["trace_id"] or "",
        event_id=row["event_id"] or "",
        route=row["route"] or "",
        question=row.get("question") or "",
        answer_excerpt=(row.get("answer_text") or "")[:300],
        failing_claim=row.get("text") or "",
        evidence_span=row.get("span") or "",
        verdict=row.get("verdict") or "unsupported",
        source_versions=versions,
        eval_item=row.get("eval_item") or "",
    )


def alert_steps(alert: Alert) -> list[TimelineEntry]:
    """An alert's steps, each at its own time: the rise's onset (the checks compare suspect changes with it),
    pending, firing and resolved, as far as it has gone."""
    name = f"alert {alert.alert_id} on {alert.route}"
    steps = [
        (alert.onset, f"onset of the rise on {alert.route} ({name})"),
        (alert.pending_since, f"{name}: pending"),
        (alert.starts_at, f"{name}: firing"),
        (alert.ends_at, f"{name}: resolved"),
    ]
    return [TimelineEntry(at, what) for at, what in steps if at]


def build_context(
    record: IssueRecord,
    figures: IssueFigures,
    exemplars: list[dict],
    details: dict[str, dict],
    base_url: str,
    cli: str = "claimwatch",
    traces_from: str = "",
    notes: Sequence[dict] = (),
) -> RunbookContext:
    """``figures``: the issue's figures over every member (services.issues.figures); ``exemplars``: the
    representative members, one per trace; ``details``: their events by event_id (IssueRepository.event_details);
    ``cli``: how the reader runs claimwatch (services/core/command.py)."""
    evidence = {eid: orjson.loads(d["evidence"] or "[]") for eid, d in details.items()}
    chosen = [{**m, "answer_text": details.get(m.get("event_id", ""), {}).get("answer_text", "")} for m in exemplars]
    impacts = tuple(
        RouteImpact(r.route, r.rate, r.lo, r.hi, r.members, r.expected, r.expected_source, r.own, r.learning)
        for r in figures.routes
    )
    top = figures.headline
    open_alerts = list(figures.alerts)
    suspects = tuple(
        SuspectChange(
            s["key"],
            s["value"],
            s["kind"] if s["kind"] in ("system", "evidence") else "system",
            s.get("rate_before"),
            s.get("rate_after"),
            s.get("share_before"),
            s.get("share_after"),
        )
        for a in open_alerts
        for s in a.suspect_changes[:3]
    )
    timeline = [TimelineEntry(_when(h["at"]), _happening(h)) for h in record.history if h.get("at")]
    timeline += [entry for a in open_alerts for entry in alert_steps(a)]
    sig = figures.signals
    alert_id = top.alert_id if top and top.alert_id else (open_alerts[0].alert_id if open_alerts else None)
    return RunbookContext(
        issue=IssueInfo(
            record.issue_id,
            record.name,
            view_state(record),
            figures.severity,
            figures.first_seen or record.first_seen,
            figures.last_seen or record.last_seen,
            figures.count,
            tuple(n for _, n in figures.hourly),
        ),
        summary=Summary(
            top.rate if top else None,
            top.lo if top else None,
            top.hi if top else None,
            top.expected if top else None,
            top.claims if top else 0,
            dict(figures.verdicts),
            route=top.route if top else "",
            window_minutes=top.window_minutes if top else None,
            expected_source=top.expected_source if top else "no route has been attributed yet",
            alert_rate=top.alert_rate if top else None,
            counted=figures.verdicts_counted if figures.verdicts_counted < figures.count else None,
        ),
        timeline=tuple(sorted(timeline, key=lambda t: t.at)),
        routes=impacts,
        suspect_changes=suspects,
        traces=tuple(_trace(m, evidence) for m in chosen if m.get("event_id")),
        first_failed_stage=figures.first_failed_stage,
        signals=IssueSignals(
            sig.cherry_pick_share,
            sig.cherry_pick_chunks,
            sig.means.get("premise_similarity"),
            sig.means.get("support_delta"),
            sig.means.get("sample_disagreement"),
            sig.events,
            dict(sig.carried),
        ),
        alert_id=alert_id,
        base_url=base_url,
        trace_total=figures.traces,
        traces_from=traces_from,
        cli=cli,
        notes=tuple(TimelineEntry(_when(n["at"]), f"{n['by']}: {n['text']}") for n in notes),
    )


def _happening(entry: dict) -> str:
    """One history entry in words: its event; a rename says why and what the title was (the new one heads the page)."""
    if entry.get("event") == "renamed":
        return f"renamed ({entry.get('why', '')}); it was {entry.get('from', '')}"
    return entry.get("event", "")


class IssueRunbooks:
    """The issues service's runbook writer (given to ``IssuesService`` by the composition root)."""

    def __init__(self, renderer: RunbookRenderer, base_url: str, cli: str = "claimwatch"):
        self.renderer = renderer
        self.base_url = base_url.rstrip("/")
        self.cli = cli  # how runbook readers run claimwatch (services/core/command.py)

    def __call__(
        self,
        record: IssueRecord,
        figures: IssueFigures,
        exemplars: list[dict],
        details: dict[str, dict],
        traces_from: str,
        notes: Sequence[dict],
        fmt: str = "md",
    ) -> str:
        ctx = build_context(
            record, figures, exemplars, details, self.base_url, cli=self.cli, traces_from=traces_from, notes=notes
        )
        return self.renderer.render(ctx, format=fmt)
