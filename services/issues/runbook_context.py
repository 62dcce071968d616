"""Build one issue's RunbookContext: pure assembly over data the issues service fetched.

``IssuesService.runbook`` reads the members, their events, the route totals and the open
alerts through the repositories and hands them here; nothing in this module touches the store.
"""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from statistics import mean

import orjson

from clustering.issue import IssueRecord
from runbooks import (IssueInfo, IssueSignals, RouteImpact, RunbookContext, Summary, SuspectChange, TimelineEntry,
                      TraceExample)
from services.alerts.lifecycle import Alert
from services.rates.intervals import Counts, ratio_interval

STAGES = ("evidence_admission", "claim_generation", "generation_stability")


def _when(text: str) -> datetime:
    ts = datetime.fromisoformat(text)
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def _trace(row: dict, evidence: dict) -> TraceExample:
    versions = {e.get("source_id", e["chunk_id"]): e.get("version", "") for e in evidence.get(row["event_id"], [])
                if e.get("version")}
    return TraceExample(trace_id=row["trace_id"] or "", event_id=row["event_id"] or "", route=row["route"] or "",
                        question=row.get("question") or "", answer_excerpt=(row.get("answer_text") or "")[:300],
                        failing_claim=row.get("text") or "", evidence_span=row.get("span") or "",
                        verdict=row.get("verdict") or "unsupported", source_versions=versions)


def build_context(record: IssueRecord, members: list[dict], details: dict[str, dict], route_totals: list[dict],
                  alerts: list[Alert], count: int, hourly: dict[str, int], base_url: str) -> RunbookContext:
    """``members``: the issue's members, most typical first (IssueRepository.members); ``details``: their events
    by event_id (IssueRepository.event_details); ``route_totals``: rate totals per route; ``alerts``: open alerts."""
    exemplar_keys = set(record.exemplar_ids)
    chosen = [m for m in members if m["claim_key"] in exemplar_keys] or members
    chosen = chosen[:5]
    evidence = {eid: orjson.loads(d["evidence"] or "[]") for eid, d in details.items()}
    for m in chosen:
        m["answer_text"] = details.get(m.get("event_id"), {}).get("answer_text", "")

    verdicts = Counter(m["verdict"] for m in members if m.get("verdict"))
    stages = Counter(d["first_failed_stage"] for d in details.values() if d["first_failed_stage"] in STAGES)
    signals = [orjson.loads(d["signals"] or "{}") for d in details.values()]
    picked = [s for s in signals if s.get("cherry_pick")]
    average = lambda key: mean(v) if (v := [s[key] for s in signals if s.get(key) is not None]) else None  # noqa: E731

    route_rows = {r["route"]: r for r in route_totals if r["route"] in record.routes}
    impacts = []
    for route, failing in sorted(record.routes.items(), key=lambda kv: -kv[1]):
        c = Counts.from_row(route_rows.get(route, {}))
        interval = ratio_interval(c)
        impacts.append(RouteImpact(route, c.rate or 0.0, interval.lo if interval else 0.0,
                                   interval.hi if interval else 0.0, int(failing)))
    top = impacts[0] if impacts else None

    open_alerts = [a for a in alerts if a.route in record.routes]
    suspects = tuple(SuspectChange(s["key"], s["value"], s["kind"] if s["kind"] in ("system", "evidence") else "system",
                                   s.get("rate_before"), s.get("rate_after"))
                     for a in open_alerts for s in a.suspect_changes[:3])
    timeline = [TimelineEntry(_when(h["at"]), h.get("event", "")) for h in record.history if h.get("at")]
    timeline += [TimelineEntry(a.pending_since, f"alert {a.alert_id} on {a.route}: {a.recorded_state}") for a in open_alerts]
    trend = tuple(v for _, v in sorted(hourly.items()))[-24:]
    return RunbookContext(
        issue=IssueInfo(record.issue_id, record.name, record.state,
                        "critical" if any(a.severity == "critical" for a in open_alerts) else "warning",
                        record.first_seen, record.last_seen, count, trend),
        summary=Summary(top.rate if top else 0.0, top.lo if top else 0.0, top.hi if top else 0.0,
                        open_alerts[0].baseline if open_alerts else None,
                        Counts.from_row(route_rows.get(top.route, {})).claims if top else 0, dict(verdicts)),
        timeline=tuple(sorted(timeline, key=lambda t: t.at)),
        routes=tuple(impacts),
        suspect_changes=suspects,
        traces=tuple(_trace(m, evidence) for m in chosen if m.get("event_id")),
        first_failed_stage=stages.most_common(1)[0][0] if stages else "",
        signals=IssueSignals(len(picked) / len(signals) if signals else 0.0,
                             tuple(sorted({c for s in picked for c in s["cherry_pick"]}))[:5],
                             average("premise_similarity"), average("support_delta"), average("sample_disagreement")),
        alert_id=open_alerts[0].alert_id if open_alerts else None,
        base_url=base_url,
    )
