"""Per-route drift evaluation over event-time minute buckets, behind a watermark.

The same object runs live (a leader-only Faust timer) and in `claimwatch backtest`
(a simulated clock): it only ever reads minute buckets from the store and is told
the time. Every route's detectors step a minute at once (services/alerts/detection/route_detectors.py),
and the evaluation only looks at the routes whose detectors are not ok or that have an open alert.

A pass reads its minutes (sums, mix slices, dead letters) once (services/alerts/evaluation/inputs.py), steps the
detectors and alerts through them without reading or writing (services/alerts/evaluation/step.py), reads what the
changed alerts ask for (services/alerts/evaluation/enrich.py), then saves the transitions and its state.
Its state is stored per route (services/alerts/evaluation/stored_state.py) with every pass, so a restart
(or a pass the store failed) resumes exactly: the same detector state and open alerts as that pass
left them, and transitions that are re-derived keep their deterministic ids, so nothing is alerted twice.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime, timedelta

from services.alerts.detection.config import DetectorConfig
from services.alerts.detection.expectations import Expectation
from services.alerts.detection.expectations import publish as publish_expectations
from services.alerts.detection.health_engine import InputHealthConfig
from services.alerts.detection.route_detectors import RouteDetectors
from services.alerts.evaluation import stored_state
from services.alerts.evaluation.enrich import Enrichment
from services.alerts.evaluation.inputs import PassInputs
from services.alerts.evaluation.step import AlertStep
from services.alerts.evaluation.stored_state import CHECKPOINT_ROUTE, CHECKPOINT_SLOT, FORMAT, StateWriter
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import AlertRecords
from services.store.dlq import DeadLetterRepository
from services.store.rates import RateRepository

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)
# Minutes read and stepped at once. A backlog being drained spans hours or days of event time, and reading it
# whole held every route's and mix slice's minutes at once (+400 MiB on the worker draining 1 GiB of envelopes).
# A pass is also one insert of the evaluator's state, so it spans at most the state's ring of inputs.
PASS_MINUTES = stored_state.SNAPSHOT_MINUTES
# And at most this many route-minutes: 10,000 routes are read a minute at a time, as they are live. Each part's rows
# and its state insert are held at once: 2 minutes of 10,000 routes added 150-200 MiB while a backlog was caught up.
PASS_ROUTE_MINUTES = 10_000
# A route this far behind the newest minute no longer holds the watermark back … (short: a route that stops must be
# evaluated as silent within minutes, so route_silent pages within ten)
ACTIVE_WITHIN = timedelta(minutes=3)
MOVING_GRACE = timedelta(minutes=2)  # … unless its minutes still advanced this recently (a partition catching up)
LIVE_WITHIN = timedelta(minutes=15)  # data this close to the wall clock when it stopped was live, not a backfill


class AlertEvaluator:
    def __init__(
        self,
        detector_config: DetectorConfig,
        route_thresholds: dict[str, float],
        watermark: timedelta,
        rates: RateRepository,
        dead_letters: DeadLetterRepository,
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
        self.inputs = PassInputs(rates, dead_letters)  # what a pass reads first …
        self.step = AlertStep(self.config_for, self.health_config)  # … steps through, reading nothing …
        self.enrichment = Enrichment(rates, dead_letters)  # … and what its alerts ask for after
        self.alerts = alerts
        self.use_checkpoint = checkpoint
        self.detectors = RouteDetectors(self.config_for, self.health_config)
        self.open: dict[tuple[str, str], Alert] = {}  # (route, kind) -> its open alert
        self.last_minute: datetime | None = None
        # The first minute this process evaluated when it started from the stored history (not from a checkpoint):
        # the SLO burn alerts step from there too (services/alerts/evaluation/slo_watch.py).
        self.first_minute: datetime | None = None
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
            open_alerts = stored_state.restore(self.alerts, detectors, checkpoint.run, checkpoint.minute)
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
            self.first_minute = self.first_minute or start
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
        """One pass: step every route's detectors and alerts through start..stop, a part of the evaluation up to
        ``end``, and store them. Its minutes are read first, once; the step reads nothing; what the alerts that
        changed ask for is read after it; then the transitions and the state are written."""
        inputs = self.inputs.read(start, stop)
        stepped = self.step.run(
            self.detectors, self.open, inputs, start, stop, end, self.writer if self.use_checkpoint else None
        )
        stepped = self.enrichment.enrich(stepped)
        self.open = stepped.open
        for alert in stepped.transitions:
            self.alerts.save(alert)
            self.alerts.record_transition(alert)
        if self.use_checkpoint:
            by_route: dict[str, list[Alert]] = {route: [] for route in stepped.routes}
            for (route, _), alert in self.open.items():
                by_route[route].append(alert)
            self.writer.open_alerts(stop, by_route)
            self.alerts.save_route_state(self.writer.finish(stop))
        self.last_minute = stop
        return stepped.transitions
