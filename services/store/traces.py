"""One trace as stored: its answer rows in ``events`` and the issues its claims were assigned to.

A trace is usually one answer (one event); a producer may send several events with one trace_id
(a retried or revised answer), so every stored event of the trace is returned, oldest first.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.store.backends import Store
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
