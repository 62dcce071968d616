"""Per-route drift evaluation over event-time minute buckets, behind a watermark.

The same object runs live (a leader-only Faust timer) and in `claimwatch backtest`
(a simulated clock): it only ever reads minute buckets from the store and is told
the time. It resumes from a checkpoint after a restart: detectors are rebuilt by
replaying the baseline horizon, open alerts are reloaded, and transitions that are
re-derived keep their deterministic ids, so nothing is alerted twice.
"""
from __future__ import annotations

import base64
import json
import logging
import pickle
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta

from services.alerts.detector import DetectorConfig, DriftDetector, make_detector
from services.alerts.lifecycle import DRIFT_KIND, KINDS, MIX_KIND, Alert, next_alert, severity_for
from services.alerts.records import AlertRecords
from services.alerts.suspects import suspect_changes
from services.rates.intervals import Counts
from services.store.convert import ch_time, parse_ch_time
from services.store.rates import RateRepository

log = logging.getLogger(__name__)
CHECKPOINT = "alert-evaluator/v3"  # v3: detectors with the time-of-day profile and the mix slices
MINUTE = timedelta(minutes=1)
SUSPECT_LOOKBACK = timedelta(hours=2)
ACTIVE_WITHIN = timedelta(minutes=15)  # a route silent for longer no longer holds the watermark back …
MOVING_GRACE = timedelta(minutes=2)    # … unless its minutes still advanced this recently (a partition catching up)


class AlertEvaluator:
    def __init__(self, detector_config: DetectorConfig, route_thresholds: dict[str, float], watermark: timedelta,
                 rates: RateRepository, alerts: AlertRecords, checkpoint: bool = True):
        self.detector_config = detector_config
        self.route_thresholds = route_thresholds
        self.watermark = watermark
        self.rates = rates
        self.alerts = alerts
        self.use_checkpoint = checkpoint
        self.detectors: dict[str, DriftDetector] = {}
        self.open: dict[tuple[str, str], Alert] = {}  # (route, kind) -> its open alert
        self.last_minute: datetime | None = None
        self.route_progress: dict[str, tuple[datetime, datetime]] = {}  # route -> (its newest minute, when it last advanced)
        self._restored = False

    def config_for(self, route: str) -> DetectorConfig:
        threshold = self.route_thresholds.get(route)
        return self.detector_config if threshold is None else replace(self.detector_config, threshold=threshold)

    def detector(self, route: str) -> DriftDetector:
        if route not in self.detectors:
            self.detectors[route] = make_detector(self.config_for(route))
        return self.detectors[route]

    def _buckets(self, start: datetime, end: datetime) -> tuple[dict, dict]:
        """minute -> route -> Counts, and minute -> route -> mix slice -> Counts."""
        by_minute: dict[datetime, dict[str, Counts]] = defaultdict(dict)
        for row in self.rates.minutes_all_routes(start, end):
            by_minute[parse_ch_time(row["minute"])][row["route"]] = Counts.from_row(row)
        slices: dict[datetime, dict[str, dict[str, Counts]]] = defaultdict(lambda: defaultdict(dict))
        for row in self.rates.minutes_all_routes(start, end, dim="mix"):
            slices[parse_ch_time(row["minute"])][row["route"]][row["value"]] = Counts.from_row(row)
        return by_minute, slices

    def slowest_active_minute(self, now: datetime) -> datetime | None:
        """The watermark waits for the slowest route still sending: each route has its own partition,
        so a lagging partition must not have its minutes evaluated before its events land. A route
        far behind the newest one still holds it while its minutes keep advancing (a backlog being
        consumed); one that has stopped advancing for MOVING_GRACE is silent and lets go."""
        newest = self.rates.latest_minute()
        if newest is None:
            return None
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
        """Resume exactly where the last evaluation stopped: its detectors are in the checkpoint.

        Replaying history instead would not reproduce live state (live evaluation saw minutes as
        they landed), and a detector that disagrees with a stored open alert would close it and
        open a duplicate."""
        self._restored = True
        saved = self.alerts.checkpoint(CHECKPOINT) if self.use_checkpoint else None
        if saved is None:
            return
        state = json.loads(saved)
        self.last_minute = parse_ch_time(state["minute"])
        self.detectors = pickle.loads(base64.b64decode(state["detectors"]))  # our own store's bytes
        self.open = {(a.route, a.kind): a for a in self.alerts.open_alerts() if a.kind in KINDS}
        log.info("evaluator resumed at %s with %d open alerts", state["minute"], len(self.open))

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
            start = max(self.rates.first_minute(), end - timedelta(minutes=self.detector_config.history_minutes))
        else:
            start = self.last_minute + MINUTE
        transitions = self._run(start, end)
        for alert in self.open.values():  # latest figures for open alerts
            self.alerts.save(alert)
        self.last_minute = end
        if self.use_checkpoint:
            self.alerts.set_checkpoint(CHECKPOINT, json.dumps({
                "minute": ch_time(end),
                "detectors": base64.b64encode(pickle.dumps(self.detectors)).decode()}))
        return transitions

    def _run(self, start: datetime, end: datetime) -> list[Alert]:
        buckets, slices = self._buckets(start, end)
        routes = sorted({r for counts in buckets.values() for r in counts} | set(self.detectors))
        transitions = []
        minute = start
        while minute <= end:
            counts, mixes = buckets.get(minute, {}), slices.get(minute, {})
            for route in routes:
                detector = self.detector(route)
                detector.update(counts.get(route, Counts.zero()), minute, mixes.get(route))
                for kind, view in ((DRIFT_KIND, detector.regression), (MIX_KIND, detector.mix_shift)):
                    transition = self._step_alert(route, kind, view, minute)
                    if transition is not None:
                        transitions.append(transition)
            minute += MINUTE
        return transitions

    def _step_alert(self, route: str, kind: str, view, minute: datetime) -> Alert | None:
        previous = self.open.get((route, kind))
        if previous is None and view.state == "ok":
            return None
        effect = view.rate_effect if kind == DRIFT_KIND else view.delta
        severity = severity_for(effect, self.config_for(route).threshold, kind)
        current = next_alert(previous, route, view, minute, kind=kind, severity=severity, labels={"service": "claimwatch"})
        if current is None:
            return None
        changed = previous is None or previous.recorded_state != current.recorded_state
        if changed and current.recorded_state != "resolved":
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

    def _suspects(self, route: str, view, minute: datetime) -> tuple[dict, ...]:
        onset = view.onset or minute
        rows_before = self.rates.route_slices(route, onset - SUSPECT_LOOKBACK, onset - MINUTE)
        rows_after = self.rates.route_slices(route, onset, minute)
        aggregate = lambda rows: {(r["dim"], r["value"]): Counts.from_row(r) for r in rows}  # noqa: E731
        try:
            found = suspect_changes(aggregate(rows_before), aggregate(rows_after))
        except ValueError as exc:
            log.warning("suspect changes for %s unavailable: %s", route, exc)
            return ()
        return tuple(s.as_dict() for s in found)


def evaluator_for(settings, rates: RateRepository, alerts: AlertRecords, checkpoint: bool = True) -> AlertEvaluator:
    drift = settings.drift
    config = DetectorConfig.from_mapping({**drift.detector, "threshold": drift.threshold, "min_claims": drift.min_claims,
                                          "baseline_minutes": drift.baseline_minutes})
    return AlertEvaluator(config, drift.route_thresholds, timedelta(seconds=drift.watermark_seconds), rates, alerts,
                          checkpoint)
