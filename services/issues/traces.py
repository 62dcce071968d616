"""One trace, whole: the question, the answer, every claim beside its verdict, evidence span and chunk, the
versions, the first failed stage, and the issues its claims were clustered into. API, dashboard and CLI share it:
``TraceView`` is the read model the API answers with (closed: services/core/readmodel.py).

The event is rebuilt from its ``events`` row (services/store/convert.py writes it): the claim arrays side by
side, the evidence list as JSON. A trace is usually one event; when a producer sent several with one trace_id
the newest is the trace's answer and the others are listed, whole, as ``earlier``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import orjson

from services.contract.model import FAILED_VERDICT_ORDER, FAILED_VERDICTS
from services.core.errors import NotFound
from services.core.readmodel import closed
from services.issues.tracesearch import TRACES_PER_PAGE, TracePage, page_limits, search_of, trace_row
from services.store.convert import parse_ch_time
from services.store.traces import TraceRepository

MAX_EVENTS = 20
CLAIMS_PER_PAGE = 100  # one page of each event's claims: an event stored before the claim limit may hold 55,000
MAX_CLAIMS_PAGE = 10_000


def not_found_message(trace_id: str) -> str:
    return (
        f"no trace {trace_id!r} is stored: check the id (the trace_id of a verdict event), or its events may "
        "have aged out of the store; traces behind an issue are linked from its runbook (/issues, or "
        "`claimwatch issues show ISSUE_ID`)"
    )


@closed
@dataclass(frozen=True)
class TraceChunk:
    """A retrieved chunk, as the event listed it in ``evidence``."""

    chunk_id: str
    source_id: str | None = None
    version: str | None = None
    used: bool | None = None
    text: str | None = None


@closed
@dataclass(frozen=True)
class TraceClaim:
    index: int
    claim_key: str  # event_id:index, as issue membership names it
    claim_id: str
    text: str
    claim_type: str | None
    verdict: str
    failed: bool
    score: float | None
    span: str | None  # the evidence span the verifier quoted
    chunk_id: str | None
    source_id: str | None
    chunk: TraceChunk | None  # the chunk named by chunk_id, when the event listed it
    labeler: str | None
    issue_ids: tuple[str, ...] = ()


@closed
@dataclass(frozen=True)
class TraceIssue:
    issue_id: str
    name: str
    state: str
    claims: int  # how many of this trace's claims belong to it


@closed
@dataclass(frozen=True)
class TraceEvent:
    event_id: str
    observed_at: datetime
    route: str
    tenant: str | None
    question: str
    query_type: str | None
    stakes: str | None
    answerable: bool | None
    answer: str
    action: str | None
    versions: dict[str, str]
    first_failed_stage: str | None
    claims: tuple[TraceClaim, ...]  # one page of them, from index ``claims_from``
    evidence: tuple[TraceChunk, ...]
    signals: dict
    attributes: dict[str, str]
    claim_count: int  # all of the event's claims
    failed_claims: int
    claims_from: int = 0


@closed
@dataclass(frozen=True)
class TraceView(TraceEvent):
    """The trace's newest event, the issues any of its claims belong to, and its earlier events."""

    trace_id: str = ""
    issues: tuple[TraceIssue, ...] = ()
    earlier: tuple[TraceEvent, ...] = field(default=())
    claims_page: int = 1
    claims_pages: int = 1  # pages of the event with the most claims


def _blank(value: str) -> str | None:
    return value or None


def _chunk(raw: dict) -> TraceChunk:
    return TraceChunk(
        str(raw.get("chunk_id", "")), raw.get("source_id"), raw.get("version"), raw.get("used"), raw.get("text")
    )


def _event(row: dict, memberships: dict[str, list[str]], first: int) -> TraceEvent:
    evidence = tuple(_chunk(e) for e in orjson.loads(row.get("evidence") or "[]") if isinstance(e, dict))
    by_chunk = {c.chunk_id: c for c in evidence}
    claims = []
    for i, verdict in enumerate(row["verdicts"]):
        key = f"{row['event_id']}:{first + i}"
        score = row["scores"][i]
        chunk_id = _blank(row["chunk_ids"][i])
        claims.append(
            TraceClaim(
                index=first + i,
                claim_key=key,
                claim_id=row["claim_ids"][i],
                text=row["claim_texts"][i],
                claim_type=_blank(row["claim_types"][i]),
                verdict=verdict,
                failed=verdict in FAILED_VERDICTS,
                score=None if score is None else round(float(score), 4),
                span=_blank(row["spans"][i]),
                chunk_id=chunk_id,
                source_id=_blank(row["source_ids"][i]),
                chunk=by_chunk.get(chunk_id) if chunk_id else None,
                labeler=_blank(row["labelers"][i]),
                issue_ids=tuple(memberships.get(key, ())),
            )
        )
    answerable = int(row["answerable"])
    return TraceEvent(
        event_id=row["event_id"],
        observed_at=parse_ch_time(row["observed_at"]),
        route=row["route"],
        tenant=_blank(row["tenant"]),
        question=row["query_text"],
        query_type=_blank(row["query_type"]),
        stakes=_blank(row["stakes"]),
        answerable=None if answerable < 0 else bool(answerable),
        answer=row["answer_text"],
        action=_blank(row["action"]),
        versions=dict(row["versions"]),
        first_failed_stage=_blank(row["first_failed_stage"]),
        claims=tuple(claims),
        evidence=evidence,
        signals=orjson.loads(row.get("signals") or "{}"),
        attributes=dict(row["attributes"]),
        claim_count=int(row["claim_count"]),
        failed_claims=int(row["failed_count"]),
        claims_from=first,
    )


class TraceService:
    def __init__(self, traces: TraceRepository, max_events: int = MAX_EVENTS):
        self.traces = traces
        self.max_events = max_events

    def get(self, trace_id: str, claims_page: int = 1) -> TraceView:
        """The trace with page ``claims_page`` (from 1) of each event's claims. Raises NotFound for an unknown
        trace and ValueError for a page past the last."""
        first = (claims_page - 1) * CLAIMS_PER_PAGE
        rows = self.traces.events(trace_id, self.max_events, first, CLAIMS_PER_PAGE, FAILED_VERDICT_ORDER)
        if not rows:
            raise NotFound(not_found_message(trace_id))
        pages = max(1, -(-max(int(r["claim_count"]) for r in rows) // CLAIMS_PER_PAGE))
        if claims_page > pages:
            raise ValueError(
                f"claims page {claims_page} is past the last: this trace has {pages} "
                f"page{'s' if pages > 1 else ''} of {CLAIMS_PER_PAGE} claims"
            )
        keys = [f"{r['event_id']}:{first + i}" for r in rows for i in range(len(r["verdicts"]))]
        memberships: dict[str, list[str]] = {}
        for a in self.traces.claim_issues(keys):
            memberships.setdefault(a["claim_key"], []).append(a["issue_id"])
        issues = sorted(
            self.traces.event_issues([r["event_id"] for r in rows]), key=lambda i: (-int(i["claims"]), i["issue_id"])
        )
        events = [_event(r, memberships, first) for r in rows]
        latest = events[-1]
        return TraceView(
            **{f: getattr(latest, f) for f in TraceEvent.__dataclass_fields__},
            trace_id=trace_id,
            issues=tuple(
                TraceIssue(i["issue_id"], i.get("name") or i["issue_id"], i.get("state") or "", int(i["claims"]))
                for i in issues
            ),
            earlier=tuple(reversed(events[:-1])),
            claims_page=claims_page,
            claims_pages=pages,
        )

    def search(
        self,
        now: datetime,
        route: str | None = None,
        verdicts: Sequence[str] = (),
        versions: Sequence[str] = (),
        since: str | None = None,
        until: str | None = None,
        text: str | None = None,
        limit: int = TRACES_PER_PAGE,
        offset: int = 0,
    ) -> TracePage:
        """The traces whose claims match the filters, newest first, a page at a time (services/issues/tracesearch.py
        reads the filters: since and until as 6h or RFC 3339, versions as key=value; a bad one raises ValueError)."""
        page_limits(limit, offset)
        search = search_of(now, route, verdicts, versions, since, until, text)
        rows, total = self.traces.search(search, limit, offset, FAILED_VERDICT_ORDER)
        return TracePage(
            traces=[trace_row(r) for r in rows],
            total=total,
            offset=offset,
            limit=limit,
            since=search.since,
            until=search.until,
        )
