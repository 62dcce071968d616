"""Issues, claim -> issue assignments and the embedding cache in ClickHouse.

The store does not import clustering: the repository is given how to decode an issue row and a
``claims`` row (``services.issues.records.issue_repository`` binds ``IssueRecord`` and
``FailingClaim``), and writes any issue with a ``to_row()``. Times in rows handed to it may be
aware datetimes; it formats them. Every row carries a write version from the injected clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from services.contract.model import FAILED_VERDICTS
from services.core.clock import utcnow
from services.core.errors import NotFound
from services.ingest.records import STORABLE_FROM, STORABLE_UNTIL
from services.store.backends import Store
from services.store.convert import Skip, ch_time, decode_rows, parse_ch_time
from services.store.exposure import EXEMPLAR, MEMBERS, note_shown
from services.store.rates import glob_like

CLAIM_COLUMNS = (
    "event_id, claim_idx, trace_id, route, observed_at, verdict, claim_type, text, score, chunk_id, "
    "source_id, span, labeler, versions, query_type, stakes, action, first_failed_stage"
)
ANSWER_EXCERPT_CHARS = 2000  # what a claim reader gets of its answer's text
CLAIM_ANSWER_FIELDS = ("query_text", "answer_text", "signals")  # what clustering.records reads of a claim's answer


def with_answer_text(claims_sql: str, events_where: str) -> str:
    """The rows of ``claims_sql`` (a SELECT of claims with an ``event_id``) with their answer's question, the
    first ANSWER_EXCERPT_CHARS of its text, and its signals, from ``events``: a claim row references its answer
    and copies none of its text. ``events_where`` narrows the events read to those the claims
    can belong to (their window), so the claims are not read twice."""
    return (
        f"SELECT c.*, e.query_text AS query_text, e.answer_text AS answer_text, e.signals AS signals "
        f"FROM ({claims_sql}) AS c LEFT JOIN (SELECT event_id, query_text, "
        f"substring(answer_text, 1, {ANSWER_EXCERPT_CHARS}) AS answer_text, signals FROM events "
        f"WHERE {events_where} LIMIT 1 BY event_id) AS e ON e.event_id = c.event_id"
    )


def ch_values(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row with its datetime values as DateTime64 literals (other values unchanged)."""
    return {k: ch_time(v) if isinstance(v, datetime) else v for k, v in row.items()}


class StoredIssue(Protocol):
    """What the repository reads from an issue (clustering.issue.IssueRecord)."""

    def to_row(self) -> dict[str, Any]: ...


def issue_row(issue: StoredIssue) -> dict[str, Any]:
    """An ``issues`` row (without its write version) for one issue."""
    return ch_values(issue.to_row())


I = TypeVar("I", bound=StoredIssue)  # noqa: E741
C = TypeVar("C")


class ClickHouseEmbeddingCache:
    """clustering.embed.EmbeddingCache over the embedding_cache table: nothing is embedded twice."""

    def __init__(self, store: Store):
        self.store = store

    def get_many(self, model: str, keys: list[str]) -> dict[str, np.ndarray]:
        if not keys:
            return {}
        rows = self.store.query(
            "SELECT key, any(vector) AS v FROM embedding_cache WHERE model = {m:String} "
            "AND key IN {keys:Array(String)} GROUP BY key",
            {"m": model, "keys": keys},
        )
        return {r["key"]: np.asarray(r["v"], dtype=np.float32) for r in rows}

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        self.store.insert(
            "embedding_cache",
            ({"model": model, "key": k, "vector": np.asarray(v, dtype=np.float32).tolist()} for k, v in items.items()),
        )


class IssueRepository(Generic[I, C]):
    def __init__(
        self,
        store: Store,
        decode_issue: Callable[[Mapping], I],
        decode_claim: Callable[[Mapping], C],
        clock: Callable[[], datetime] = utcnow,
    ):
        self.store = store
        self.decode_issue = decode_issue
        self.decode_claim = decode_claim
        self.clock = clock

    def _version(self) -> str:
        """Write version (DateTime64(6)): the newest write of a row wins."""
        return self.clock().astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")

    # -- issues ---------------------------------------------------------------
    def save(self, records: Iterable[I]) -> None:
        version = self._version()
        self.store.insert("issues", ({**issue_row(r), "updated_at": version} for r in records))

    def load(self, issue_ids: Sequence[str] | None = None) -> list[I]:
        where, params = "", {}
        if issue_ids is not None:
            where, params = "WHERE issue_id IN {ids:Array(String)}", {"ids": list(issue_ids)}
        rows = self.store.query(f"SELECT * EXCEPT updated_at FROM issues FINAL {where} ORDER BY issue_id", params)
        return [self.decode_issue(r) for r in rows]

    def get(self, issue_id: str) -> I:
        found = self.load([issue_id])
        if not found:
            raise NotFound(f"no issue {issue_id!r}; list issues with `claimwatch issues list`")
        return found[0]

    # -- members --------------------------------------------------------------
    def save_members(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Assignments ``{claim_key, issue_id, probability, source, config_name, x, y, observed_at}``."""
        version = self._version()
        return self.store.insert("issue_members", ({**ch_values(r), "assigned_at": version} for r in rows))

    def move_members(self, moves: Mapping[str, str]) -> None:
        """Every member of each issue in ``moves`` becomes a member of the issue it maps to (merges), in one pass."""
        if not moves:
            return
        sources = list(moves)
        self.store.command(
            "INSERT INTO issue_members SELECT claim_key, transform(issue_id, {src:Array(String)}, "
            "{into:Array(String)}, issue_id), probability, source, config_name, x, y, observed_at, "
            "{at:DateTime64(6)} FROM issue_members FINAL WHERE issue_id IN {src:Array(String)}",
            {"src": sources, "into": [moves[s] for s in sources], "at": self._version()},
        )

    def member_counts(self) -> dict[str, dict]:
        """Per issue: claims assigned (batch + online), the first and last member's event time (observed_at, as
        datetimes) and hourly counts in event time."""
        rows = self.store.query(
            "SELECT issue_id, count() AS n, min(observed_at) AS first, max(observed_at) AS last, "
            "groupArray((toString(toStartOfHour(observed_at)), 1)) AS hours "
            "FROM issue_members FINAL WHERE issue_id != '' GROUP BY issue_id"
        )
        out = {}
        for r in rows:
            hourly: dict[str, int] = {}
            for hour, n in r["hours"]:
                hourly[hour] = hourly.get(hour, 0) + n
            out[r["issue_id"]] = {
                "count": r["n"],
                "first": _time(r["first"]),
                "last": _time(r["last"]),
                "hourly": hourly,
            }
        return out

    def member_hours(self, since: datetime, until: datetime) -> dict[str, dict[int, int]]:
        """Per issue, members by whole hours before ``until`` in event time (0: the hour up to ``until``),
        for members observed in (since, until]."""
        rows = self.store.query(
            "SELECT issue_id, toInt64(intDiv(toUnixTimestamp64Milli({until:DateTime64(3)}) - "
            "toUnixTimestamp64Milli(observed_at), 3600000)) AS ago, count() AS n FROM issue_members FINAL "
            "WHERE issue_id != '' AND observed_at > {since:DateTime64(3)} AND observed_at <= {until:DateTime64(3)} "
            "GROUP BY issue_id, ago",
            {"since": ch_time(since), "until": ch_time(until)},
        )
        out: dict[str, dict[int, int]] = {}
        for r in rows:
            out.setdefault(r["issue_id"], {})[int(r["ago"])] = int(r["n"])
        return out

    def members_on_route(self, route: str, since: datetime, until: datetime) -> dict[str, int]:
        """Per issue, its members whose event is on ``route`` and observed in [since, until]."""
        rows = self.store.query(
            "SELECT m.issue_id AS issue_id, count() AS n FROM (SELECT issue_id, splitByChar(':', claim_key)[1] AS "
            "event_id FROM issue_members FINAL WHERE issue_id != '' AND observed_at >= {since:DateTime64(3)} "
            "AND observed_at <= {until:DateTime64(3)}) AS m INNER JOIN (SELECT DISTINCT event_id FROM events "
            "WHERE route = {route:String} AND observed_at >= {since:DateTime64(3)} "
            "AND observed_at <= {until:DateTime64(3)}) AS e ON e.event_id = m.event_id GROUP BY m.issue_id",
            {"route": route, "since": ch_time(since), "until": ch_time(until)},
        )
        return {r["issue_id"]: int(r["n"]) for r in rows}

    def failing_by_issue(self, routes: str, since: datetime, until: datetime) -> tuple[dict[str, float], float]:
        """Failed claims on the routes a glob matches, observed in [since, until], each weighing its answer's
        1 / sampling rate: per issue, and in all (members or not; the rest are unclustered)."""
        window = {"routes": glob_like(routes), "since": ch_time(since), "until": ch_time(until)}
        events = (
            "SELECT event_id, any(1 / sampling_rate) AS w FROM events WHERE route LIKE {routes:String} "
            "AND observed_at >= {since:DateTime64(3)} AND observed_at <= {until:DateTime64(3)} GROUP BY event_id"
        )
        rows = self.store.query(
            "SELECT m.issue_id AS issue_id, sum(e.w) AS failed FROM (SELECT issue_id, splitByChar(':', claim_key)[1] "
            "AS event_id FROM issue_members FINAL WHERE issue_id != '' AND observed_at >= {since:DateTime64(3)} "
            f"AND observed_at <= {{until:DateTime64(3)}}) AS m INNER JOIN ({events}) AS e ON e.event_id = m.event_id "
            "GROUP BY m.issue_id",
            window,
        )
        total = self.store.query(
            "SELECT sum(w_failed) AS failed FROM rate_minute WHERE dim = '' AND route LIKE {routes:String} "
            "AND minute >= toStartOfMinute({since:DateTime64(3)}) AND minute <= {until:DateTime64(3)}",
            window,
        )
        return {r["issue_id"]: float(r["failed"]) for r in rows}, float(total[0]["failed"] or 0) if total else 0.0

    def representatives_on_route(
        self, issue_ids: Sequence[str], route: str, since: datetime, until: datetime
    ) -> dict[str, dict]:
        """Per issue, its most typical member (highest probability) on ``route`` observed in [since, until]:
        ``claim_key``, ``text``, ``trace_id``, ``verdict``. Issues without such a member are left out."""
        if not issue_ids:
            return {}
        rows = self.store.query(
            "SELECT m.issue_id AS issue_id, m.claim_key AS claim_key, c.text AS text, c.trace_id AS trace_id, "
            "c.verdict AS verdict FROM (SELECT issue_id, claim_key, probability, splitByChar(':', claim_key)[1] AS "
            "event_id, splitByChar(':', claim_key)[2] AS idx FROM issue_members FINAL "
            "WHERE issue_id IN {ids:Array(String)} AND observed_at >= {since:DateTime64(3)} "
            "AND observed_at <= {until:DateTime64(3)}) AS m "
            "INNER JOIN (SELECT event_id, toString(claim_idx) AS idx, text, trace_id, verdict FROM claims "
            "WHERE route = {route:String} AND observed_at >= {since:DateTime64(3)} "
            "AND observed_at <= {until:DateTime64(3)}) AS c ON c.event_id = m.event_id AND c.idx = m.idx "
            "ORDER BY m.issue_id, m.probability DESC, m.claim_key LIMIT 1 BY m.issue_id",
            {"ids": list(issue_ids), "route": route, "since": ch_time(since), "until": ch_time(until)},
        )
        note_shown(self.store, (r["claim_key"] for r in rows), EXEMPLAR)
        return {r["issue_id"]: {k: r[k] for k in ("claim_key", "text", "trace_id", "verdict")} for r in rows}

    def members(self, issue_id: str, limit: int) -> list[dict]:
        return self._shown(
            self.store.query(
                "SELECT m.claim_key AS claim_key, m.probability AS probability, m.source AS source, m.x AS x, "
                "m.y AS y, c.trace_id AS trace_id, c.event_id AS event_id, c.route AS route, c.verdict AS verdict, "
                "c.text AS text, c.span AS span, c.observed_at AS observed_at "
                "FROM (SELECT * FROM issue_members FINAL WHERE issue_id = {id:String} ORDER BY probability DESC "
                "LIMIT {n:UInt32}) AS m "
                "LEFT JOIN claims AS c ON c.event_id = splitByChar(':', m.claim_key)[1] "
                "AND toString(c.claim_idx) = splitByChar(':', m.claim_key)[2]",
                {"id": issue_id, "n": limit},
            )
        )

    # What a reader may take from a claim's answer; a claim row copies none of it.
    _ANSWER_FIELDS = {
        "question": "any(query_text)",
        "query_text": "any(query_text)",
        "answer_text": f"any(substring(answer_text, 1, {ANSWER_EXCERPT_CHARS}))",
        "signals": "any(signals)",
    }

    def _with_answer(self, rows: list[dict], *fields: str) -> list[dict]:
        """Each row (with an ``event_id``) with ``fields`` of its answer, read from ``events`` by id in one query:
        for readers whose rows are few (a page, a batch). '' where the answer is no longer stored."""
        ids = sorted({r["event_id"] for r in rows if r.get("event_id")})
        if not ids:
            return [{**r, **dict.fromkeys(fields, "")} for r in rows]
        picked = ", ".join(f"{self._ANSWER_FIELDS[f]} AS {f}" for f in fields)
        found = {
            a["event_id"]: a
            for a in self.store.query(
                f"SELECT event_id, {picked} FROM events WHERE event_id IN {{ids:Array(String)}} GROUP BY event_id",
                {"ids": ids},
            )
        }
        return [{**r, **{f: found.get(r.get("event_id") or "", {}).get(f, "") for f in fields}} for r in rows]

    def map_points(self, issue_ids: Sequence[str], per_issue: int) -> list[dict]:
        return self.store.query(
            "SELECT issue_id, claim_key, x, y FROM issue_members FINAL WHERE issue_id IN {ids:Array(String)} "
            "AND source = 'batch' ORDER BY issue_id, claim_key LIMIT {n:UInt32} BY issue_id",
            {"ids": list(issue_ids), "n": per_issue},
        )

    # -- input ----------------------------------------------------------------
    def failing_claims(self, since: datetime, skip: Skip | None = None) -> list[C]:
        """Failing claims observed from ``since`` on; ``skip``: see ``decode_rows``."""
        window = "observed_at >= {since:DateTime64(3)}"
        params: dict = {"failed": sorted(FAILED_VERDICTS), "since": ch_time(since)}
        claims = f"SELECT {CLAIM_COLUMNS} FROM claims FINAL WHERE verdict IN {{failed:Array(String)}} AND {window}"
        rows = self.store.query(f"{with_answer_text(claims, window)} ORDER BY event_id, claim_idx", params)
        return decode_rows(rows, self._claim, _claim_key, skip)

    _NOT_IN_AN_ISSUE = (
        "concat(event_id, ':', toString(claim_idx)) NOT IN (SELECT claim_key FROM issue_members FINAL "
        "WHERE {held} AND observed_at >= {since:DateTime64(3)} AND observed_at <= {until:DateTime64(3)})"
    )
    _ROUTE_WINDOW = (
        "route = {route:String} AND verdict IN {failed:Array(String)} "
        "AND observed_at >= {since:DateTime64(3)} AND observed_at <= {until:DateTime64(3)}"
    )

    def _window_params(self, route: str, since: datetime, until: datetime) -> dict:
        return {"route": route, "failed": sorted(FAILED_VERDICTS), "since": ch_time(since), "until": ch_time(until)}

    def window_claims(
        self, route: str, since: datetime, until: datetime, limit: int, skip: Skip | None = None
    ) -> list[C]:
        """Failing claims on ``route`` observed in [since, until] that no issue holds (never assigned, or noise),
        newest first: an alert's window, assigned before the backlog."""
        held = self._NOT_IN_AN_ISSUE.replace("{held}", "issue_id != ''")
        rows = self.store.query(
            f"SELECT {CLAIM_COLUMNS} FROM claims FINAL WHERE {self._ROUTE_WINDOW} AND {held} "
            "ORDER BY observed_at DESC, event_id, claim_idx LIMIT {n:UInt32}",
            {**self._window_params(route, since, until), "n": limit},
        )
        rows = self._with_answer(rows, *CLAIM_ANSWER_FIELDS)
        return decode_rows(rows, self._claim, _claim_key, skip)

    def unassigned_on_route(self, route: str, since: datetime, until: datetime) -> int:
        """Failing claims on ``route`` observed in [since, until] that no assignment has seen yet (not even as
        noise)."""
        unseen = self._NOT_IN_AN_ISSUE.replace("{held}", "1")
        rows = self.store.query(
            f"SELECT count() AS n FROM claims FINAL WHERE {self._ROUTE_WINDOW} AND {unseen}",
            self._window_params(route, since, until),
        )
        return int(rows[0]["n"]) if rows else 0

    def members_in_window(self, issue_id: str, route: str, since: datetime, until: datetime, limit: int) -> list[dict]:
        """The issue's members on ``route`` observed in [since, until], with their claim, question and the event's
        versions (as ``members``, plus ``versions``): the clustered ones most typical first, then those assigned
        online since, oldest first, so members arriving while the alert is open do not reorder the ones shown."""
        return self._shown(
            self.store.query(
                "SELECT m.claim_key AS claim_key, m.probability AS probability, m.source AS source, m.x AS x, "
                "m.y AS y, c.trace_id AS trace_id, c.event_id AS event_id, c.route AS route, c.verdict AS verdict, "
                "c.text AS text, c.span AS span, c.observed_at AS observed_at, c.versions AS versions "
                "FROM (SELECT claim_key, probability, source, x, y, splitByChar(':', claim_key)[1] AS event_id, "
                "splitByChar(':', claim_key)[2] AS idx FROM issue_members FINAL WHERE issue_id = {id:String} "
                "AND observed_at >= {since:DateTime64(3)} AND observed_at <= {until:DateTime64(3)}) AS m "
                "INNER JOIN (SELECT * FROM claims WHERE route = {route:String} "
                "AND observed_at >= {since:DateTime64(3)} AND observed_at <= {until:DateTime64(3)}) AS c "
                "ON c.event_id = m.event_id AND toString(c.claim_idx) = m.idx "
                "ORDER BY m.source = 'online', if(m.source = 'online', 0, m.probability) DESC, c.observed_at, "
                "m.claim_key LIMIT {n:UInt32}",
                {"id": issue_id, "route": route, "since": ch_time(since), "until": ch_time(until), "n": limit},
            )
        )

    def _shown(self, members: list[dict]) -> list[dict]:
        """Members as a reader sees them, with their question; a blind reviewer's claim among them is exposed."""
        note_shown(self.store, (m["claim_key"] for m in members), MEMBERS)
        return self._with_answer(members, "question")

    def claims_ingested_after(
        self, after: datetime, limit: int, skip: Skip | None = None
    ) -> tuple[list[C], datetime | None]:
        """New failing claims by ingestion time, for online assignment; returns the new high mark (past any claim
        ``skip`` was told of: see ``decode_rows``)."""
        failed = sorted(FAILED_VERDICTS)
        rows = self.store.query(
            "SELECT event_id, ingested_at FROM events WHERE ingested_at > {after:DateTime64(3)} "
            "AND hasAny(verdicts, {failed:Array(String)}) ORDER BY ingested_at LIMIT {n:UInt32}",
            {"after": ch_time(after), "failed": failed, "n": limit},
        )
        if not rows:
            return [], None
        ids = [r["event_id"] for r in rows]
        claims = self._with_answer(
            self.store.query(
                f"SELECT {CLAIM_COLUMNS} FROM claims WHERE event_id IN {{ids:Array(String)}} "
                "AND verdict IN {failed:Array(String)} ORDER BY event_id, claim_idx",
                {"ids": ids, "failed": failed},
            ),
            *CLAIM_ANSWER_FIELDS,
        )
        mark = datetime.fromisoformat(rows[-1]["ingested_at"]).replace(tzinfo=UTC)
        return decode_rows(claims, self._claim, _claim_key, skip), mark

    def _claim(self, row: Mapping[str, Any]) -> C:
        """A claims row decoded. Its event time must be one the store holds: a row written past the contract can
        carry any, and a claim dated year 1 would spread into members, issues and hourly counts."""
        observed_at = parse_ch_time(row["observed_at"])
        if not STORABLE_FROM <= observed_at < STORABLE_UNTIL:
            raise ValueError(f"event time {row['observed_at']} is outside what the store holds")
        return self.decode_claim(row)

    def event_details(self, event_ids: Sequence[str]) -> dict[str, dict]:
        """Per event: answer_text, evidence and signals (JSON text) and first_failed_stage."""
        if not event_ids:
            return {}
        rows = self.store.query(
            "SELECT event_id, answer_text, evidence, signals, first_failed_stage FROM events "
            "WHERE event_id IN {ids:Array(String)}",
            {"ids": list(event_ids)},
        )
        return {r["event_id"]: r for r in rows}

    # -- triage ---------------------------------------------------------------
    def members_after(self, issue_id: str, since: datetime) -> int:
        """The issue's members observed after ``since`` (an archive's "N more claims")."""
        rows = self.store.query(
            "SELECT count() AS n FROM issue_members FINAL WHERE issue_id = {id:String} "
            "AND observed_at > {since:DateTime64(3)}",
            {"id": issue_id, "since": ch_time(since)},
        )
        return int(rows[0]["n"]) if rows else 0

    def latest_versions(self, route: str) -> dict[str, str]:
        """The versions of the newest claim stored on ``route`` ({} without one): what is current there."""
        rows = self.store.query(
            "SELECT versions FROM claims WHERE route = {route:String} ORDER BY observed_at DESC LIMIT 1",
            {"route": route},
        )
        return dict(rows[0]["versions"]) if rows else {}

    # -- aggregates over every member (never a sample) -------------------------
    _MEMBER_EVENTS = (
        "SELECT DISTINCT splitByChar(':', claim_key)[1] FROM issue_members FINAL WHERE issue_id = {id:String}"
    )
    _SIGNALS = ("premise_similarity", "support_delta", "sample_disagreement")

    def member_breakdown(self, issue_id: str) -> list[dict]:
        """Every member of the issue, counted per (route, verdict), joined to its claim. ``first``/``last`` are the
        members' event times (observed_at, as datetimes). Members whose claim is no longer stored are left out."""
        rows = self.store.query(
            "SELECT c.route AS route, c.verdict AS verdict, count() AS n, min(m.observed_at) AS first, "
            "max(m.observed_at) AS last "
            "FROM (SELECT splitByChar(':', claim_key)[1] AS event_id, splitByChar(':', claim_key)[2] AS idx, "
            "observed_at FROM issue_members FINAL WHERE issue_id = {id:String}) AS m "
            "INNER JOIN (SELECT event_id, toString(claim_idx) AS idx, route, verdict FROM claims FINAL "
            f"WHERE event_id IN ({self._MEMBER_EVENTS})) AS c "
            "ON c.event_id = m.event_id AND c.idx = m.idx GROUP BY route, verdict ORDER BY route, verdict",
            {"id": issue_id},
        )
        return [{**r, "n": int(r["n"]), "first": _time(r["first"]), "last": _time(r["last"])} for r in rows]

    def member_span(self, issue_id: str) -> dict:
        """Members, the first and last member's event time (observed_at) and hourly counts in event time."""
        rows = self.store.query(
            "SELECT toString(toStartOfHour(observed_at)) AS hour, count() AS n, min(observed_at) AS first, "
            "max(observed_at) AS last FROM issue_members FINAL WHERE issue_id = {id:String} GROUP BY hour "
            "ORDER BY hour",
            {"id": issue_id},
        )
        return {
            "count": sum(int(r["n"]) for r in rows),
            "hourly": {r["hour"]: int(r["n"]) for r in rows},
            "first": min((t for r in rows if (t := _time(r["first"])) is not None), default=None),
            "last": max((t for r in rows if (t := _time(r["last"])) is not None), default=None),
        }

    def member_events(self, issue_id: str) -> dict:
        """Over every event behind the issue's members: events, distinct traces, first failed stages, and per
        signal how many events carried it and its mean over those (cherry_pick: events with a non-empty list)."""
        signals = ", ".join(
            f"countIf(JSONHas(signals, '{k}')) AS {k}_n, avgIf(JSONExtractFloat(signals, '{k}'), "
            f"JSONHas(signals, '{k}')) AS {k}_mean"
            for k in self._SIGNALS
        )
        rows = self.store.query(
            f"SELECT count() AS events, uniqExact(trace_id) AS traces, {signals}, "
            "countIf(JSONHas(signals, 'cherry_pick')) AS cherry_pick_n, "
            "countIf(length(JSONExtractArrayRaw(signals, 'cherry_pick')) > 0) AS cherry_picked, "
            "arraySort(groupUniqArrayArray(JSONExtract(signals, 'cherry_pick', 'Array(String)'))) AS chunks "
            f"FROM events FINAL WHERE event_id IN ({self._MEMBER_EVENTS})",
            {"id": issue_id},
        )
        stages = self.store.query(
            "SELECT first_failed_stage AS stage, count() AS n FROM events FINAL "
            f"WHERE event_id IN ({self._MEMBER_EVENTS}) GROUP BY stage",
            {"id": issue_id},
        )
        row = rows[0] if rows else {}
        return {
            "events": int(row.get("events") or 0),
            "traces": int(row.get("traces") or 0),
            "stages": {r["stage"]: int(r["n"]) for r in stages if r["stage"]},
            "signals": {
                k: (int(row.get(f"{k}_n") or 0), row.get(f"{k}_mean") if row.get(f"{k}_n") else None)
                for k in self._SIGNALS
            },
            "cherry_pick": (
                int(row.get("cherry_pick_n") or 0),
                int(row.get("cherry_picked") or 0),
                list(row.get("chunks") or []),
            ),
        }


def _claim_key(row: Mapping[str, Any]) -> str:
    return f"{row['event_id']}:{row['claim_idx']}"


def _time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    ts = datetime.fromisoformat(str(value))
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
