"""Per-route series only for the routes a scrape keeps (Metrics.keep_route_series); the fleet counters count
every route, whatever the routes are called and however many there are."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from services.core.metrics import Metrics
from services.ingest.records import EventCounts


def batch(*routes: str) -> EventCounts:
    counts = EventCounts()
    for route in routes:
        counts.events[route] += 2
        counts.claims.update({(route, "supported"): 3, (route, "stale"): 1})
    return counts


def samples(metrics: Metrics) -> dict[tuple, float]:
    return {
        (s.name, *sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(metrics.render().decode())
        for s in f.samples
        if not s.name.endswith("_created")
    }


def per_route(metrics: Metrics) -> set[str]:
    return {dict(key[1:]).get("route") for key in samples(metrics)} - {None}


def test_only_kept_routes_have_series_and_the_fleet_counts_every_route():
    metrics = Metrics()
    metrics.observe_batch(batch(*(f"req-{i}" for i in range(1000))), [], 0)
    assert per_route(metrics) == set()
    got = samples(metrics)
    assert got[("claimwatch_fleet_events_total",)] == 2000
    assert got[("claimwatch_fleet_claims_total", ("verdict", "stale"))] == 1000

    metrics.keep_route_series({"billing-faq", "req-1"})
    entered = samples(metrics)  # from 0, so Prometheus counts a route's first events after it entered
    assert entered[("claimwatch_events_total", ("route", "req-1"))] == 0
    assert entered[("claimwatch_claims_total", ("route", "billing-faq"), ("verdict", "contradicted"))] == 0
    metrics.observe_batch(batch("billing-faq", "req-1", "req-2"), [], 0)
    got = samples(metrics)
    assert per_route(metrics) == {"billing-faq", "req-1"}
    assert got[("claimwatch_events_total", ("route", "req-1"))] == 2
    assert got[("claimwatch_claims_total", ("route", "billing-faq"), ("verdict", "stale"))] == 1
    assert got[("claimwatch_fleet_events_total",)] == 2006

    metrics.keep_route_series({"billing-faq"})  # req-1 left: its series go, rather than stay stale
    metrics.observe_batch(batch("req-1"), [], 0)
    assert per_route(metrics) == {"billing-faq"}
