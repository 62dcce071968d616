"""A stored row the clustering jobs cannot read does not stop them: online assignment and re-clustering skip
it, count it (claimwatch_rows_skipped_total{job}) and log it once, on a real chDB store."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from services.core.clock import utcnow
from services.core.metrics import Metrics
from services.issues.schedule import ClusteringSchedule, ReclusterPolicy
from services.store.convert import ch_time
from tests.unit.issues.test_recluster_schedule import inline, land, small_jobs, value

YEAR_ZERO = -62135596801  # 0000-12-31 23:59:59 UTC: ClickHouse keeps it, Python's datetime cannot hold it


def stored_by_a_bad_producer(store, event_id: str, observed_at, signals: str = "{}") -> None:
    """One failing answer written straight into the store, past the contract, as any ClickHouse client could."""
    store.insert(
        "events",
        [
            {
                "event_id": event_id,
                "trace_id": f"tr-{event_id}",
                "route": "billing-faq",
                "observed_at": observed_at,
                "signals": signals,
                "claim_ids": ["c1"],
                "verdicts": ["contradicted"],
                "claim_texts": ["annual plans can be refunded in 90 days"],
            }
        ],
    )


def members(store, prefix: str) -> set[str]:
    rows = store.query(
        "SELECT claim_key FROM issue_members FINAL WHERE startsWith(claim_key, {p:String})", {"p": prefix}
    )
    return {r["claim_key"] for r in rows}


@pytest.mark.slow
def test_rows_the_jobs_cannot_read_are_skipped_counted_and_logged_once(store, caplog):
    now = utcnow()
    land(store, "first-", 48, now - timedelta(minutes=5))
    metrics = Metrics()
    jobs = small_jobs(store, skipped=metrics.skipped_rows)
    policy = ReclusterPolicy(min_new_claims=1, max_age=timedelta(0))  # every tick re-clusters, re-reading the rows
    schedule = ClusteringSchedule(lambda: jobs, metrics, inline, policy=policy)
    assert asyncio.run(schedule.recluster(now)).issues >= 1  # issues to assign to

    stored_by_a_bad_producer(store, "year-zero", YEAR_ZERO)
    stored_by_a_bad_producer(store, "broken-signals", ch_time(now - timedelta(minutes=1)), signals="{not json")
    stored_by_a_bad_producer(store, "year-one", "0001-01-01 00:00:00.000")  # a datetime holds it; rate_minute not
    land(store, "later-", 8, utcnow())
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            asyncio.run(schedule.assign(now))
            asyncio.run(schedule.tick(utcnow()))

    assert members(store, "later-") == {f"later-{i}:0" for i in range(8)}
    assert members(store, "year-zero") == members(store, "broken-signals") == members(store, "year-one") == set()
    assert value(metrics.rows_skipped, "online_assignment") == 3
    assert value(metrics.rows_skipped, "recluster") >= 3  # every run reads the broken row of its lookback again
    assert value(metrics.recluster_runs, "ok") == 4
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors
    logged = [r.getMessage() for r in caplog.records if any(k in r.getMessage() for k in ("year-", "broken-signals"))]
    assert len(logged) == len(set(logged)) >= 4, logged  # once per row and job, not at every tick
    assert sum("broken-signals" in m and "recluster" in m for m in logged) == 1
