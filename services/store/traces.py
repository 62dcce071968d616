"""One trace as stored: its answer rows in ``events`` and the issues its claims were assigned to; and the search
over stored claims that lists traces (``search``).

A trace is usually one answer (one event); a producer may send several events with one trace_id
(a retried or revised answer), so every stored event of the trace is returned, oldest first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from services.store.backends import Store
from services.store.convert import ch_time
from services.store.exposure import TRACE, note_shown

EVENT_COLUMNS = (
    "event_id, trace_id, observed_at, route, tenant, query_text, query_type, stakes, answerable, "
    "answer_text, action, versions, first_failed_stage, evidence, signals, attributes"
)
CLAIM_ARRAYS = (
    "claim_ids",
    "claim_texts",
    "claim_types",
    "verdicts",
    "scores",
    "chunk_ids",
    "source_ids",
    "spans",
    "labelers",
)
MAX_SEARCH_RANGE = timedelta(days=31)  # a search reads claims of at most this much event time
MAX_SEARCH_ROWS = 100  # traces a page
SAMPLE_CHARS = 300  # of the claim text a row shows


@dataclass(frozen=True)
class TraceSearch:
    """Which claims a trace search matches: event time in [since, until), and each filter given (all of them)."""

    since: datetime
    until: datetime
    route: str | None = None
    verdicts: tuple[str, ...] = ()  # any of them
    versions: Mapping[str, str] = field(default_factory=dict)  # each key=value in the claim's versions
    text: str | None = None  # a part of the claim's text, without case

    def refusal(self) -> str | None:
        """Why the store will not run this search (a plain sentence), or None."""
        if self.until <= self.since:
            return f"since ({self.since.isoformat()}) must come before until ({self.until.isoformat()})"
        if self.until - self.since > MAX_SEARCH_RANGE:
            days = (self.until - self.since) / timedelta(days=1)
            return (
                f"the time range from since to until is {days:.1f} days; traces are searched over at most "
                f"{MAX_SEARCH_RANGE.days} days at a time: narrow since or until"
            )
        return None


class TraceRepository:
    def __init__(self, store: Store):
        self.store = store

    def events(self, trace_id: str, limit: int, first_claim: int, claims: int, failed: Sequence[str]) -> list[dict]:
        """The trace's stored events (one row each, ``events`` columns), oldest first, at most ``limit``; of each,
        the claim arrays from index ``first_claim`` on, at most ``claims``, and ``claim_count`` and ``failed_count``
        (verdicts in ``failed``) over all its claims."""
        arrays = ", ".join(f"arraySlice({a}, {{first:UInt32}}, {{claims:UInt32}}) AS {a}" for a in CLAIM_ARRAYS)
        rows = self.store.query(
            f"SELECT {EVENT_COLUMNS}, {arrays}, length(events.verdicts) AS claim_count, "
            "arrayCount(v -> has({failed:Array(String)}, v), events.verdicts) AS failed_count "
            "FROM events FINAL WHERE trace_id = {id:String} ORDER BY observed_at, event_id LIMIT {n:UInt32}",
            {"id": trace_id, "n": limit, "first": first_claim + 1, "claims": claims, "failed": list(failed)},
        )
        note_shown(
            self.store, (f"{r['event_id']}:{first_claim + i}" for r in rows for i in range(len(r["verdicts"]))), TRACE
        )
        return rows

    def event_issues(self, event_ids: Sequence[str]) -> list[dict]:
        """The issues the claims of these events belong to: id, name, state and how many of the claims."""
        return self.store.query(
            "SELECT m.issue_id AS issue_id, count() AS claims, any(i.name) AS name, any(i.state) AS state "
            "FROM (SELECT claim_key, issue_id FROM issue_members FINAL WHERE issue_id != '' "
            "AND arrayStringConcat(arrayPopBack(splitByChar(':', claim_key)), ':') IN {ids:Array(String)}) AS m "
            "LEFT JOIN (SELECT issue_id, name, state FROM issues FINAL) AS i ON i.issue_id = m.issue_id "
            "GROUP BY m.issue_id",
            {"ids": list(event_ids)},
        )

    def claim_issues(self, claim_keys: Sequence[str]) -> list[dict]:
        """Per claim key (``event_id:claim_idx``) that belongs to an issue: the issue's id, name, state and
        ``merged_into`` (the issue's newest row), and the assignment's probability and source."""
        if not claim_keys:
            return []
        return self.store.query(
            "SELECT m.claim_key AS claim_key, m.issue_id AS issue_id, m.probability AS probability, "
            "m.source AS source, i.name AS name, i.state AS state, i.merged_into AS merged_into "
            "FROM (SELECT claim_key, issue_id, probability, source FROM issue_members FINAL "
            "WHERE claim_key IN {keys:Array(String)} AND issue_id != '') AS m "
            "LEFT JOIN (SELECT issue_id, name, state, merged_into FROM issues FINAL) AS i ON i.issue_id = m.issue_id "
            "ORDER BY m.claim_key",
            {"keys": list(claim_keys)},
        )

    def search(self, search: TraceSearch, limit: int, offset: int, failed: Sequence[str]) -> tuple[list[dict], int]:
        """The traces with a claim that ``search`` matches, one row each, newest first (by the first matched claim's
        event time), at most ``limit`` from ``offset`` on; and how many traces match in all. A row's figures count
        its matched claims: ``events``, ``claims``, ``failed`` (verdicts in ``failed``), ``verdicts`` (those seen)
        and ``sample`` (text, verdict, event_id, claim_idx: a failed one first, then one with text, then the
        earliest). The page shows the verdicts of every matched claim of its traces, so their live review
        reservations are marked exposed.
        Raises ValueError for a range longer than MAX_SEARCH_RANGE (or empty) and a limit over MAX_SEARCH_ROWS."""
        refused = search.refusal()
        if refused:
            raise ValueError(refused)
        if not 1 <= limit <= MAX_SEARCH_ROWS or offset < 0:
            raise ValueError(f"limit must be 1 to {MAX_SEARCH_ROWS} and offset 0 or more")
        # claims is ordered by (route, observed_at, ...): the route and the time range first
        where = ["route = {route:String}"] if search.route is not None else []
        where += ["observed_at >= {since:DateTime64(3)}", "observed_at < {until:DateTime64(3)}"]
        params: dict = {
            **({"route": search.route} if search.route is not None else {}),
            "since": ch_time(search.since),
            "until": ch_time(search.until),
            "failed": list(failed),
            "n": limit,
            "o": offset,
        }
        if search.verdicts:
            where.append("verdict IN {verdicts:Array(String)}")
            params["verdicts"] = list(search.verdicts)
        for n, (key, value) in enumerate(sorted(search.versions.items())):
            where.append(f"versions[{{vk{n}:String}}] = {{vv{n}:String}}")
            params |= {f"vk{n}": key, f"vv{n}": value}
        if search.text:
            where.append("positionCaseInsensitiveUTF8(text, {needle:String}) > 0")
            params["needle"] = search.text
        matched = f"FROM claims FINAL WHERE {' AND '.join(where)}"
        key = "concat(event_id, ':', toString(claim_idx))"
        rows = self.store.query(
            "SELECT trace_id, argMin(route, observed_at) AS first_route, min(observed_at) AS first_observed_at, "
            "uniqExact(event_id) AS events, count() AS claims, countIf(verdict IN {failed:Array(String)}) AS failed, "
            f"groupUniqArray(verdict) AS verdicts, argMin((leftUTF8(text, {SAMPLE_CHARS}), verdict, event_id, "
            "claim_idx), (verdict NOT IN {failed:Array(String)}, text = '', observed_at, event_id, claim_idx)) "
            "AS sample, "
            f"groupArrayIf({key}, {key} IN (SELECT claim_key FROM review_reservations WHERE expires_at > now64(3))) "
            f"AS reserved, count() OVER () AS total {matched} GROUP BY trace_id "
            "ORDER BY first_observed_at DESC, trace_id LIMIT {n:UInt32} OFFSET {o:UInt32}",
            params,
        )
        note_shown(self.store, (k for r in rows for k in r.pop("reserved")), TRACE)
        if rows:
            total = int(rows[0]["total"])
        else:  # past the last page (or nothing matches): the count alone
            total = int(self.store.query(f"SELECT uniqExact(trace_id) AS n {matched}", params)[0]["n"])
        for r in rows:  # (an alias may not shadow a column the WHERE reads)
            del r["total"]
            r["route"] = r.pop("first_route")
        return rows, total
