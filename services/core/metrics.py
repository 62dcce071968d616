"""Prometheus metrics, on a registry of their own (no global state for tests to reset)."""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from services.contract.model import CANONICAL_VERDICTS

if TYPE_CHECKING:
    from services.ingest.budget import ByteBudget
    from services.ingest.records import DeadLetter, EventCounts
    from services.ingest.routes import RouteGuard

log = logging.getLogger(__name__)


class SkippedRows:
    """Stored rows a background job could not read (a time out of range, broken JSON). The job leaves the
    row out and goes on: one bad row must not stop it until a restart. Every skip is counted per job; each row is
    logged once per job, not at every tick that reads it again."""

    LOG_AT_MOST = 1000  # distinct (job, row) pairs remembered; past that, skips are only counted

    def __init__(self, counter: Counter | None = None):
        self.counter = counter
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()  # the jobs run on threads of their own

    def of(self, job: str) -> Callable[[str, Exception], None]:
        """The ``skip`` a store reader takes (services.store.convert.decode_rows), for one job."""
        return partial(self.skip, job)

    def skip(self, job: str, key: str, error: Exception) -> None:
        if self.counter is not None:
            self.counter.labels(job).inc()
        with self._lock:
            new = (job, key) not in self._logged and len(self._logged) < self.LOG_AT_MOST
            if new:
                self._logged.add((job, key))
        if new:
            log.warning(
                "%s skipped stored row %s, which it cannot read (%s: %s); it stays stored, and skips are "
                "counted in claimwatch_rows_skipped_total",
                job,
                key,
                type(error).__name__,
                error,
            )


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.fleet_events = Counter(
            "claimwatch_fleet_events_total",
            "Valid verdict events received, of all routes "
            "(redeliveries included; see claimwatch_duplicate_events_total)",
            registry=r,
        )
        self.fleet_claims = Counter(
            "claimwatch_fleet_claims_total", "Claims stored, of all routes, by verdict", ["verdict"], registry=r
        )
        self.events = Counter(
            "claimwatch_events_total",
            "Valid verdict events received (redeliveries included), of "
            "the routes with per-route series, since they have them",
            ["route"],
            registry=r,
        )
        self.duplicates = Counter("claimwatch_duplicate_events_total", "Redelivered events counted once", registry=r)
        self.claims = Counter(
            "claimwatch_claims_total",
            "Claims stored, of the routes with per-route series, since they have them",
            ["route", "verdict"],
            registry=r,
        )
        # The routes with per-route series (RouteSeries, services/api/routers/ops.py, chooses them at each scrape):
        # a producer chooses route names, so a series per route seen would grow without bound.
        self.series_routes: frozenset[str] = frozenset()
        self._series_lock = threading.Lock()  # ingest threads count while a scrape changes the routes
        self.dlq = Counter(
            "claimwatch_dlq_total",
            "Invalid messages (or bad events of a batch envelope) sent to the dead-letter topic",
            ["reason"],
            registry=r,
        )
        self.store_failures = Counter("claimwatch_store_failures_total", "Failed store writes (retried)", registry=r)
        self.ingest_seconds = Histogram(
            "claimwatch_ingest_batch_seconds",
            "Decode + write time per batch",
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.eval_seconds = Histogram(
            "claimwatch_evaluation_seconds",
            "Alert evaluation time",
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60),
        )
        self.consumer_lag = Gauge(
            "claimwatch_consumer_lag", "Messages behind the log end", ["topic", "partition"], registry=r
        )
        self.route_rate = Gauge(
            "claimwatch_route_hallucination_rate", "Claim-level hallucination rate", ["route", "window"], registry=r
        )
        self.route_rate_lo = Gauge(
            "claimwatch_route_hallucination_rate_lower", "95% interval, lower bound", ["route", "window"], registry=r
        )
        self.route_rate_hi = Gauge(
            "claimwatch_route_hallucination_rate_upper", "95% interval, upper bound", ["route", "window"], registry=r
        )
        self.slo_budget_remaining = Gauge(
            "claimwatch_slo_error_budget_remaining",
            "Share of the SLO's error budget left over its window (1: untouched; below 0: overspent)",
            ["slo"],
            registry=r,
        )
        self.slo_burn_rate = Gauge(
            "claimwatch_slo_burn_rate",
            "Burn rate of the SLO's error budget over a window (1 spends it exactly over the SLO's window)",
            ["slo", "window"],
            registry=r,
        )
        self.alerts = Gauge("claimwatch_alerts", "Alerts by state", ["state"], registry=r)
        self.alert_transitions = Counter(
            "claimwatch_alert_transitions_total", "Alert transitions", ["state"], registry=r
        )
        self.assignments = Counter(
            "claimwatch_issue_assignments_total", "Online issue assignments", ["outcome"], registry=r
        )
        self.recluster_seconds = Histogram(
            "claimwatch_recluster_seconds",
            "Duration of completed re-clustering runs (collect, fit, publish)",
            registry=r,
            buckets=(1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600),
        )
        self.recluster_runs = Counter(
            "claimwatch_recluster_runs_total",
            "Re-clustering runs by outcome (ok, failed, cancelled)",
            ["outcome"],
            registry=r,
        )
        self.recluster_skipped = Counter(
            "claimwatch_recluster_skipped_total",
            "Re-clustering ticks skipped, by reason (few_new_claims, nothing_to_cluster, running)",
            ["reason"],
            registry=r,
        )
        self.recluster_new_claims = Gauge(
            "claimwatch_recluster_new_claims",
            "Failing claims ingested since the last re-clustering run, counted up to the run threshold",
            registry=r,
        )
        self.rows_skipped = Counter(
            "claimwatch_rows_skipped_total",
            "Stored rows a background job could not read and skipped, by job (each time it read one)",
            ["job"],
            registry=r,
        )
        self.skipped_rows = SkippedRows(self.rows_skipped)
        self.buffered_bytes = Gauge(
            "claimwatch_ingest_buffered_bytes",
            "Bytes of messages the worker holds: buffered, "
            "or taken and not yet stored (at most ingest.max_buffer_bytes and one message)",
            registry=r,
        )
        self.buffered_bytes_peak = Gauge(
            "claimwatch_ingest_buffered_bytes_peak",
            "The most bytes of messages the worker has held since it started",
            registry=r,
        )
        self.active_routes = Gauge(
            "claimwatch_active_routes", "Routes this worker has taken events of within routes.active_hours", registry=r
        )
        self.active_routes_limit = Gauge(
            "claimwatch_active_routes_limit",
            "routes.max_active: events of further new routes are dead-lettered (rule route.limit)",
            registry=r,
        )
        self.notify_failures = Counter(
            "claimwatch_notification_failures_total", "Failed notification attempts", ["target"], registry=r
        )
        self.evaluator_lag = Gauge(
            "claimwatch_evaluator_lag_seconds",
            "Wall clock minus the end of the newest "
            "minute the alert evaluator has evaluated, at its last tick (the leader's; 0 "
            "elsewhere)",
            registry=r,
        )
        self.broker_up: Gauge | None = None  # only where a broker is consumed (watch_broker)
        self.notify_sent = Counter(
            "claimwatch_notifications_sent_total", "Notifications a receiver accepted (2xx)", ["receiver"], registry=r
        )
        self.notify_depth = Gauge(
            "claimwatch_notification_queue_depth",
            "Notifications queued for a receiver, the one being sent included",
            ["receiver"],
            registry=r,
        )
        self.notify_oldest = Gauge(
            "claimwatch_notification_queue_oldest_seconds",
            "Age of a receiver's oldest queued notification (0 when none)",
            ["receiver"],
            registry=r,
        )
        self.notify_failing = Gauge(
            "claimwatch_notification_failing_seconds",
            "Seconds since a receiver's current "
            "unbroken run of failed attempts began; 0 when its last attempt succeeded",
            ["receiver"],
            registry=r,
        )

    def watch_buffer(self, budget: ByteBudget) -> None:
        """Report a ByteBudget (services/ingest/budget.py) at every scrape."""
        self.buffered_bytes.set_function(lambda: budget.held)
        self.buffered_bytes_peak.set_function(lambda: budget.peak)

    def watch_broker(self, up: Callable[[], bool]) -> None:
        """Report whether the broker answers (1/0) at every scrape; a process that consumes calls this, so one
        that only serves the API has no such series."""
        self.broker_up = Gauge(
            "claimwatch_broker_up",
            "1 while the broker answers the worker's reads, 0 once it "
            "has not for ingest's bound (what /readyz reports)",
            registry=self.registry,
        )
        self.broker_up.set_function(lambda: float(up()))

    def watch_routes(self, guard: RouteGuard) -> None:
        """Report a RouteGuard (services/ingest/routes.py) at every scrape."""
        self.active_routes.set_function(lambda: len(guard))
        self.active_routes_limit.set(guard.max_active)

    def observe_batch(self, counts: EventCounts, dead: Sequence[DeadLetter], duplicates: int) -> None:
        """``counts``: services.ingest.records.EventCounts, counted while decoding (off the event loop)."""
        per_rule = collections.Counter(d.rejection.rule for d in dead)
        self.fleet_events.inc(sum(counts.events.values()))
        per_verdict: collections.Counter[str] = collections.Counter()
        for (_, verdict), n in counts.claims.items():
            per_verdict[verdict] += n
        for verdict, n in per_verdict.items():
            self.fleet_claims.labels(verdict).inc(n)
        with self._series_lock:
            routes = self.series_routes
            for route, n in counts.events.items():
                if route in routes:
                    self.events.labels(route).inc(n)
            for labels, n in counts.claims.items():
                if labels[0] in routes:
                    self.claims.labels(*labels).inc(n)
        for rule, n in per_rule.items():
            self.dlq.labels(rule).inc(n)
        if duplicates:
            self.duplicates.inc(duplicates)

    def keep_route_series(self, routes: set[str]) -> None:
        """Count per-route events and claims (by each verdict) for ``routes`` only, from now on. A route that
        leaves loses its series; one that enters starts its counters at 0, so Prometheus reads a new series from
        its first sample (rate() and increase() count from there). The rate gauges are set beside
        (services/api/routers/ops.py)."""
        with self._series_lock:
            left, entered = self.series_routes - routes, routes - self.series_routes
            for route in left:
                self.events.remove(route)
                for verdict in CANONICAL_VERDICTS:  # the decoder lets no other through
                    self.claims.remove(route, verdict)
            for route in entered:
                self.events.labels(route)
                for verdict in CANONICAL_VERDICTS:  # the decoder lets no other through
                    self.claims.labels(route, verdict)
            self.series_routes = frozenset(routes)

    def render(self) -> bytes:
        return generate_latest(self.registry)
