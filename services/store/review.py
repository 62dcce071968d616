"""Human review in ClickHouse: the queue of sampled claims, slot reservations and labels.

Rows go in and come out as plain dicts; ``services.review`` holds the logic (which slot is free,
who won a race, what is settled). Datetime values handed in are formatted here; times read back
are aware datetimes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from services.contract.model import FAILED_VERDICTS
from services.core.score_bands import N_BANDS, N_CELLS, SCORE_EDGES
from services.store.backends import Store
from services.store.convert import ch_time, parse_ch_time
from services.store.exposure import exposed_by
from services.store.issues import ch_values
from services.store.rates import route_conditions

QUEUE_COLUMNS = (
    "claim_key, event_id, claim_idx, route, verdict, issue_id, verifier_version, origin, stratum, weight, "
    "reviewers, observed_at, queued_at, score"
)
RESERVATION_COLUMNS = "token, claim_key, slot_no, reviewer, reserved_at, expires_at, toString(written_at) AS written_at"
LABEL_COLUMNS = "claim_key, slot_no, reviewer, role, label, span, chunk_id, guide_version, blind, labeled_at"
# The labels that count: an adjudicator's, and a reviewer's made blind (an exposed one fills no slot).
_COUNTED = "(role != 'reviewer' OR blind = 1)"


# The score band of a claim (services/core/score_bands.py: 0 unscored, else 1 + the edges at or under the score).
def _band(score: str) -> str:
    return f"if(isNull({score}), 0, 1 + arrayCount(e -> assumeNotNull({score}) >= e, {{edges:Array(Float32)}}))"


# Claims of the window with their stratum (the verdict with its score band when scored: 'contradicted#4'); the
# issue, when the claim has one, from its newest assignment.
_CANDIDATES = (
    "SELECT concat(c.event_id, ':', toString(c.claim_idx)) AS claim_key, c.event_id AS event_id, "
    "c.claim_idx AS claim_idx, c.route AS route, c.verdict AS verdict, m.issue_id AS issue_id, "
    "c.versions['verifier'] AS verifier_version, c.observed_at AS observed_at, c.score AS score, "
    "concat(c.route, '|', c.verdict, if(isNull(c.score), '', concat('#', toString("
    + _band("c.score").replace("{", "{{").replace("}", "}}")  # the query is formatted again, with its window
    + "))), '|', m.issue_id) AS stratum "
    "FROM (SELECT * FROM claims FINAL WHERE verdict != 'trivial' AND {where}) AS c "
    "LEFT JOIN (SELECT claim_key, issue_id FROM issue_members FINAL) AS m "
    "ON m.claim_key = concat(c.event_id, ':', toString(c.claim_idx)) "
    "WHERE claim_key NOT IN (SELECT claim_key FROM review_queue)"
)
_WINDOW = "observed_at >= {since:DateTime64(3)} AND observed_at < {until:DateTime64(3)}"


def _times(row: dict, *names: str) -> dict:
    return {**row, **{n: parse_ch_time(row[n]) for n in names}}


class ReviewRepository:
    def __init__(self, store: Store):
        self.store = store

    # -- the queue -------------------------------------------------------------------------------
    def stratum_sizes(self, since: datetime, until: datetime) -> dict[str, int]:
        """Claims of [since, until) not yet queued, per stratum (route|verdict|issue)."""
        rows = self.store.query(
            f"SELECT stratum, count() AS n FROM ({_CANDIDATES.format(where=_WINDOW)}) GROUP BY stratum",
            {"since": ch_time(since), "until": ch_time(until), "edges": list(SCORE_EDGES)},
        )
        return {r["stratum"]: int(r["n"]) for r in rows}

    def sample(self, since: datetime, until: datetime, quotas: Mapping[str, int], seed: int) -> list[dict]:
        """Up to ``quotas[stratum]`` claims of each stratum, drawn by a seeded hash (the same seed draws the same)."""
        if not quotas:
            return []
        rows = self.store.query(
            f"SELECT * EXCEPT rank FROM (SELECT *, row_number() OVER (PARTITION BY stratum ORDER BY "
            f"cityHash64(claim_key, {{seed:UInt64}})) AS rank FROM ({_CANDIDATES.format(where=_WINDOW)})) "
            "WHERE rank <= {quotas:Map(String, UInt32)}[stratum] ORDER BY stratum, rank",
            {
                "since": ch_time(since),
                "until": ch_time(until),
                "seed": seed,
                "quotas": dict(quotas),
                "edges": list(SCORE_EDGES),
            },
        )
        return [_times(r, "observed_at") for r in rows]

    def eval_claims(self) -> list[dict]:
        """Claims of the answers approved eval items came from, not yet queued."""
        where = "event_id IN (SELECT origin_event_id FROM eval_items FINAL WHERE state = 'approved')"
        rows = self.store.query(_CANDIDATES.format(where=where) + " ORDER BY claim_key", {"edges": list(SCORE_EDGES)})
        return [_times(r, "observed_at") for r in rows]

    def enqueue(self, rows: Iterable[Mapping[str, Any]]) -> int:
        return self.store.insert("review_queue", [ch_values(r) for r in rows])

    def queued_between(self, since: datetime, until: datetime, origin: str) -> int:
        rows = self.store.query(
            "SELECT count() AS n FROM review_queue FINAL WHERE origin = {origin:String} AND "
            "queued_at >= {since:DateTime64(3)} AND queued_at < {until:DateTime64(3)}",
            {"origin": origin, "since": ch_time(since), "until": ch_time(until)},
        )
        return int(rows[0]["n"])

    def queued(self, claim_key: str) -> dict | None:
        rows = self.store.query(
            f"SELECT {QUEUE_COLUMNS} FROM review_queue FINAL WHERE claim_key = {{k:String}}", {"k": claim_key}
        )
        return _times(rows[0], "observed_at", "queued_at") if rows else None

    def open_claims(self, reviewer: str, limit: int) -> list[dict]:
        """Queued claims with an unlabelled slot that ``reviewer`` has not labelled: partly labelled first (so
        claims get finished), then oldest queued. ``filled`` lists the slot numbers labelled blind."""
        return self.store.query(
            "SELECT q.claim_key AS claim_key, q.reviewers AS reviewers, l.filled AS filled FROM "
            "(SELECT claim_key, reviewers, queued_at FROM review_queue FINAL) AS q LEFT JOIN "
            "(SELECT claim_key, groupArrayIf(slot_no, blind = 1) AS filled, groupArray(reviewer) AS labellers "
            "FROM review_labels  FINAL WHERE role = 'reviewer' GROUP BY claim_key) AS l ON l.claim_key = q.claim_key "
            "WHERE length(l.filled) < q.reviewers AND NOT has(l.labellers, {reviewer:String}) "
            "ORDER BY length(l.filled) DESC, q.queued_at, q.claim_key LIMIT {n:UInt32}",
            {"reviewer": reviewer, "n": limit},
        )

    # -- reservations ----------------------------------------------------------------------------
    def reserve(self, row: Mapping[str, Any]) -> None:
        """``{token, claim_key, slot_no, reviewer, reserved_at, expires_at}``; the server stamps written_at."""
        self.store.insert("review_reservations", [ch_values(row)])

    def reservations(self, claim_keys: Sequence[str], live_after: datetime) -> list[dict]:
        """Reservations of the claims still live after ``live_after`` and not yet labelled, in write order (the race
        order). A labelled one holds no slot: a blind label fills it, and one labelled not blind frees it."""
        rows = self.store.query(
            f"SELECT {RESERVATION_COLUMNS} FROM review_reservations WHERE claim_key IN {{keys:Array(String)}} "
            "AND expires_at > {after:DateTime64(3)} AND (claim_key, reviewer) NOT IN (SELECT claim_key, reviewer "
            "FROM review_labels WHERE role = 'reviewer' AND claim_key IN {keys:Array(String)}) "
            "ORDER BY written_at, token",
            {"keys": list(claim_keys), "after": ch_time(live_after)},
        )
        return [_times(r, "reserved_at", "expires_at") for r in rows]

    def reservation(self, token: str) -> dict | None:
        rows = self.store.query(
            f"SELECT {RESERVATION_COLUMNS} FROM review_reservations WHERE token = {{t:String}}", {"t": token}
        )
        return _times(rows[0], "reserved_at", "expires_at") if rows else None

    def held_by(self, reviewer: str, now: datetime) -> list[dict]:
        """The reviewer's reservations live at ``now``, newest first."""
        rows = self.store.query(
            f"SELECT {RESERVATION_COLUMNS} FROM review_reservations WHERE reviewer = {{r:String}} "
            "AND expires_at > {now:DateTime64(3)} ORDER BY written_at DESC",
            {"r": reviewer, "now": ch_time(now)},
        )
        return [_times(r, "reserved_at", "expires_at") for r in rows]

    # -- labels ----------------------------------------------------------------------------------
    def save_label(self, row: Mapping[str, Any]) -> None:
        self.store.insert("review_labels", [ch_values(row)])

    def exposed_by(self, claim_key: str, reviewer: str) -> list[str]:
        return exposed_by(self.store, claim_key, reviewer)

    def labels(self, claim_keys: Sequence[str]) -> list[dict]:
        rows = self.store.query(
            f"SELECT {LABEL_COLUMNS} FROM review_labels FINAL WHERE claim_key IN "
            "{keys:Array(String)} ORDER BY claim_key, labeled_at, reviewer",
            {"keys": list(claim_keys)},
        )
        return [_times(r, "labeled_at") for r in rows]

    def labelled(self) -> list[dict]:
        """Every queued claim with at least one label: its queue row and ``labels`` as
        (reviewer, role, label, labeled_at) tuples in label order."""
        rows = self.store.query(
            f"SELECT {', '.join('q.' + c.strip() + ' AS ' + c.strip() for c in QUEUE_COLUMNS.split(','))}, "
            "l.labels AS labels FROM (SELECT * FROM review_queue FINAL) AS q INNER JOIN "
            "(SELECT claim_key, arraySort(x -> x.4, groupArray((reviewer, role, label, toString(labeled_at)))) "
            "AS labels "
            f" FROM review_labels FINAL WHERE {_COUNTED} GROUP BY claim_key) AS l ON l.claim_key = q.claim_key "
            "ORDER BY claim_key"
        )
        return [
            {
                **_times(r, "observed_at", "queued_at"),
                "labels": [(who, role, label, parse_ch_time(at)) for who, role, label, at in r["labels"]],
            }
            for r in rows
        ]

    def save_calibrated(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Rows of ``calibrated_rates`` (a snapshot of every route's calibrated rate, for Grafana)."""
        return self.store.insert("calibrated_rates", [ch_values(r) for r in rows])

    # -- progress --------------------------------------------------------------------------------
    def stratum_progress(self) -> list[dict]:
        return self.store.query(
            "SELECT q.stratum AS stratum, any(q.route) AS route, any(q.verdict) AS verdict, "
            "any(q.issue_id) AS issue_id, "
            "count() AS claims, sum(q.reviewers) AS slots, sum(least(l.n, q.reviewers)) AS labelled, "
            "countIf(l.n >= q.reviewers) AS complete FROM (SELECT * FROM review_queue FINAL) AS q LEFT JOIN "
            "(SELECT claim_key, count() AS n FROM review_labels FINAL WHERE role = 'reviewer' AND blind = 1 "
            "GROUP BY claim_key) AS l "
            "ON l.claim_key = q.claim_key GROUP BY q.stratum ORDER BY q.stratum"
        )

    def reviewer_progress(self) -> list[dict]:
        rows = self.store.query(
            "SELECT reviewer, role, count() AS labels, countIf(blind = 0) AS exposed, "
            "max(labeled_at) AS last FROM review_labels FINAL GROUP BY reviewer, role "
            "ORDER BY reviewer, role"
        )
        return [_times(r, "last") for r in rows]

    # -- what a reviewer sees, and the traffic calibration corrects --------------------------------
    def claim_context(self, event_id: str, claim_idx: int) -> dict | None:
        """The answer a claim belongs to: question, answer, evidence (JSON text), the claim and its verdict."""
        rows = self.store.query(
            "SELECT event_id, route, query_text, answer_text, evidence, claim_texts[{i:UInt32}] AS claim, "
            "verdicts[{i:UInt32}] AS verdict, spans[{i:UInt32}] AS span, chunk_ids[{i:UInt32}] AS chunk_id, "
            "versions['verifier'] AS verifier_version FROM events FINAL WHERE event_id = {id:String}",
            {"id": event_id, "i": claim_idx + 1},
        )
        return rows[0] if rows else None

    def answer_profile(self, since: datetime, until: datetime, routes: Collection[str] | None = None) -> list[dict]:
        """Per route (of ``routes``, when given), how many answers had each (failed, non-trivial claims) pair in
        [since, until), and their weights' sum and sum of squares (1 / sampling.rate): enough to resample answers.
        ``verifier_version`` is the route's newest. ``cells``: the (weighted) claims per verdict class x score
        band (services/core/score_bands.py), ``cross`` the sum over answers of the products of their per-cell
        claim counts (weights squared), flattened: what the post-stratified variance needs."""
        failed = sorted(FAILED_VERDICTS)
        only, params = route_conditions(None, routes)
        window = (
            "FROM events FINAL WHERE observed_at >= {since:DateTime64(3)} AND observed_at < {until:DateTime64(3)}"
            f"{''.join(' AND ' + w for w in only)}"
        )
        params = {
            "failed": failed,
            "since": ch_time(since),
            "until": ch_time(until),
            "edges": list(SCORE_EDGES),
            **params,
        }
        cell_of_claim = (  # -1 for a trivial claim, else (flagged x N_BANDS) + its score band
            f"arrayMap((v, s) -> toInt32(if(v = 'trivial', -1, if(has({{failed:Array(String)}}, v), {N_BANDS}, 0) + "
            f"{_band('s')})), verdicts, scores)"
        )
        # One scan: answers grouped by (failed, claims) pattern, each group summing its answers' per-cell claims
        # and their cross products; the route then sums the groups'.
        return self.store.query(
            "SELECT route, groupArray((f, n, answers, w, w2)) AS profile, argMax(version, newest) AS verifier_version, "
            "sumForEach(group_cells) AS cells, sumForEach(group_cross) AS cross "
            "FROM (SELECT route, f, n, count() AS answers, sum(weight) AS w, sum(weight * weight) AS w2, "
            " argMax(version, observed_at) AS version, max(observed_at) AS newest, "
            " sumForEach(arrayMap(x -> x * weight, c)) AS group_cells, "
            " sumForEach(arrayMap(x -> x * weight * weight, arrayFlatten(arrayMap(a -> arrayMap(b -> a * b, c), c))))"
            " AS group_cross "
            " FROM (SELECT route, observed_at, versions['verifier'] AS version, 1 / sampling_rate AS weight, "
            "  arrayCount(v -> v IN {failed:Array(String)}, verdicts) AS f, "
            "  arrayCount(v -> v != 'trivial', verdicts) AS n, "
            f"  {cell_of_claim} AS keys, "
            f"  arrayMap(k -> toFloat64(countEqual(keys, toInt32(k))), range({N_CELLS})) AS c {window}) "
            " GROUP BY route, f, n) GROUP BY route ORDER BY route",
            params,
        )
