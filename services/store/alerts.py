"""Alerts, transitions, silences, the evaluator's per-route state and its published expectations in ClickHouse.

The store does not import the alerts stage: the repository is given how to decode an alert and a
silence from their stored bodies (it writes any object with the fields below and ``as_dict``), and
``services.alerts.lifecycle.records.alert_repository`` binds the stage's own ``Alert`` and ``Silence``.
Every row carries a write version from the injected clock; reads take the newest version.
"""

from __future__ import annotations

import base64
import builtins
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import orjson

from services.core.clock import utcnow
from services.core.errors import NotFound
from services.store.convert import ch_time, parse_ch_time

if TYPE_CHECKING:
    from services.store.backends import Store


class StoredAlert(Protocol):
    """What the repository reads from an alert (services.alerts.lifecycle.alert.Alert). Read-only properties, so a
    frozen dataclass conforms."""

    @property
    def alert_id(self) -> str: ...
    @property
    def route(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def window(self) -> int: ...
    @property
    def pending_since(self) -> datetime: ...
    @property
    def starts_at(self) -> datetime | None: ...
    @property
    def ends_at(self) -> datetime | None: ...
    @property
    def acked_at(self) -> datetime | None: ...
    @property
    def acked_by(self) -> str | None: ...
    @property
    def ack_note(self) -> str | None: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def baseline(self) -> float | None: ...
    @property
    def delta(self) -> float | None: ...
    @property
    def claims(self) -> int: ...
    @property
    def onset(self) -> datetime | None: ...
    @property
    def driving_verdict(self) -> str | None: ...
    @property
    def recorded_state(self) -> str: ...
    @property
    def transition_at(self) -> datetime: ...
    def transition_record(self) -> dict: ...
    def as_dict(self) -> dict: ...


class StoredSilence(Protocol):
    """What the repository reads from a silence (services.alerts.lifecycle.silences.Silence); read-only, as for
    alerts."""

    @property
    def silence_id(self) -> str: ...
    @property
    def ends_at(self) -> datetime: ...

    def as_dict(self) -> dict: ...
    def is_active(self, now: datetime) -> bool: ...


A = TypeVar("A", bound=StoredAlert)
S = TypeVar("S", bound=StoredSilence)


@dataclass(frozen=True)
class RouteStateRow:
    """A row of ``alert_route_state``: a route's snapshot or one minute's inputs (by ``slot``)."""

    route: str
    slot: int
    minute: datetime
    run: str
    body: bytes


# An insert is one part, written whole or not at all, while its rows fit one block.
ONE_BLOCK = {"max_insert_block_size": 10_000_000}

# An alert's state at {at} from its newest version's times, as services.alerts.lifecycle.status.alert_state has it
# (argMax of a tuple: argMax itself skips NULLs, so it would read an older version's time).
_ENDS, _STARTS = "argMax(tuple(ends_at), updated_at).1", "argMax(tuple(starts_at), updated_at).1"
_RESOLVED = f"(isNotNull({_ENDS}) AND {_ENDS} <= {{at:DateTime64(3)}})"
_STARTED = f"(isNotNull({_STARTS}) AND {_STARTS} <= {{at:DateTime64(3)}})"
_STATE_AT = {
    "resolved": _RESOLVED,
    "firing": f"(NOT {_RESOLVED} AND {_STARTED})",
    "pending": f"(NOT {_RESOLVED} AND NOT {_STARTED})",
}


def _opt(ts: datetime | None) -> str | None:
    return ch_time(ts) if ts is not None else None


def _with_ack(row: Mapping) -> dict:
    """An alert's newest version with its ack, which only ``alert_acks`` holds."""
    alert = orjson.loads(row["body"])
    if not row["acked"]:  # the LEFT JOIN gives '' for an alert nobody acked
        return {**alert, "acked_at": None, "acked_by": None, "ack_note": None}
    return {
        **alert,
        "acked_at": parse_ch_time(row["acked_at"]).isoformat(),
        "acked_by": row["acked_by"],
        "ack_note": row["ack_note"],
    }


class AlertRepository(Generic[A, S]):
    def __init__(
        self,
        store: Store,
        decode_alert: Callable[[Mapping], A],
        decode_silence: Callable[[Mapping], S],
        clock: Callable[[], datetime] = utcnow,
    ):
        self.store = store
        self.decode_alert = decode_alert
        self.decode_silence = decode_silence
        self.clock = clock

    def _version(self) -> str:
        """Write version (DateTime64(6)): the newest write of a row wins."""
        return self.clock().strftime("%Y-%m-%d %H:%M:%S.%f")

    # -- alerts ---------------------------------------------------------------
    def save(self, alert: A) -> None:
        """The alert's newest version. Its ack is ``save_ack``'s: the table's ack columns are left empty."""
        self.save_all([alert])

    def save_all(self, alerts: Iterable[A]) -> None:
        """Each alert's newest version, in one insert."""
        version = self._version()
        self.store.insert(
            "alerts",
            [
                {
                    "alert_id": alert.alert_id,
                    "route": alert.route,
                    "kind": alert.kind,
                    "severity": alert.severity,
                    "labels": alert.labels,
                    "window_minutes": alert.window or 0,
                    "pending_since": ch_time(alert.pending_since),
                    "starts_at": _opt(alert.starts_at),
                    "ends_at": _opt(alert.ends_at),
                    "rate": alert.rate,
                    "baseline": alert.baseline,
                    "delta": alert.delta,
                    "claims": alert.claims,
                    "onset": _opt(alert.onset),
                    "driving_verdict": alert.driving_verdict or "",
                    "body": orjson.dumps(alert.as_dict()).decode(),
                    "updated_at": version,
                }
                for alert in alerts
            ],
        )

    def record_transition(self, alert: A) -> bool:
        """Store the transition once; False if it was already recorded (a re-evaluation)."""
        state = alert.recorded_state
        seen = self.store.query(
            "SELECT count() AS n FROM alert_transitions WHERE alert_id = {id:String} AND state = {state:String}",
            {"id": alert.alert_id, "state": state},
        )
        if seen[0]["n"]:
            return False
        self.store.insert(
            "alert_transitions",
            [
                {
                    "alert_id": alert.alert_id,
                    "state": state,
                    "route": alert.route,
                    "kind": alert.kind,
                    "at": ch_time(alert.transition_at),
                    "record": orjson.dumps(alert.transition_record()).decode(),
                }
            ],
        )
        return True

    def recent_transitions(
        self, since: datetime, states: tuple[str, ...] = ("firing", "resolved")
    ) -> list[tuple[str, str]]:
        """(alert_id, state) of the transitions to ``states`` at or after ``since``, oldest first."""
        rows = self.store.query(
            "SELECT alert_id, state FROM alert_transitions FINAL WHERE at >= {since:DateTime64(3)} "
            "AND state IN {states:Array(String)} ORDER BY at, alert_id",
            {"since": ch_time(since), "states": list(states)},
        )
        return [(r["alert_id"], r["state"]) for r in rows]

    def save_ack(self, alert: A) -> None:
        """A person's ack, kept apart from the alert's versions, which the evaluator writes."""
        if alert.acked_at is None:
            raise ValueError(f"alert {alert.alert_id} is not acked; there is no ack to save")
        self.store.insert(
            "alert_acks",
            [
                {
                    "alert_id": alert.alert_id,
                    "acked_at": ch_time(alert.acked_at),
                    "acked_by": alert.acked_by or "",
                    "ack_note": alert.ack_note or "",
                }
            ],
        )

    def _alerts(self, where: str = "1", params: dict | None = None, limit: int = 500) -> list[A]:
        rows = self.store.query(
            "SELECT a.body AS body, k.alert_id AS acked, toString(k.at) AS acked_at, k.by AS acked_by, "
            "k.note AS ack_note FROM "
            f"(SELECT alert_id, argMax(body, updated_at) AS body, max(pending_since) AS pending_since FROM alerts "
            f"GROUP BY alert_id HAVING {where} ORDER BY pending_since DESC LIMIT {{limit:UInt32}}) AS a "
            "LEFT JOIN (SELECT alert_id, max(acked_at) AS at, argMax(acked_by, acked_at) AS by, "
            "argMax(ack_note, acked_at) AS note FROM alert_acks GROUP BY alert_id) AS k "
            "ON a.alert_id = k.alert_id ORDER BY a.pending_since DESC",
            {**(params or {}), "limit": limit},
        )
        return [self.decode_alert(_with_ack(r)) for r in rows]

    def get(self, alert_id: str) -> A:
        found = self._alerts("alert_id = {id:String}", {"id": alert_id}, 1)
        if not found:
            raise NotFound(f"no alert {alert_id!r}; list alerts with `claimwatch alerts list`")
        return found[0]

    def open_alerts(self) -> list[A]:
        return self._alerts("isNull(argMax(ends_at, updated_at))")

    def list(
        self,
        route: str | None = None,
        limit: int = 500,
        *,
        kind: str | None = None,
        states: tuple[str, ...] | None = None,
        at: datetime | None = None,
    ) -> list[A]:
        """The ``limit`` newest alerts (by pending_since), of ``route`` and ``kind`` when given, and in one of
        ``states`` (pending, firing, resolved) as of ``at`` when given: filtered before the limit, so a filter
        reaches past the newest alerts of other kinds and states."""
        where, params = ["1"], {}
        if route is not None:
            where.append("argMax(route, updated_at) = {route:String}")
            params["route"] = route
        if kind is not None:
            where.append("argMax(kind, updated_at) = {kind:String}")
            params["kind"] = kind
        if states is not None:
            where.append(f"({' OR '.join(_STATE_AT[s] for s in states)})" if states else "0")
            params["at"] = ch_time(at or self.clock())
        return self._alerts(" AND ".join(where), params, limit)

    # builtins.list from here on: in the class body, list is the method above
    def transitions(self, alert_id: str) -> builtins.list[dict]:
        rows = self.store.query(
            "SELECT record FROM alert_transitions FINAL WHERE alert_id = {id:String} ORDER BY at", {"id": alert_id}
        )
        return [orjson.loads(r["record"]) for r in rows]

    # -- silences -------------------------------------------------------------
    def save_silence(self, silence: S) -> None:
        self.store.insert(
            "silences",
            [
                {
                    "silence_id": silence.silence_id,
                    "body": orjson.dumps(silence.as_dict()).decode(),
                    "ends_at": ch_time(silence.ends_at),
                    "updated_at": self._version(),
                }
            ],
        )

    def silences(self, active_at: datetime | None = None) -> builtins.list[S]:
        rows = self.store.query(
            "SELECT argMax(body, updated_at) AS body, argMax(ends_at, updated_at) AS ends "
            "FROM silences GROUP BY silence_id ORDER BY silence_id"
        )
        found = [self.decode_silence(orjson.loads(r["body"])) for r in rows]
        return [s for s in found if active_at is None or s.is_active(active_at)]

    def silence(self, silence_id: str) -> S:
        for s in self.silences():
            if s.silence_id == silence_id:
                return s
        raise NotFound(f"no silence {silence_id!r}; list them with `claimwatch alerts silences`")

    # -- the evaluator's state, per route ----------------------
    def save_route_state(self, rows: Iterable[RouteStateRow]) -> None:
        """One insert: the rows of one evaluation pass are stored together or not at all."""
        version = self._version()
        self.store.insert(
            "alert_route_state",
            [
                {
                    "route": r.route,
                    "slot": r.slot,
                    "minute": ch_time(r.minute),
                    "run": r.run,
                    "body": base64.b64encode(r.body).decode(),
                    "updated_at": version,
                }
                for r in rows
            ],
            ONE_BLOCK,
        )

    def route_state_routes(self, run: str) -> builtins.list[str]:
        """The routes evaluation ``run`` wrote rows for, in order."""
        rows = self.store.query(
            "SELECT DISTINCT route FROM alert_route_state WHERE run = {run:String} AND route != '' ORDER BY route",
            {"run": run},
        )
        return [r["route"] for r in rows]

    def route_state(self, run: str, first: str, last: str) -> builtins.list[RouteStateRow]:
        """The newest row of each (route, slot) written by evaluation ``run``, of the routes from ``first`` to
        ``last``."""
        rows = self.store.query(
            "SELECT route, slot, toString(argMax(minute, updated_at)) AS minute, argMax(run, updated_at) AS run, "
            "argMax(body, updated_at) AS body FROM alert_route_state "
            "WHERE route >= {first:String} AND route <= {last:String} GROUP BY route, slot HAVING run = {run:String}",
            {"run": run, "first": first, "last": last},
        )
        return [
            RouteStateRow(r["route"], int(r["slot"]), parse_ch_time(r["minute"]), r["run"], base64.b64decode(r["body"]))
            for r in rows
        ]

    def route_state_row(self, route: str, slot: int) -> RouteStateRow | None:
        """The newest row of one (route, slot), of any run."""
        rows = self.store.query(
            "SELECT toString(argMax(minute, updated_at)) AS minute, argMax(run, updated_at) AS run, "
            "argMax(body, updated_at) AS body, count() AS n FROM alert_route_state "
            "WHERE route = {route:String} AND slot = {slot:UInt16}",
            {"route": route, "slot": slot},
        )
        if not rows or not rows[0]["n"]:
            return None
        r = rows[0]
        return RouteStateRow(route, slot, parse_ch_time(r["minute"]), r["run"], base64.b64decode(r["body"]))

    # -- what the evaluator expects of each route (services/alerts/detection/expectations.py) ----------------------
    def save_expectations(self, minute: datetime, expectations: Mapping[str, Mapping]) -> None:
        """Each route's ``expected`` (None: none yet), ``basis``, ``learning``, ``history_hours`` and
        ``detectable_rise`` as of
        ``minute``."""
        version, at = self._version(), ch_time(minute)
        self.store.insert(
            "route_expectations",
            [
                {
                    "route": route,
                    "minute": at,
                    "expected": e["expected"],
                    "basis": e["basis"],
                    "learning": int(e["learning"]),
                    "history_hours": e.get("history_hours"),
                    "detectable_rise": e.get("detectable_rise"),
                    "updated_at": version,
                }
                for route, e in expectations.items()
            ],
        )

    def expectations(self, routes: Iterable[str] | None = None) -> dict[str, dict]:
        """The newest expectation of each route (of ``routes`` if given)."""
        where, params = "", {}
        if routes is not None:
            where, params = "WHERE route IN {routes:Array(String)}", {"routes": list(routes)}
        rows = self.store.query(
            "SELECT route, argMax(expected, updated_at) AS expected, argMax(basis, updated_at) AS basis, "
            "argMax(learning, updated_at) AS learning, argMax(history_hours, updated_at) AS history_hours, "
            "argMax(detectable_rise, updated_at) AS detectable_rise "
            f"FROM route_expectations {where} GROUP BY route",
            params,
        )
        return {
            r["route"]: {
                "expected": r["expected"],
                "basis": r["basis"],
                "learning": bool(r["learning"]),
                "history_hours": r["history_hours"],
                "detectable_rise": r["detectable_rise"],
            }
            for r in rows
        }
