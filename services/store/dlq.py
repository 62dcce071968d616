"""Dead-letter statistics (``DeadLetterRepository``): counts per reason (each Kafka message, or each bad event of an
envelope, once) and samples; a sample's source is topic/partition/offset, then events[i] for an event of an envelope.

Per route and minute of event time, too (``rejected_minutes``, ``rejected_routes``): a dead letter's route is
its message key, else the route its JSON names; its minute is its event's own ``observed_at`` where that is
usable, else when it arrived (services/ingest/ingestor.py). Route '' holds those with neither.
"""

from __future__ import annotations

from datetime import datetime

from services.store.backends import Store
from services.store.convert import ch_time, parse_ch_time

_SAMPLE = "(reason, topic, partition, offset, size, envelope_index)"
_MINUTES = (
    "toStartOfMinute(event_time) BETWEEN toStartOfMinute({start:DateTime64(3)}) "
    "AND toStartOfMinute({end:DateTime64(3)})"
)


def sample(reason: str, topic: str, partition: int, offset: int, size: int, index: int) -> dict:
    source = f"{topic}/{partition}/{offset}" + (f" events[{index}]" if index >= 0 else "")
    return {"reason": reason, "source": source, "size": size, "envelope_index": None if index < 0 else index}


_REFUSED = (
    "FROM dlq FINAL WHERE rule = {rule:String} AND received_at BETWEEN {start:DateTime64(3)} AND {end:DateTime64(3)}"
)
_SOURCE, _ROUTE = "JSONExtractString(problems, 2, 'message')", "JSONExtractString(problems, 3, 'message')"


class DeadLetterRepository:
    """The dead letters (table ``dlq``): counts per rule with samples, per route and minute of event time (what the
    evaluator's input health reads), and the refusals of the route bound."""

    def __init__(self, store: Store):
        self.store = store

    def summary(self, samples: int = 1, route: str | None = None) -> list[dict]:
        """Counts per rule, most first, with up to ``samples`` samples each; of one route's dead letters if given."""
        where = ""
        params: dict[str, object] = {"n": samples}
        if route is not None:
            where, params["route"] = "WHERE route = {route:String}", route
        rows = self.store.query(
            f"SELECT rule, count() AS count, arraySlice(groupArray({_SAMPLE}), 1, {{n:UInt32}}) AS samples "
            f"FROM (SELECT * FROM dlq FINAL {where} ORDER BY received_at) GROUP BY rule ORDER BY count DESC, rule",
            params,
        )
        return [{"reason": r["rule"], "count": r["count"], "samples": [sample(*s) for s in r["samples"]]} for r in rows]

    def rejected_minutes(self, start: datetime, end: datetime) -> list[dict]:
        """Dead letters per route and minute of event time, over the minutes from ``start``'s through ``end``'s
        (both inclusive, as rate windows): ``[{"route": str, "minute": datetime (UTC), "rejected": int}]``,
        oldest minute first, then by route. Minutes without dead letters are absent."""
        rows = self.store.query(
            f"SELECT route, toStartOfMinute(event_time) AS minute, count() AS rejected FROM dlq FINAL "
            f"WHERE {_MINUTES} GROUP BY route, minute ORDER BY minute, route",
            {"start": ch_time(start), "end": ch_time(end)},
        )
        return [
            {"route": r["route"], "minute": parse_ch_time(r["minute"]), "rejected": int(r["rejected"])} for r in rows
        ]

    def rejected_routes(self, start: datetime, end: datetime) -> list[dict]:
        """Per route over the same minutes as ``rejected_minutes``: its dead letters, the rule most of them broke
        (ties: the first by name), that rule's count and its latest sample by event time (``sample``'s shape):
        ``[{"route", "rejected", "rule", "rule_count", "sample": {"reason", "source", "size", "envelope_index"}}]``,
        most rejected first, then by route."""
        rows = self.store.query(
            f"SELECT route, rule, count() AS n, argMax({_SAMPLE}, (event_time, received_at, offset, envelope_index)) "
            f"AS latest FROM dlq FINAL WHERE {_MINUTES} GROUP BY route, rule ORDER BY route, n DESC, rule",
            {"start": ch_time(start), "end": ch_time(end)},
        )
        out: dict[str, dict] = {}
        for r in rows:
            n = int(r["n"])
            if r["route"] in out:
                out[r["route"]]["rejected"] += n
                continue
            out[r["route"]] = {
                "route": r["route"],
                "rejected": n,
                "rule": r["rule"],
                "rule_count": n,
                "sample": sample(*r["latest"]),
            }
        return sorted(out.values(), key=lambda e: (-e["rejected"], e["route"]))

    def refused_routes(self, start: datetime, end: datetime, rule: str, sources: int = 5) -> dict:
        """The dead letters of the route bound (``rule``: route.limit) that arrived from ``start`` to ``end`` (arrival,
        not event time: a replay's refusals happen now too): how many, of how many distinct routes, and the ``sources``
        producers sending most, each with its count, its routes and one of them (a refusal's problems 2 and 3 name
        them: services/ingest/routes.py).
        ``{"events": int, "routes": int, "sources": [{"source", "events", "routes", "example"}]}``."""
        params = {"start": ch_time(start), "end": ch_time(end), "rule": rule, "n": sources}
        [total] = self.store.query(f"SELECT count() AS events, uniqExact({_ROUTE}) AS routes {_REFUSED}", params)
        rows = self.store.query(
            f"SELECT {_SOURCE} AS source, count() AS events, uniqExact({_ROUTE}) AS routes, "
            f"min({_ROUTE}) AS example {_REFUSED} GROUP BY source ORDER BY events DESC, source "
            "LIMIT {n:UInt32}",
            params,
        )
        return {
            "events": int(total["events"]),
            "routes": int(total["routes"]),
            "sources": [
                {"source": r["source"], "events": int(r["events"]), "routes": int(r["routes"]), "example": r["example"]}
                for r in rows
            ],
        }
