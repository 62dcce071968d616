"""Dead-letter statistics: counts per reason (each Kafka message once) and samples."""
from __future__ import annotations

from services.store.backends import Store


def dlq_summary(store: Store, samples: int = 1) -> list[dict]:
    rows = store.query(
        "SELECT rule, count() AS count, "
        "arraySlice(groupArray((reason, topic, partition, offset, size)), 1, {n:UInt32}) AS samples "
        "FROM (SELECT * FROM dlq FINAL ORDER BY received_at) GROUP BY rule ORDER BY count DESC, rule",
        {"n": samples},
    )
    return [
        {"reason": r["rule"], "count": r["count"],
         "samples": [{"reason": s[0], "source": f"{s[1]}/{s[2]}/{s[3]}", "size": s[4]} for s in r["samples"]]}
        for r in rows
    ]
