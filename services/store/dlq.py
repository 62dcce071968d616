"""Dead-letter statistics: counts per reason (each Kafka message, or each bad event of an envelope, once)
and samples; a sample's source is topic/partition/offset, then events[i] for an event of an envelope."""
from __future__ import annotations

from services.store.backends import Store


def dlq_summary(store: Store, samples: int = 1) -> list[dict]:
    rows = store.query(
        "SELECT rule, count() AS count, "
        "arraySlice(groupArray((reason, topic, partition, offset, size, envelope_index)), 1, {n:UInt32}) AS samples "
        "FROM (SELECT * FROM dlq FINAL ORDER BY received_at) GROUP BY rule ORDER BY count DESC, rule",
        {"n": samples},
    )
    return [
        {"reason": r["rule"], "count": r["count"],
         "samples": [sample(*s) for s in r["samples"]]}
        for r in rows
    ]


def sample(reason: str, topic: str, partition: int, offset: int, size: int, index: int) -> dict:
    source = f"{topic}/{partition}/{offset}" + (f" events[{index}]" if index >= 0 else "")
    return {"reason": reason, "source": source, "size": size, "envelope_index": None if index < 0 else index}
