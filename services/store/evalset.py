"""The eval set in ClickHouse: items, their history, gold spans, claim labels and run results.

Rows go in and come out as plain dicts; ``services.evalset`` turns them into its own types.
Datetime values in rows handed to the repository are formatted here; the times it reads back
(``proposed_at``, ``reviewed_at``, ``at``) are aware datetimes. Callers pass every time they write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.store.backends import Store
from services.store.convert import parse_ch_time
from services.store.issues import ch_values

ITEM_COLUMNS = (
    "item_id, query, query_type, answerable, stakes, gold_answer, source_corpus_ver, origin_issue_id, "
    "origin_trace_id, origin_event_id, origin_route, state, proposed_by, proposed_at, reviewed_by, "
    "reviewed_at, review_reason, version"
)


def _item(row: dict) -> dict:
    return {
        **row,
        "proposed_at": parse_ch_time(row["proposed_at"]),
        "reviewed_at": parse_ch_time(row["reviewed_at"]) if row["reviewed_at"] else None,
    }


class EvalRepository:
    def __init__(self, store: Store):
        self.store = store

    def _insert(self, table: str, rows: Iterable[Mapping[str, Any]]) -> int:
        return self.store.insert(table, [ch_values(r) for r in rows])

    # -- items -----------------------------------------------------------------------------------
    def item(self, item_id: str) -> dict | None:
        rows = self.store.query(
            f"SELECT {ITEM_COLUMNS} FROM eval_items FINAL WHERE item_id = {{id:String}}", {"id": item_id}
        )
        return _item(rows[0]) if rows else None

    def items(self, state: str | None = None) -> list[dict]:
        rows = self.store.query(
            f"SELECT {ITEM_COLUMNS} FROM eval_items FINAL "
            "WHERE {state:String} = '' OR state = {state:String} ORDER BY item_id",
            {"state": state or ""},
        )
        return [_item(r) for r in rows]

    def known_items(self, item_ids: Sequence[str]) -> set[str]:
        """Which of ``item_ids`` are eval items (in any state)."""
        rows = self.store.query(
            "SELECT DISTINCT item_id FROM eval_items WHERE item_id IN {ids:Array(String)}", {"ids": list(item_ids)}
        )
        return {r["item_id"] for r in rows}

    def embeddings(self) -> list[dict]:
        """``{item_id, state, embedding}`` of every item, by item_id."""
        return self.store.query("SELECT item_id, state, embedding FROM eval_items FINAL ORDER BY item_id")

    def embedding(self, item_id: str) -> list[float]:
        return self.store.query("SELECT embedding FROM eval_items FINAL WHERE item_id = {id:String}", {"id": item_id})[
            0
        ]["embedding"]

    def save_items(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Item versions (the newest ``version`` wins), each with its ``embedding``."""
        return self._insert("eval_items", rows)

    # -- history ---------------------------------------------------------------------------------
    def history(self, item_id: str) -> list[dict]:
        rows = self.store.query(
            "SELECT item_id, action, by, reason, at FROM eval_item_history "
            "WHERE item_id = {id:String} ORDER BY at, action",
            {"id": item_id},
        )
        return [{**r, "at": parse_ch_time(r["at"])} for r in rows]

    def record_history(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """``{item_id, action, by, reason, at}`` entries."""
        return self._insert("eval_item_history", rows)

    # -- spans, labels, results ------------------------------------------------------------------
    def save_gold_spans(self, rows: Iterable[Mapping[str, Any]]) -> int:
        return self._insert("gold_spans", rows)

    def save_claim_labels(self, rows: Iterable[Mapping[str, Any]]) -> int:
        return self._insert("claim_labels", rows)

    def save_results(self, rows: Iterable[Mapping[str, Any]]) -> int:
        return self._insert("eval_results", rows)

    def answered(self, run_id: str, item_ids: Sequence[str]) -> set[str]:
        """Which of ``item_ids`` the run has answered."""
        rows = self.store.query(
            "SELECT DISTINCT item_id FROM eval_results WHERE run_id = {run:String} AND item_id IN {ids:Array(String)}",
            {"run": run_id, "ids": list(item_ids)},
        )
        return {r["item_id"] for r in rows}

    def runs(self, run_id: str = "", versions: Mapping[str, str] | None = None, limit: int = 20) -> list[dict]:
        """Eval runs, newest first: ``{run_id, versions, items, produced_at}`` (items: results it holds; its
        versions as its newest result states them), those named ``run_id`` (if given) and whose versions hold every
        ``versions`` pair; ``total`` on each row counts every run that matches."""
        keys, values = zip(*sorted((versions or {}).items())) if versions else ((), ())
        rows = self.store.query(
            "SELECT run_id, argMax(versions, produced_at) AS run_versions, count() AS items, "
            "max(produced_at) AS produced, count() OVER () AS total FROM eval_results FINAL "
            "WHERE {run:String} = '' OR run_id = {run:String} GROUP BY run_id "
            "HAVING arrayAll((k, v) -> run_versions[k] = v, {keys:Array(String)}, {values:Array(String)}) "
            "ORDER BY produced DESC, run_id LIMIT {limit:UInt32}",
            {"run": run_id, "keys": list(keys), "values": list(values), "limit": limit},
        )
        return [
            {
                "run_id": r["run_id"],
                "versions": dict(r["run_versions"]),
                "items": int(r["items"]),
                "produced_at": parse_ch_time(r["produced"]),
                "total": int(r["total"]),
            }
            for r in rows
        ]

    def labelled_claims(self, item_id: str, run_id: str) -> dict[int, dict]:
        """The claims ``run_id`` labelled on the item: claim_idx -> ``{claim_idx, claim_text, claim_type}``."""
        rows = self.store.query(
            "SELECT claim_idx, any(claim_text) AS claim_text, any(claim_type) AS claim_type FROM claim_labels "
            "WHERE item_id = {id:String} AND run_id = {run:String} GROUP BY claim_idx",
            {"id": item_id, "run": run_id},
        )
        return {r["claim_idx"]: r for r in rows}

    def gold_spans(self, item_ids: Sequence[str]) -> list[dict]:
        """``{item_id, source_id, span_text, required}`` by item, then span order."""
        return self.store.query(
            "SELECT item_id, source_id, span_text, required FROM gold_spans FINAL "
            "WHERE item_id IN {ids:Array(String)} ORDER BY item_id, span_idx",
            {"ids": list(item_ids)},
        )

    def claim_labels(self, item_ids: Sequence[str]) -> list[dict]:
        """Every label of the items, by item, run, claim and labeler (``labeled_at`` as stored text)."""
        return self.store.query(
            "SELECT run_id, item_id, claim_idx, claim_text, claim_type, verdict, supporting_span, "
            "source_id, labeler, labeled_at FROM claim_labels FINAL WHERE item_id IN {ids:Array(String)} "
            "ORDER BY item_id, run_id, claim_idx, labeler",
            {"ids": list(item_ids)},
        )

    # -- metric and promotion inputs -------------------------------------------------------------
    def latest_traces(self, trace_ids: Sequence[str]) -> dict[str, tuple]:
        """trace_id -> its latest event as (event_id, route, question, query_type, answerable, stakes, answer_text,
        action, corpus version, claim texts, claim types, verdicts, spans, source ids, labelers)."""
        rows = self.store.query(
            "SELECT trace_id, argMax(tuple(event_id, route, query_text, query_type, answerable, stakes, answer_text, "
            "action, versions['corpus'], claim_texts, claim_types, verdicts, spans, source_ids, labelers), "
            "observed_at) AS t FROM events FINAL WHERE trace_id IN {ids:Array(String)} GROUP BY trace_id",
            {"ids": list(trace_ids)},
        )
        return {r["trace_id"]: tuple(r["t"]) for r in rows}

    def outcomes(self, run_id: str, labeler: str) -> list[dict]:
        """Approved items as ``run_id`` answered them, with the latest ``labeler:``-kind verdict per claim."""
        return self.store.query(
            "SELECT i.item_id AS item_id, i.query_type AS query_type, i.stakes AS stakes, i.answerable AS answerable, "
            "r.action AS action, l.verdicts AS verdicts "
            "FROM (SELECT * FROM eval_items FINAL WHERE state = 'approved') AS i "
            "INNER JOIN (SELECT item_id, action FROM eval_results FINAL WHERE run_id = {run:String}) AS r "
            "ON r.item_id = i.item_id "
            "LEFT JOIN (SELECT item_id, arrayMap(x -> x.2, arraySort(groupArray((claim_idx, v)))) AS verdicts "
            "FROM (SELECT item_id, claim_idx, argMax(verdict, labeled_at) AS v "
            "  FROM claim_labels FINAL WHERE run_id = {run:String} AND startsWith(labeler, {prefix:String}) "
            "  GROUP BY item_id, claim_idx) GROUP BY item_id) AS l ON l.item_id = i.item_id ORDER BY item_id",
            {"run": run_id, "prefix": f"{labeler}:"},
        )

    def label_pairs(self, run_id: str) -> list[dict]:
        """Claims of approved items that carry both a verifier and a human label (the latest of each)."""
        return self.store.query(
            "SELECT l.item_id AS item_id, l.claim_idx AS claim_idx, l.claim_type AS claim_type, "
            "l.verifier AS verifier, l.human AS human, i.query_type AS query_type, i.stakes AS stakes FROM "
            "(SELECT item_id, claim_idx, any(claim_type) AS claim_type, "
            "  argMaxIf(verdict, labeled_at, startsWith(labeler, 'verifier:')) AS verifier, "
            "  argMaxIf(verdict, labeled_at, startsWith(labeler, 'human:')) AS human, "
            "  countIf(startsWith(labeler, 'verifier:')) AS nv, countIf(startsWith(labeler, 'human:')) AS nh "
            "  FROM claim_labels FINAL WHERE run_id = {run:String} GROUP BY item_id, claim_idx) AS l "
            "INNER JOIN (SELECT item_id, query_type, stakes FROM eval_items FINAL WHERE state = 'approved') AS i "
            "ON i.item_id = l.item_id WHERE l.nv > 0 AND l.nh > 0 ORDER BY item_id, claim_idx",
            {"run": run_id},
        )
