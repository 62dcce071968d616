"""A real chDB store with the shared components on a clock the test moves, and helpers that lay down issues and
their members at chosen event times (for the triage tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from clustering.issue import IssueRecord
from services.app.compose import Components, build
from services.app.settings import Settings
from services.store.backends import open_store
from tests.support.stores import StoreTemplates

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def at(self, now: datetime) -> datetime:
        self.now = now
        return now


@contextmanager
def triage_world(tmp_path: Path, templates: StoreTemplates, **settings) -> Iterator[tuple[Components, Clock]]:
    """Components over a fresh migrated store (a copy of ``templates``'); every handle is closed on the way out."""
    clock = Clock(T0)
    config = Settings(clickhouse=f"chdb:{templates.copy(tmp_path / 'ch')}", **settings)
    store = open_store(config.clickhouse)
    components = build(config, store, clock=clock)
    try:
        yield components, clock
    finally:
        components.close()


def an_issue(components: Components, issue_id: str, route: str = "billing-faq", **fields) -> IssueRecord:
    created = ({"at": (T0 - timedelta(days=1)).isoformat(), "event": "created"},)
    record = IssueRecord(
        **{
            "issue_id": issue_id,
            "name": f"issue {issue_id}",
            "keywords": ("x",),
            "config_name": "test@1",
            "first_seen": T0 - timedelta(days=1),
            "last_seen": T0,
            "routes": {route: 10},
            "centroid": [1.0, 0.0],
            "history": created,
            **fields,
        }
    )
    components.repos.issues.save([record])
    return record


def members(components: Components, issue_id: str, times: list[datetime], prefix: str = "") -> None:
    """One failing claim of ``issue_id`` observed at each of ``times``."""
    components.repos.issues.save_members(
        {
            "claim_key": f"{issue_id}{prefix}-{i}:0",
            "issue_id": issue_id,
            "probability": 1.0,
            "source": "online",
            "config_name": "test@1",
            "x": 0.0,
            "y": 0.0,
            "observed_at": t,
        }
        for i, t in enumerate(times)
    )


def hourly(start: datetime, hours: int, per_hour: int) -> list[datetime]:
    """``per_hour`` claims spread over each of ``hours`` hours from ``start``."""
    step = timedelta(hours=1) / per_hour
    return [start + timedelta(hours=h) + step * (k + 0.5) for h in range(hours) for k in range(per_hour)]
