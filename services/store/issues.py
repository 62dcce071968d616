"""Issues, claim -> issue assignments and the embedding cache in ClickHouse."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterable, Sequence

import numpy as np

from clustering.issue import IssueRecord
from clustering.records import FailingClaim
from services.core.errors import NotFound
from services.store.backends import Store
from services.store.convert import ch_time

FAILED = ("unsupported", "contradicted", "overreach", "stale", "no_source")
CLAIM_COLUMNS = ("event_id, claim_idx, trace_id, route, observed_at, verdict, claim_type, text, score, chunk_id, "
                 "source_id, span, labeler, versions, query_text, query_type, stakes, answer_text, action, "
                 "first_failed_stage, signals")


def _version() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


class ClickHouseEmbeddingCache:
    """clustering.embed.EmbeddingCache over the embedding_cache table: nothing is embedded twice."""

    def __init__(self, store: Store):
        self.store = store

    def get_many(self, model: str, keys: list[str]) -> dict[str, np.ndarray]:
        if not keys:
            return {}
        rows = self.store.query("SELECT key, any(vector) AS v FROM embedding_cache WHERE model = {m:String} "
                                "AND key IN {keys:Array(String)} GROUP BY key", {"m": model, "keys": keys})
        return {r["key"]: np.asarray(r["v"], dtype=np.float32) for r in rows}

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        self.store.insert("embedding_cache", ({"model": model, "key": k, "vector": np.asarray(v, dtype=np.float32).tolist()}
                                              for k, v in items.items()))


class IssueStore:
    def __init__(self, store: Store):
        self.store = store

    # -- issues ---------------------------------------------------------------
    def save(self, records: Iterable[IssueRecord]) -> None:
        version = _version()
        self.store.insert("issues", ({**r.to_row(), "updated_at": version} for r in records))

    def load(self, issue_ids: Sequence[str] | None = None) -> list[IssueRecord]:
        where, params = "", {}
        if issue_ids is not None:
            where, params = "WHERE issue_id IN {ids:Array(String)}", {"ids": list(issue_ids)}
        rows = self.store.query(f"SELECT * EXCEPT updated_at FROM issues FINAL {where} ORDER BY issue_id", params)
        return [IssueRecord.from_row(r) for r in rows]

    def get(self, issue_id: str) -> IssueRecord:
        found = self.load([issue_id])
        if not found:
            raise NotFound(f"no issue {issue_id!r}; list issues with `claimwatch issues list`")
        return found[0]

    # -- members --------------------------------------------------------------
    def save_members(self, rows: Iterable[dict]) -> int:
        version = _version()
        return self.store.insert("issue_members", ({**r, "assigned_at": version} for r in rows))

    def member_counts(self, since: datetime | None = None) -> dict[str, dict]:
        """Per issue: claims assigned (batch + online), and hourly counts over the last 24 h."""
        rows = self.store.query(
            "SELECT issue_id, count() AS n, max(observed_at) AS last, "
            "groupArray((toString(toStartOfHour(observed_at)), 1)) AS hours "
            "FROM issue_members FINAL WHERE issue_id != '' GROUP BY issue_id")
        out = {}
        for r in rows:
            hourly: dict[str, int] = {}
            for hour, n in r["hours"]:
                hourly[hour] = hourly.get(hour, 0) + n
            out[r["issue_id"]] = {"count": r["n"], "last": r["last"], "hourly": hourly}
        return out

    def members(self, issue_id: str, limit: int) -> list[dict]:
        return self.store.query(
            "SELECT m.claim_key AS claim_key, m.probability AS probability, m.source AS source, m.x AS x, m.y AS y, "
            "c.trace_id AS trace_id, c.event_id AS event_id, c.route AS route, c.verdict AS verdict, c.text AS text, "
            "c.query_text AS question, c.span AS span, c.observed_at AS observed_at "
            "FROM (SELECT * FROM issue_members FINAL WHERE issue_id = {id:String} ORDER BY probability DESC "
            "LIMIT {n:UInt32}) AS m "
            "LEFT JOIN claims AS c ON c.event_id = splitByChar(':', m.claim_key)[1] "
            "AND toString(c.claim_idx) = splitByChar(':', m.claim_key)[2]",
            {"id": issue_id, "n": limit})

    def map_points(self, issue_ids: Sequence[str], per_issue: int) -> list[dict]:
        return self.store.query(
            "SELECT issue_id, claim_key, x, y FROM issue_members FINAL WHERE issue_id IN {ids:Array(String)} "
            "AND source = 'batch' ORDER BY issue_id, claim_key LIMIT {n:UInt32} BY issue_id",
            {"ids": list(issue_ids), "n": per_issue})

    # -- input ----------------------------------------------------------------
    def failing_claims(self, since: datetime, until: datetime | None = None) -> list[FailingClaim]:
        where = "verdict IN {failed:Array(String)} AND observed_at >= {since:DateTime64(3)}"
        params: dict = {"failed": list(FAILED), "since": ch_time(since)}
        if until is not None:
            where += " AND observed_at <= {until:DateTime64(3)}"
            params["until"] = ch_time(until)
        rows = self.store.query(f"SELECT {CLAIM_COLUMNS} FROM claims FINAL WHERE {where} ORDER BY event_id, claim_idx",
                                params)
        return [FailingClaim.from_claims_row(r) for r in rows]

    def claims_ingested_after(self, after: datetime, limit: int) -> tuple[list[FailingClaim], datetime | None]:
        """New failing claims by ingestion time, for online assignment; returns the new high mark."""
        rows = self.store.query(
            "SELECT event_id, ingested_at FROM events WHERE ingested_at > {after:DateTime64(3)} "
            "AND hasAny(verdicts, {failed:Array(String)}) ORDER BY ingested_at LIMIT {n:UInt32}",
            {"after": ch_time(after), "failed": list(FAILED), "n": limit})
        if not rows:
            return [], None
        ids = [r["event_id"] for r in rows]
        claims = self.store.query(
            f"SELECT {CLAIM_COLUMNS} FROM claims WHERE event_id IN {{ids:Array(String)}} "
            "AND verdict IN {failed:Array(String)} ORDER BY event_id, claim_idx", {"ids": ids, "failed": list(FAILED)})
        mark = datetime.fromisoformat(rows[-1]["ingested_at"]).replace(tzinfo=timezone.utc)
        return [FailingClaim.from_claims_row(r) for r in claims], mark

    def traces(self, trace_ids: Sequence[str]) -> list[dict]:
        return self.store.query("SELECT * FROM claims WHERE trace_id IN {ids:Array(String)} ORDER BY event_id, claim_idx",
                                {"ids": list(trace_ids)})
