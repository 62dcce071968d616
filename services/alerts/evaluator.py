"""Per-route drift evaluation over event-time minute buckets, behind a watermark.

The same object runs live (a leader-only Faust timer) and in `claimwatch backtest`
(a simulated clock): it only ever reads minute buckets from the store and is told
the time. Every route's detectors step a minute at once (services/alerts/route_detectors.py),
and the evaluation only looks at the routes whose detectors are not ok or that have an open alert.
Its state is stored per route (services/alerts/evaluator_state.py) with every pass, so a restart
(or a pass the store failed) resumes exactly: the same detector state and open alerts as that pass
left them, and transitions that are re-derived keep their deterministic ids, so nothing is alerted twice.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from services.alerts import evaluator_state
from services.alerts.baseline import CLAIMS, FAILED
from services.alerts.config import DetectorConfig
from services.alerts.evaluator_state import CHECKPOINT_ROUTE, CHECKPOINT_SLOT, FORMAT, StateWriter
from services.alerts.expectations import Expectation
from services.alerts.expectations import publish as publish_expectations
from services.alerts.fleet import RouteView, minute_number
from services.alerts.health_engine import InputHealthConfig
from services.alerts.input_health import Finding, health_inputs
from services.alerts.lifecycle import (
    ABSTENTION_KIND,
    DRIFT_KIND,
    INPUT_KINDS,
    MIX_KIND,
    REJECTED_KIND,
    SERVICE_LABELS,
    Alert,
    next_alert,
    severity_for,
)
from services.alerts.records import AlertRecords
from services.alerts.route_detectors import RouteDetectors, RouteMinute
from services.alerts.suspects import suspect_changes
from services.rates.intervals import Counts, checked_sums, effective_sums
from services.store.convert import parse_ch_time
from services.store.dlq import rejected_minutes, rejected_routes
from services.store.rates import SUM_FIELDS, RateRepository

if TYPE_CHECKING:
    from services.app.settings import DriftSettings

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)
# Minutes read and stepped at once. A backlog being drained spans hours or days of event time, and reading it
# whole held every route's and mix slice's minutes at once (+400 MiB on the worker draining 1 GiB of envelopes).
# A pass is also one insert of the evaluator's state, so it spans at most the state's ring of inputs.
PASS_MINUTES = evaluator_state.SNAPSHOT_MINUTES
# And at most this many route-minutes: 10,000 routes are read a minute at a time, as they are live. Each part's rows
# and its state insert are held at once: 2 minutes of 10,000 routes added 150-200 MiB while a backlog was caught up.
PASS_ROUTE_MINUTES = 10_000
SUSPECT_LOOKBACK = timedelta(hours=2)
# A route this far behind the newest minute no longer holds the watermark back … (short: a route that stops must be
# evaluated as silent within minutes, so route_silent pages within ten)
ACTIVE_WITHIN = timedelta(minutes=3)
MOVING_GRACE = timedelta(minutes=2)  # … unless its minutes still advanced this recently (a partition catching up)
LIVE_WITHIN = timedelta(minutes=15)  # data this close to the wall clock when it stopped was live, not a backfill
TOP_RULE_KEYS = ("top_rule", "top_rule_count", "sample_reason", "sample_source")  # an events_rejected alert's details


class AlertEvaluator:
    def __init__(
        self,
        detector_config: DetectorConfig,
        route_thresholds: dict[str, float],
        watermark: timedelta,
        rates: RateRepository,
        alerts: AlertRecords,
        checkpoint: bool = True,
        health_config: InputHealthConfig | None = None,
        wall_clock: bool = True,
    ):
        self.detector_config = detector_config
        self.health_config = health_config or InputHealthConfig()
        # live, minutes advance with the wall clock when no route sends (every verifier down is an outage too);
        # a backtest replays on its own clock
        self.wall_clock = wall_clock
        self.newest_seen: tuple[datetime, datetime] | None = None  # (newest minute stored, when it last advanced)
        self.route_thresholds = route_thresholds
        self.watermark = watermark
        self.rates = rates
        self.alerts = alerts
        self.use_checkpoint = checkpoint
        self.detectors = RouteDetectors(self.config_for, self.health_config)
        self.open: dict[tuple[str, str], Alert] = {}  # (route, kind) -> its open alert
        self.last_minute: datetime | None = None
        self.route_progress: dict[
            str, tuple[datetime, datetime]
        ] = {}  # route -> (its newest minute, when it last advanced)
        self.run = uuid.uuid4().hex  # this evaluation's id in the stored state; a restore goes on with the stored one
        self.writer = StateWriter(self.run)
        self.published: dict[str, Expectation] = {}  # each route's expectation as last stored
        self._restored = False

    def config_for(self, route: str) -> DetectorConfig:
        threshold = self.route_thresholds.get(route)
        return self.detector_config if threshold is None else self.detector_config.replace(threshold=threshold)

    def _rejected(self, start: datetime, end: datetime) -> dict[datetime, dict[str, int]]:
        """minute -> route -> dead letters (in event time)."""
        out: dict[datetime, dict[str, int]] = defaultdict(dict)
        for row in rejected_minutes(self.rates.store, start, end):
            if row["route"]:
                out[row["minute"]][row["route"]] = row["rejected"]
        return out

    def _inputs(self, start: datetime, end: datetime) -> dict[datetime, dict[str, RouteMinute]]:
        """minute -> route -> what its detectors read: its sums, mix slices and dead letters (arrays: at 10,000 routes
        a minute is 10,000 rows)."""
        whole, mixes = (self.rates.minutes_all_routes(start, end, dim) for dim in ("", "mix"))
        sums, mix = _sums(whole), effective_sums(_sums(mixes))
        slices: dict[tuple[datetime, str], dict[str, tuple[float, float]]] = defaultdict(dict)
        for row, (claims, failed) in zip(mixes, mix[:, [CLAIMS, FAILED]].tolist()):
            slices[parse_ch_time(row["minute"]), row["route"]][row["value"]] = (claims, failed)
        rejected = self._rejected(start, end)
        keys = [(parse_ch_time(r["minute"]), r["route"]) for r in whole]
        refused = np.array([rejected.get(minute, {}).get(route, 0) for minute, route in keys], dtype=float)
        x, health = effective_sums(sums), health_inputs(sums, refused)
        out: dict[datetime, dict[str, RouteMinute]] = defaultdict(dict)
        for i, (minute, route) in enumerate(keys):
            out[minute][route] = RouteMinute(x[i], health[i], slices.get((minute, route), {}))
        for minute, by_route in rejected.items():  # dead letters of a route without an accepted answer that minute
            for route in by_route.keys() - out[minute].keys():
                out[minute][route] = RouteMinute(
                    health=health_inputs(np.zeros((1, len(SUM_FIELDS))), np.array([by_route[route]], dtype=float))[0]
                )
        return {minute: dict(sorted(by_route.items())) for minute, by_route in out.items()}

    def slowest_active_minute(self, now: datetime) -> datetime | None:
        """The watermark waits for the slowest route still sending: each route has its own partition,
        so a lagging partition must not have its minutes evaluated before its events land. A route
        far behind the newest one still holds it while its minutes keep advancing (a backlog being
        consumed); one that has stopped advancing for MOVING_GRACE is silent and lets go."""
        newest = self.rates.latest_minute()
        if newest is None:
            return None
        if self.wall_clock:
            if self.newest_seen is None or newest > self.newest_seen[0]:
                self.newest_seen = (newest, now)
            # No route has sent for a while although the data was live (near the wall clock) when it stopped: time
            # still passes, so silence is evaluated (every verifier down is an outage too). A backfill of old
            # history that stops is not a live route falling silent.
            elif now - self.newest_seen[1] > MOVING_GRACE and self.newest_seen[0] >= self.newest_seen[1] - LIVE_WITHIN:
                return max(newest, now.replace(second=0, microsecond=0) - MOVING_GRACE)
        since = newest - timedelta(minutes=self.detector_config.baseline_minutes)
        held = []
        for route, minute in self.rates.latest_minute_by_route(since).items():
            seen = self.route_progress.get(route)
            moved_at = now if seen is None or minute > seen[0] else seen[1]  # first sight counts as moving
            self.route_progress[route] = (minute, moved_at)
            if minute >= newest - ACTIVE_WITHIN or now - moved_at <= MOVING_GRACE:
                held.append(minute)
        return min(held, default=newest)

    def restore(self) -> None:
        """Resume exactly where the last evaluation pass stopped: each route's detectors are in the store.

        Replaying the minute buckets instead would not reproduce live state (live evaluation saw minutes as
        they landed), and a detector that disagrees with a stored open alert would close it and open a
        duplicate."""
        self._restored = True
        if not self.use_checkpoint:
            return
        self._start_over()
        started = time.perf_counter()
        checkpoint = self.alerts.route_state_row(CHECKPOINT_ROUTE, CHECKPOINT_SLOT)
        if checkpoint is None or checkpoint.body != FORMAT:
            log.info(
                "no evaluator state stored%s: the detectors learn from the stored history",
                "" if checkpoint is None else f" in {FORMAT.decode()}",
            )
            return
        detectors = RouteDetectors(self.config_for, self.health_config)
        try:
            open_alerts = evaluator_state.restore(self.alerts, detectors, checkpoint.run, checkpoint.minute)
        except ValueError as exc:  # another configuration's arrays, or damaged state: start over
            log.warning(
                "the stored evaluator state cannot be resumed (%s): the detectors learn from the stored history", exc
            )
            return
        self.detectors, self.last_minute, self.run = detectors, checkpoint.minute, checkpoint.run
        self.writer = StateWriter(self.run)
        self.writer.joined(detectors.rows)
        # the open alerts as that pass left them (the alerts table may hold a later save of a pass never stored)
        self.open = {(a.route, a.kind): a for a in open_alerts}
        log.info(
            "evaluator resumed at %s: %d routes, %d open alerts, in %.1f s",
            checkpoint.minute.isoformat(),
            len(detectors),
            len(self.open),
            time.perf_counter() - started,
        )

    def _start_over(self) -> None:
        self.detectors = RouteDetectors(self.config_for, self.health_config)
        self.open, self.last_minute, self.published = {}, None, {}
        self.writer = StateWriter(self.run)

    def evaluate(self, now: datetime) -> list[Alert]:
        """Evaluate every complete minute up to the watermark; returns new transitions, oldest first."""
        if not self._restored:
            self.restore()
        latest = self.slowest_active_minute(now)
        if latest is None:
            return []
        end = min(latest - self.watermark, now.replace(second=0, microsecond=0))
        if self.last_minute is not None and end <= self.last_minute:
            return []
        if self.last_minute is None:
            start = end - timedelta(minutes=self.detector_config.history_minutes)
            if (stored := self.rates.first_minute()) is not None:  # None: no minute stored (any more) to start at
                start = max(stored, start)
        else:
            start = self.last_minute + MINUTE
        started = time.perf_counter()
        routes = max(len(self.detectors), len(self.route_progress))  # (the routes seen sending, before any is known)
        span = max(1, min(PASS_MINUTES, PASS_ROUTE_MINUTES // max(1, routes)))
        transitions, first = [], start
        try:
            while first <= end:
                last = min(end, first + (span - 1) * MINUTE)
                transitions += self._run(first, last, end)
                first = last + MINUTE
        except Exception:
            if self.use_checkpoint:  # the detectors stepped minutes no pass stored: resume from the store
                self._restored = False
            raise
        self.alerts.save_all(self.open.values())  # latest figures for open alerts, in one insert
        if self.use_checkpoint:  # what the overview and `rates` compare with
            expectations = self.detectors.expectations()
            publish_expectations(self.alerts, expectations, end, self.published)
            self.published = expectations
        log.info(
            "evaluated %d routes through %s: %d minutes in %.2f s",
            len(self.detectors),
            end.isoformat(),
            (end - start) // MINUTE + 1,
            time.perf_counter() - started,
        )
        return transitions

    def _run(self, start: datetime, stop: datetime, end: datetime) -> list[Alert]:
        """Step every route's detectors through start..stop, a part of the evaluation up to ``end``, and store them."""
        inputs = self._inputs(start, stop)
        new = sorted({route for by_route in inputs.values() for route in by_route} - set(self.detectors.rows))
        self.detectors.add(new)
        self.writer.joined(new)
        transitions, stepped = [], set()
        minute = start
        while minute <= stop:
            given = inputs.get(minute, {})
            self.detectors.step(minute_number(minute), given)
            if self.use_checkpoint:  # a route that joined is logged at its first minute, fed or not
                self.writer.minute(
                    minute, {**dict.fromkeys(new, RouteMinute()), **given} if minute == start else given, self.detectors
                )
            watched = sorted(self.detectors.watched() | {route for route, _ in self.open})
            for route in watched:
                transitions += self._step_route(route, minute, minute == end)
            stepped.update(watched)
            minute += MINUTE
        if self.use_checkpoint:
            by_route: dict[str, list[Alert]] = {route: [] for route in stepped}
            for (route, _), alert in self.open.items():
                by_route[route].append(alert)
            self.writer.open_alerts(stop, by_route)
            self.alerts.save_route_state(self.writer.finish(stop))
        self.last_minute = stop
        return transitions

    def _step_route(self, route: str, minute: datetime, last: bool) -> list[Alert]:
        health = self.detectors.health_view(route)
        watched = [k for k in INPUT_KINDS if health.state(k) != "ok" or (route, k) in self.open]
        views: list[tuple[str, RouteView | Finding]] = [
            (DRIFT_KIND, self.detectors.regression(route)),
            (MIX_KIND, self.detectors.mix_shift(route)),
            *((k, health.view(k)) for k in watched),
        ]
        return [t for kind, view in views if (t := self._step_alert(route, kind, view, minute, last)) is not None]

    def _step_alert(
        self, route: str, kind: str, view: RouteView | Finding, minute: datetime, last: bool = True
    ) -> Alert | None:
        previous = self.open.get((route, kind))
        if previous is None and view.state == "ok":
            return None
        if kind in INPUT_KINDS:
            severity: str = self.health_config.abstention_severity if kind == ABSTENTION_KIND else "critical"
            if kind == REJECTED_KIND and isinstance(view, Finding) and view.state != "ok":
                # the top rule costs a query: only where the alert changes state or its figures are saved
                fresh = last or previous is None or previous.recorded_state != view.state
                view = self._with_top_rule(route, view, minute, None if fresh else previous)
        else:
            effect = view.rate_effect if kind == DRIFT_KIND else view.delta
            severity = severity_for(effect, self.config_for(route).threshold, kind)
        current = next_alert(previous, route, view, minute, kind=kind, severity=severity, labels=dict(SERVICE_LABELS))
        if current is None:
            return None
        changed = previous is None or previous.recorded_state != current.recorded_state
        if changed and current.recorded_state != "resolved" and kind not in INPUT_KINDS:
            current = replace(current, suspect_changes=self._suspects(route, view, minute))
        if current.ends_at is None:
            self.open[(route, kind)] = current
        else:
            self.open.pop((route, kind), None)
        if not changed:
            return None
        self.alerts.save(current)
        self.alerts.record_transition(current)
        return current

    def _with_top_rule(self, route: str, view: Finding, minute: datetime, previous: Alert | None = None) -> Finding:
        """The rule most of the window's dead letters broke, with a sample and the command that lists them
        (carried over from ``previous`` when given, instead of asked again)."""
        details = view.details
        assert details is not None  # the rejected-events test's finding always carries its counts
        if previous is not None:
            return replace(
                view, details={**details, **{k: v for k, v in previous.details.items() if k in TOP_RULE_KEYS}}
            )
        start = minute - timedelta(minutes=view.window_minutes - 1)
        found = next((r for r in rejected_routes(self.rates.store, start, minute) if r["route"] == route), None)
        if found is not None:
            # The rule's share of the window's dead letters, of the ones the detector counted: a dead letter that
            # lands after its minute was evaluated is in the store's count but not the alert's, and the page must
            # not say "416 of 416 events dead-lettered; top rule (419 events)".
            counted = details.get("rejected", found["rejected"])
            details.update(
                top_rule=found["rule"],
                top_rule_count=round(found["rule_count"] / found["rejected"] * counted),
                sample_reason=found["sample"]["reason"],
                sample_source=found["sample"]["source"],
            )
        return replace(view, details=details)

    def _suspects(self, route: str, view: RouteView | Finding, minute: datetime) -> tuple[dict[str, Any], ...]:
        onset = view.onset or minute
        rows_before = self.rates.route_slices(route, onset - SUSPECT_LOOKBACK, onset - MINUTE)
        rows_after = self.rates.route_slices(route, onset, minute)

        def aggregate(rows: list[dict[str, Any]]) -> dict[tuple[str, str], Counts]:
            return {(r["dim"], r["value"]): Counts.from_row(r) for r in rows}

        try:
            found = suspect_changes(aggregate(rows_before), aggregate(rows_after))
        except ValueError as exc:
            log.warning("suspect changes for %s unavailable: %s", route, exc)
            return ()
        return tuple(s.as_dict() for s in found)


def _sums(rows: list[dict[str, Any]]) -> np.ndarray:
    """The ``sums`` of rows of ``minutes_all_routes`` as one array (routes' minutes × SUM_FIELDS), checked."""
    return checked_sums(np.array([r["sums"] for r in rows], dtype=float).reshape(len(rows), len(SUM_FIELDS)))


def detector_config_for(drift: DriftSettings) -> DetectorConfig:
    """The detector configuration of a ``[drift]`` settings section."""
    return DetectorConfig.from_mapping(
        {
            **drift.detector,
            "threshold": drift.threshold,
            "min_claims": drift.min_claims,
            "baseline_minutes": drift.baseline_minutes,
        }
    )
