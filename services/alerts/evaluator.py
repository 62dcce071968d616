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
from services.alerts.expectations import publish as publish_expectations
from services.alerts.input_health import InputHealthConfig, InputHealthDetector
from services.alerts.lifecycle import (
    ABSTENTION_KIND, DRIFT_KIND, EVALUATED_KINDS, INPUT_KINDS, MIX_KIND, REJECTED_KIND, SERVICE_LABELS, Alert,
    next_alert, severity_for,
)
from services.alerts.records import AlertRecords
from services.alerts.suspects import suspect_changes
from services.rates.intervals import Counts
from services.store.convert import ch_time, parse_ch_time
from services.store.dlq import rejected_minutes, rejected_routes
from services.store.rates import RateRepository

log = logging.getLogger(__name__)
CHECKPOINT = "alert-evaluator/v4"  # v4: learning baselines (a local level and a margin under a day), input health
MINUTE = timedelta(minutes=1)
# Minutes read and stepped at once. A backlog being drained spans hours or days of event time, and reading it
# whole held every route's and mix slice's minutes at once (+400 MiB on the worker draining 1 GiB of envelopes).
PASS_MINUTES = 60
SUSPECT_LOOKBACK = timedelta(hours=2)
# A route this far behind the newest minute no longer holds the watermark back … (short: a route that stops must be
# evaluated as silent within minutes, so route_silent pages within ten)
ACTIVE_WITHIN = timedelta(minutes=3)
MOVING_GRACE = timedelta(minutes=2)    # … unless its minutes still advanced this recently (a partition catching up)
LIVE_WITHIN = timedelta(minutes=15)    # data this close to the wall clock when it stopped was live, not a backfill
TOP_RULE_KEYS = ("top_rule", "top_rule_count", "sample_reason", "sample_source")  # an events_rejected alert's details


class AlertEvaluator:
    def __init__(self, detector_config: DetectorConfig, route_thresholds: dict[str, float], watermark: timedelta,
                 rates: RateRepository, alerts: AlertRecords, checkpoint: bool = True,
                 health_config: InputHealthConfig | None = None, wall_clock: bool = True):
        self.detector_config = detector_config
        self.health_config = health_config or InputHealthConfig()
        self.health: dict[str, InputHealthDetector] = {}
        # live, minutes advance with the wall clock when no route sends (every verifier down is an outage too);
        # a backtest replays on its own clock
        self.wall_clock = wall_clock
        self.newest_seen: tuple[datetime, datetime] | None = None  # (newest minute stored, when it last advanced)
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

    def health_detector(self, route: str) -> InputHealthDetector:
        if route not in self.health:
            self.health[route] = InputHealthDetector(self.health_config)
        return self.health[route]

    def _rejected(self, start: datetime, end: datetime) -> dict[datetime, dict[str, int]]:
        """minute -> route -> dead letters (in event time)."""
        out: dict[datetime, dict[str, int]] = defaultdict(dict)
        for row in rejected_minutes(self.rates.store, start, end):
            if row["route"]:
                out[row["minute"]][row["route"]] = row["rejected"]
        return out

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
        self.health = pickle.loads(base64.b64decode(state["health"]))
        self.open = {(a.route, a.kind): a for a in self.alerts.open_alerts() if a.kind in EVALUATED_KINDS}
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
        transitions, first = [], start
        while first <= end:
            last = min(end, first + (PASS_MINUTES - 1) * MINUTE)
            transitions += self._run(first, last, end)
            first = last + MINUTE
        for alert in self.open.values():  # latest figures for open alerts
            self.alerts.save(alert)
        self.last_minute = end
        if self.use_checkpoint:
            self.alerts.set_checkpoint(CHECKPOINT, json.dumps({
                "minute": ch_time(end),
                "detectors": base64.b64encode(pickle.dumps(self.detectors)).decode(),
                "health": base64.b64encode(pickle.dumps(self.health)).decode()}))
            publish_expectations(self.alerts, self.detectors, end)  # what the overview and `rates` compare with
        return transitions

    def _run(self, start: datetime, stop: datetime, end: datetime) -> list[Alert]:
        """Step every route's detectors through start..stop, a part of the evaluation up to ``end``."""
        buckets, slices = self._buckets(start, stop)
        rejected = self._rejected(start, stop)
        routes = sorted({r for counts in buckets.values() for r in counts} | set(self.detectors)
                        | {r for per_route in rejected.values() for r in per_route})
        transitions = []
        minute = start
        while minute <= stop:
            counts, mixes, refused = buckets.get(minute, {}), slices.get(minute, {}), rejected.get(minute, {})
            for route in routes:
                detector = self.detector(route)
                route_counts = counts.get(route, Counts.zero())
                detector.update(route_counts, minute, mixes.get(route))
                health = self.health_detector(route).update(route_counts, refused.get(route, 0), minute)
                watched = [k for k in INPUT_KINDS if health.state(k) != "ok" or (route, k) in self.open]
                views = [(DRIFT_KIND, detector.regression), (MIX_KIND, detector.mix_shift),
                         *((k, health.view(k)) for k in watched)]
                for kind, view in views:
                    transition = self._step_alert(route, kind, view, minute, minute == end)
                    if transition is not None:
                        transitions.append(transition)
            minute += MINUTE
        return transitions

    def _step_alert(self, route: str, kind: str, view, minute: datetime, last: bool = True) -> Alert | None:
        previous = self.open.get((route, kind))
        if previous is None and view.state == "ok":
            return None
        if kind in INPUT_KINDS:
            severity = self.health_config.abstention_severity if kind == ABSTENTION_KIND else "critical"
            if kind == REJECTED_KIND and view.state != "ok":
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

    def _with_top_rule(self, route: str, view, minute: datetime, previous: Alert | None = None):
        """The rule most of the window's dead letters broke, with a sample and the command that lists them
        (carried over from ``previous`` when given, instead of asked again)."""
        details = {**view.details, "dlq_command": f"claimwatch dlq --route {route}"}
        if previous is not None:
            return replace(view, details={**details, **{k: v for k, v in previous.details.items() if k in TOP_RULE_KEYS}})
        start = minute - timedelta(minutes=view.window_minutes - 1)
        found = next((r for r in rejected_routes(self.rates.store, start, minute) if r["route"] == route), None)
        if found is not None:
            # The rule's share of the window's dead letters, of the ones the detector counted: a dead letter that
            # lands after its minute was evaluated is in the store's count but not the alert's, and the page must
            # not say "416 of 416 events dead-lettered; top rule (419 events)".
            counted = details.get("rejected", found["rejected"])
            details.update(top_rule=found["rule"],
                           top_rule_count=round(found["rule_count"] / found["rejected"] * counted),
                           sample_reason=found["sample"]["reason"], sample_source=found["sample"]["source"])
        return replace(view, details=details)

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


def detector_config_for(drift) -> DetectorConfig:
    """The detector configuration of a ``[drift]`` settings section."""
    return DetectorConfig.from_mapping({**drift.detector, "threshold": drift.threshold, "min_claims": drift.min_claims,
                                        "baseline_minutes": drift.baseline_minutes})

