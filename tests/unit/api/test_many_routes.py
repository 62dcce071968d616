"""Ten thousand routes on a real chDB store (issue 49, item 3): the overview, GET /api/rates and `claimwatch rates`
answer a page at a time, sorted and filtered by the server, each figure as the whole list gives it; /metrics
carries per-route series for a bounded set of routes, an alerting one always among them."""

from __future__ import annotations

import random
import re
import shlex
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from services.alerts.detection.expectations import Expectation, publish
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.api import views
from services.api.app import create_api
from services.api.auth import new_token
from services.api.security import ApiPolicy
from services.app.cli import main
from services.app.compose import open_components
from services.app.settings import Settings
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.ingest.records import EventCounts
from services.rates.intervals import Counts, Interval
from services.rates.report import route_rates
from services.store.convert import parse_ch_time
from services.store.writer import EventWriter
from tests.support.cli import answer_http_with

# every test reads the 10,000 routes' store, which takes seconds to fill: `make test-fast` leaves them out
pytestmark = pytest.mark.slow

ROUTES = 10_000
START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
NOW = START + timedelta(minutes=5)
WINDOW = timedelta(minutes=30)
MB = 1 << 20
TOKEN, TOKEN_HASH = new_token()
FIRING, PENDING = "billing-faq", "hr-policy/leave_days"  # PENDING's rate is low: far from the first pages
NAMED = [FIRING, PENDING, "billing-refunds", "billing-invoices", "Billing-EU", "hr-policy/leaveXdays", "legal%terms"]


def route_names() -> list[str]:
    """A request id in every route (the producer bug of issue 49), besides a few named routes."""
    rng = random.Random(49)
    return NAMED + [f"checkout/req-{rng.getrandbits(64):016x}/confirm" for _ in range(ROUTES - len(NAMED))]


def bucket(route: str, minute: int, claims: int, failed: int) -> dict:
    """One minute of a route, as rate_minute keeps it: answers of 3 claims each."""
    events = claims // 3
    return {
        "dim": "",
        "value": "",
        "route": route,
        "minute": (START + timedelta(minutes=minute)).strftime("%Y-%m-%d %H:%M:%S"),
        "events": events,
        "claims": claims,
        "failed": failed,
        "claims_sq": 9 * events,
        "failed_sq": failed,
        "failed_claims": 3 * failed,
        "supported": claims - failed,
        "contradicted": failed,
        "served": events,
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    settings = Settings(
        clickhouse=f"chdb:{tmp_path_factory.mktemp('routes') / 'ch'}",
        retention={"raw_days": 3650, "aggregate_days": 3650},
    )  # event times are fixed
    services = open_components(settings, starting=True)
    rng = random.Random(7)
    rows = []
    for route in route_names():
        # Few distinct figures, so many routes tie and the order must still be the same on every page.
        failed = 0 if route == PENDING else 9 if route == FIRING else rng.choice([0, 1, 2, 3, 6, 12])
        rows += [bucket(route, 0, 30, failed), bucket(route, 1, 30, rng.choice([0, 3]))]
    services.store.insert("rate_minute", rows)
    decoder = Decoder()  # and an answer of every route the contract allows, as ingest stores it (calibration reads it)
    answers = [
        decoder.decode(
            orjson.dumps(
                {
                    "schema": "claimwatch.verdict/v1",
                    "event_id": f"e-{i}",
                    "trace_id": f"t-{i}",
                    "route": route,
                    "observed_at": (START + timedelta(minutes=1, seconds=30)).isoformat(),
                    "claims": [{"verdict": "supported"}, {"verdict": "supported"}],
                }
            )
        )
        for i, route in enumerate(route_names())
    ]
    EventWriter(services.store).write([a for a in answers if isinstance(a, VerdictEvent)])  # not legal%terms
    alerts = alert_repository(services.store)
    for alert_id, route, starts_at in (("a-firing", FIRING, START), ("a-pending", PENDING, None)):
        alerts.save(
            Alert(
                alert_id=alert_id,
                route=route,
                kind="hallucination_rate_rise",
                severity="warning",
                labels={},
                window=30,
                pending_since=START,
                starts_at=starts_at,
                rate=0.15,
                rate_interval=Interval(0.1, 0.2),
                baseline=0.05,
                claims=60,
            )
        )
    # What the evaluator publishes: routes with an expectation sort by how far above it they are.
    expected = {route: Expectation(0.01 * (i % 7), "profile", False) for i, route in enumerate(route_names()[::3])}
    publish(alerts, expected, START)
    yield services
    services.close()


@pytest.fixture(scope="module")
def client(world):
    return TestClient(
        create_api(world, ApiPolicy(token_hashes=(TOKEN_HASH,), anonymous_reads_per_minute=60_000), now=lambda: NOW)
    )


def unpaged(world, sort: str) -> list[dict]:
    """The whole list as one answer gave it before paging: every route's figures, sorted."""
    return world.alerts.compare_rates(route_rates(world.repos.rates.totals("", WINDOW)), NOW, sort)


def links(response) -> dict[str, str]:
    return {rel: url for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', response.headers.get("link", ""))}


def overview_routes(html: str) -> list[str]:
    return re.findall(r'<th scope="row" class="route-name"><a href="/routes/[^"]+">([^<]+)</a>', html)


# -- the first page -----------------------------------------------------------------------------------
@pytest.mark.parametrize("sort", ["priority", "rate"])
def test_the_first_page_is_small_and_the_whole_lists_first_routes_with_their_figures(world, client, sort):
    whole = unpaged(world, sort)
    assert len(whole) == ROUTES
    answer = client.get("/api/rates", params={"sort": sort})
    assert answer.status_code == 200 and len(answer.content) <= MB, len(answer.content)
    assert answer.headers["x-total-count"] == str(ROUTES)
    assert answer.json() == whole[:100]  # the same routes, in the same order, every figure the same
    if sort == "priority":
        assert whole[0]["route"] == FIRING and whole[0]["firing_alerts"] == ["a-firing"]
        assert any(e["delta_lo"] is not None for e in whole[:100])  # the expectations order them


def test_the_overview_is_small_and_shows_the_first_page_with_a_pager_and_a_filter_box(world, client):
    page = client.get("/")
    assert page.status_code == 200 and len(page.content) <= MB, len(page.content)
    assert overview_routes(page.text) == [e["route"] for e in unpaged(world, "priority")[:100]]
    assert 'name="route"' in page.text and "routes 1–100 of 10,000" in page.text
    assert 'href="?window=30m&amp;sort=priority&amp;offset=100" rel="next"' in page.text
    firing_row = page.text[page.text.index(f'href="/routes/{FIRING}"') :]
    assert f'<polyline points="{trend_of(world, FIRING)}"/>' in firing_row[: firing_row.index("</tr>")]


def trend_of(world, route: str) -> str:
    """The overview's sparkline of a route as it drew it before paging: its minutes summed into 15-minute buckets."""
    rates = world.repos.rates
    end = rates.window_end()
    start = end - timedelta(minutes=359)
    buckets = [Counts.zero()] * 24
    for row in rates.minutes(route, start, end):
        at = int((parse_ch_time(row["minute"]) - start).total_seconds() // 60) // 15
        buckets[at] = buckets[at] + Counts.from_row(row)
    return views.sparkline([c.rate for c in buckets])


def test_the_review_page_lists_a_bounded_number_of_routes(client):
    page = client.get("/review")
    assert page.status_code == 200 and len(page.content) <= MB, len(page.content)
    for table in ("review-calibrated", "review-plan"):
        body = page.text.split(f'id="{table}"')[1].split("</table>")[0]
        assert body.count("<tr data-route=") == 100, table
    assert "The first 100 of 9,999 routes" in page.text


# -- every page ---------------------------------------------------------------------------------------
def test_following_next_links_gives_every_route_once_in_the_lists_order(world, client):
    seen, url = [], "/api/rates?sort=priority&limit=1000"
    while url:
        answer = client.get(url)
        assert answer.status_code == 200 and answer.headers["x-total-count"] == str(ROUTES)
        seen += [e["route"] for e in answer.json()]
        url = links(answer).get("next")
        assert url is None or url.startswith("/api/rates?")
    assert seen == [e["route"] for e in unpaged(world, "priority")]
    last = client.get("/api/rates", params={"sort": "priority", "limit": 1000, "offset": 9000})
    assert "next" not in links(last) and links(last)["prev"].endswith("offset=8000")
    assert client.get("/api/rates", params={"offset": ROUTES}).json() == []
    assert client.get("/api/rates", params={"limit": 1001}).status_code == 422


def test_the_overview_pages_through_a_filtered_list(world, client):
    whole = [e["route"] for e in unpaged(world, "priority") if e["route"].startswith("checkout/req-0")]
    assert 300 < len(whole) < 1000
    seen, url = [], "/?route=checkout/req-0*"
    while url:
        page = client.get(url)
        assert page.status_code == 200
        seen += overview_routes(page.text)
        found = re.search(r'<a href="([^"]+)" rel="next">', page.text)
        url = "/" + found[1].replace("&amp;", "&") if found else None
    assert seen == whole
    assert client.get("/?route=nothing-like-this").text.count("No route matching") == 1


# -- filters ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "pattern, matching",
    [
        ("billing-*", ["billing-faq", "billing-refunds", "billing-invoices", "Billing-EU"]),  # whole names, any case
        ("billing", ["billing-faq", "billing-refunds", "billing-invoices", "Billing-EU"]),  # a part of the name
        ("*/leave_days", [PENDING]),  # `_` is a character, not LIKE's wildcard
        ("*leave?days", [PENDING, "hr-policy/leaveXdays"]),
        ("leave?days", []),  # a glob names the whole route
        ("legal%", ["legal%terms"]),  # `%` too
        ("faq", ["billing-faq"]),
    ],
)
def test_the_route_filter_keeps_what_it_names_in_the_lists_order(world, client, pattern, matching):
    answer = client.get("/api/rates", params={"route": pattern, "sort": "priority"})
    assert answer.status_code == 200 and answer.headers["x-total-count"] == str(len(matching))
    order = [e["route"] for e in unpaged(world, "priority")]
    assert [e["route"] for e in answer.json()] == sorted(matching, key=order.index)


# -- the command line ---------------------------------------------------------------------------------
def test_rates_says_how_many_more_and_its_next_page_command_works_when_pasted(world, client, monkeypatch):
    api = answer_http_with(client, monkeypatch, TOKEN)
    run = lambda args: CliRunner(env={"COLUMNS": "200"}).invoke(main, args, obj=api)  # noqa: E731
    pages = [
        [
            e["route"]
            for e in client.get(
                "/api/rates", params={"route": "billing*", "sort": "priority", "limit": 3, "offset": offset}
            ).json()
        ]
        for offset in (0, 3)
    ]
    first = run(["rates", "--route", "billing*", "--limit", "3", "--api", "http://testserver"])
    assert first.exit_code == 0, first.output
    assert printed_routes(first.output, pages) == pages[0]
    note = first.output.strip().splitlines()[-1]
    assert note.startswith("routes 1–3 of 4 routes matching 'billing*'; 1 more, the next 1: "), note
    words = shlex.split(note.split(": ", 1)[1])
    assert words[1] == "rates" and dict(zip(words[2::2], words[3::2])) == {
        "--route": "billing*",
        "--limit": "3",
        "--offset": "3",
        "--api": "http://testserver",
    }
    second = run(words[1:])  # words[0] is the claimwatch this shell runs
    assert second.exit_code == 0, second.output
    assert printed_routes(second.output, pages) == pages[1]
    assert second.output.strip().splitlines()[-1] == "routes 4–4 of 4 routes matching 'billing*'"


def printed_routes(output: str, pages: list[list[str]]) -> list[str]:
    return [line.split()[0] for line in output.splitlines() if line.split() and line.split()[0] in sum(pages, [])]


# -- /metrics -----------------------------------------------------------------------------------------
def per_route_series(text: str) -> dict[str, set[str]]:
    """Per metric family, the routes it carries series for."""
    return {
        family.name: {s.labels["route"] for s in family.samples if "route" in s.labels}
        for family in text_string_to_metric_families(text)
    }


def test_metrics_stay_small_with_series_for_the_top_routes_and_every_open_alert(world, client):
    counts = EventCounts()
    for i, route in enumerate(route_names()):
        counts.events[route] += 3
        counts.claims.update({(route, "supported"): 7, (route, "contradicted"): 1, (route, "trivial"): i % 2})
    world.metrics.observe_batch(counts, [], 0)  # what ingest counted before the first scrape: the fleet's alone

    answer = client.get("/metrics")
    assert answer.status_code == 200 and len(answer.content) < 5 * MB, len(answer.content)
    series = per_route_series(answer.text)
    top = {e["route"] for e in unpaged(world, "priority")[:500]}
    for family in (
        "claimwatch_events",
        "claimwatch_claims",
        "claimwatch_route_hallucination_rate",
        "claimwatch_route_hallucination_rate_lower",
        "claimwatch_route_hallucination_rate_upper",
    ):
        assert series[family] == top | {PENDING}, family  # the pending alert's route ranks far below the 500
    fleet = {
        s.name: s.value
        for f in text_string_to_metric_families(answer.text)
        for s in f.samples
        if s.name.startswith("claimwatch_fleet_")
    }
    assert fleet["claimwatch_fleet_events_total"] == 3 * ROUTES

    world.metrics.observe_batch(counts, [], 0)  # counted now per route too, for the routes with series
    again = {
        (s.name, s.labels.get("route"), s.labels.get("verdict")): s.value
        for f in text_string_to_metric_families(client.get("/metrics").text)
        for s in f.samples
    }
    assert again[("claimwatch_events_total", PENDING, None)] == 3
    assert again[("claimwatch_claims_total", FIRING, "contradicted")] == 1
    assert again[("claimwatch_fleet_events_total", None, None)] == 6 * ROUTES
    assert again[("claimwatch_fleet_claims_total", None, "contradicted")] == 2 * ROUTES
