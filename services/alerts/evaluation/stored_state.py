"""The evaluator's state in the store, per route: what one pass writes, and the restore.

Each route's detectors are snapshotted about once every ``SNAPSHOT_MINUTES`` (at the minutes its name's hash
picks, so a minute writes a sixtieth of the routes), and every minute a route was fed anything, its inputs are
written to a ring of ``SNAPSHOT_MINUTES`` slots. A route's open alerts, as the evaluator holds them at the end of
a pass, have a slot of their own. A pass writes those rows and where it got to in one insert, under the run's
id. A restore loads each route's snapshot and replays its inputs since, up to where the pass got, with the open
alerts of that moment: the same arrays, so the same alerts as an evaluator that never stopped. Nothing stored
grows with the fleet but the number of rows: under 10 KB a route for a snapshot with a week of history, and a
small row per minute.
"""

from __future__ import annotations

import logging
import zlib
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from services.alerts.detection.minutes import minute_number
from services.alerts.detection.route_detectors import RouteDetectors, RouteMinute
from services.alerts.evaluation.route_state import decode_state, encode_state
from services.alerts.lifecycle.alert import Alert
from services.store.alerts import RouteStateRow

if TYPE_CHECKING:
    from services.alerts.lifecycle.records import AlertRecords

log = logging.getLogger(__name__)
FORMAT = b"alert-evaluator/v5"  # the checkpoint row's body: a restore reads only state in this format
SNAPSHOT_MINUTES = 60
SNAPSHOT_SLOT = 0
OPEN_SLOT = SNAPSHOT_MINUTES + 1  # after the inputs' ring (1 .. SNAPSHOT_MINUTES)
CHECKPOINT_ROUTE, CHECKPOINT_SLOT = "", 0  # where the last pass got to (no route is named '')
RESTORE_ROUTES = 1_000  # routes replayed at a time: the restore holds their rows, not the fleet's
MINUTE = timedelta(minutes=1)


def snapshot_phase(route: str) -> int:
    """The minute (mod SNAPSHOT_MINUTES) at which a route's snapshot is written: stable across processes."""
    return zlib.crc32(route.encode()) % SNAPSHOT_MINUTES


def input_slot(minute: datetime) -> int:
    return 1 + minute_number(minute) % SNAPSHOT_MINUTES


def is_input(row: RouteStateRow) -> bool:
    return 1 <= row.slot <= SNAPSHOT_MINUTES


class StateWriter:
    """The rows of one pass: each route's inputs of each minute, the snapshots due, and where the pass got to."""

    def __init__(self, run: str):
        self.run = run
        self.rows: list[RouteStateRow] = []
        self.phases: dict[int, list[str]] = defaultdict(list)  # phase -> routes, as they joined

    def joined(self, routes: Iterable[str]) -> None:
        for route in routes:
            self.phases[snapshot_phase(route)].append(route)

    def minute(self, minute: datetime, inputs: dict[str, RouteMinute], detectors: RouteDetectors) -> None:
        slot = input_slot(minute)
        self.rows += [RouteStateRow(route, slot, minute, self.run, given.encode()) for route, given in inputs.items()]
        self.rows += [
            RouteStateRow(route, SNAPSHOT_SLOT, minute, self.run, encode_state(detectors.state(route)))
            for route in self.phases.get(minute_number(minute) % SNAPSHOT_MINUTES, ())
        ]

    def open_alerts(self, minute: datetime, by_route: dict[str, list[Alert]]) -> None:
        """Each of these routes' open alerts now (none: an empty list)."""
        self.rows += [
            RouteStateRow(route, OPEN_SLOT, minute, self.run, orjson.dumps([a.as_dict() for a in alerts]))
            for route, alerts in by_route.items()
        ]

    def finish(self, minute: datetime) -> list[RouteStateRow]:
        rows, self.rows = self.rows + [RouteStateRow(CHECKPOINT_ROUTE, CHECKPOINT_SLOT, minute, self.run, FORMAT)], []
        return rows


def restore(alerts: AlertRecords, detectors: RouteDetectors, run: str, until: datetime) -> list[Alert]:
    """Every route of ``run`` into ``detectors``, as it was after ``until``, and the open alerts of that moment:
    RESTORE_ROUTES at a time, and of those, the routes that start at the same minute (the same snapshot minute, or
    joined then) replayed together, so the fleets grow once a batch."""
    routes, open_alerts = alerts.route_state_routes(run), []
    for i in range(0, len(routes), RESTORE_ROUTES):
        rows = alerts.route_state(run, routes[i], routes[min(i + RESTORE_ROUTES, len(routes)) - 1])
        open_alerts += [Alert.from_dict(a) for r in rows if r.slot == OPEN_SLOT for a in orjson.loads(r.body)]
        states: dict[str, dict[str, Any]] = {}
        for group in _by_start([r for r in rows if r.slot != OPEN_SLOT]).values():
            part = RouteDetectors(detectors.config_for, detectors.health.config)
            replay(group, until, part)
            if part.minute != minute_number(until):
                raise ValueError(f"the stored state ends at minute {part.minute}, not at {minute_number(until)}")
            states.update((route, part.state(route)) for route in part.rows)
        detectors.load(states, minute_number(until))
    return open_alerts


def _by_start(rows: list[RouteStateRow]) -> dict[datetime, list[RouteStateRow]]:
    """Rows by the minute their route starts from: its snapshot's, or without one its first logged minute."""
    snapshot_at = {r.route: r.minute for r in rows if r.slot == SNAPSHOT_SLOT}
    start = dict(snapshot_at)
    for r in rows:
        if r.route not in snapshot_at:
            start[r.route] = min(start.get(r.route, r.minute), r.minute)
    groups: dict[datetime, list[RouteStateRow]] = defaultdict(list)
    for r in rows:
        groups[start[r.route]].append(r)
    return groups


def replay(rows: list[RouteStateRow], until: datetime, detectors: RouteDetectors) -> None:
    """Load each route's snapshot at its minute and feed it the inputs logged after it, minute by minute up to
    ``until``; a route without a snapshot starts at its first logged minute (it joined then)."""
    snapshots = {r.route: r for r in rows if r.slot == SNAPSHOT_SLOT and r.route != CHECKPOINT_ROUTE}
    inputs: dict[datetime, dict[str, bytes]] = defaultdict(dict)
    joined: dict[str, datetime] = {}
    for r in rows:
        snapshot = snapshots.get(r.route)
        if not is_input(r) or r.minute > until or (snapshot is not None and r.minute <= snapshot.minute):
            continue
        inputs[r.minute][r.route] = r.body
        if snapshot is None:
            joined[r.route] = min(joined.get(r.route, r.minute), r.minute)
    joins, loads = defaultdict(list), defaultdict(list)
    for route, minute in joined.items():
        joins[minute].append(route)
    for snapshot in snapshots.values():
        loads[snapshot.minute].append(snapshot)
    if not joins and not loads:
        return
    minute = min([*joins, *loads])
    while minute <= until:
        detectors.add(sorted(joins.get(minute, ())))
        if len(detectors):
            detectors.step(
                minute_number(minute),
                {route: RouteMinute.decode(body) for route, body in inputs.get(minute, {}).items()},
            )
        if minute in loads:
            detectors.load({s.route: decode_state(s.body) for s in loads[minute]}, minute_number(minute))
        minute += MINUTE
