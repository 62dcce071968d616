"""The ops page shows each notification receiver's state from the notification log, as any process reads it: a
receiver failing for 10 minutes is down, with what is waiting for it and why it fails (issue 49, finding 4)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from services.alerts.notify.receivers import Outgoing, receiver_status
from services.api.app import create_api
from services.app.compose import open_components
from services.app.settings import Settings
from services.core.clock import utcnow


@pytest.fixture()
def components(tmp_path):
    settings = Settings(
        clickhouse=f"chdb:{tmp_path / 'ch'}",
        notify={"alertmanager_url": "http://am.example:9093"},
        triage={"webhook_url": "http://tickets.example/hook"},
    )
    c = open_components(settings)
    yield c
    c.close()


def row(html: str, receiver: str) -> str:
    found = re.search(rf'<tr id="receiver-{receiver}" class="receiver (\w+)">(.*?)</tr>', html, re.S)
    assert found, html
    return found[1] + " " + re.sub(r"<[^>]+>|\s+", " ", found[2])


def test_a_receiver_failing_for_ten_minutes_is_down_on_the_ops_page(components):
    log, now = components.repos.notifications, utcnow()
    tickets = [
        Outgoing("issue_webhook", "http://tickets.example/hook", b'{"event":"assigned"}', key=f"issue/{i}")
        for i in range(3)
    ]
    log.record(tickets, now - timedelta(minutes=14))
    log.settle(tickets[0], "delivered", 1, "", now - timedelta(minutes=13))
    log.set_failing("issue_webhook", now - timedelta(minutes=12), "no answer within 10 s", now)
    log.set_failing("alertmanager", now - timedelta(minutes=30), "HTTP 503", now - timedelta(minutes=20))
    log.set_failing("alertmanager", None, "", now - timedelta(minutes=5))  # it recovered
    html = TestClient(create_api(components)).get("/ops").text
    assert 'href="/ops" aria-current="page"' in html
    tickets_row = row(html, "issue_webhook")
    assert tickets_row.startswith("down") and "for 12 min" in tickets_row and "no answer within 10 s" in tickets_row
    assert " 2 " in tickets_row and "14 min" in tickets_row  # two waiting, the oldest logged 14 min ago
    assert row(html, "alertmanager").startswith("ok") and "HTTP 503" not in row(html, "alertmanager")
    assert row(html, "webhook").startswith("off") and "not configured" in row(html, "webhook")


def test_a_receiver_is_failing_before_it_is_down():
    now = utcnow()
    found = {
        "webhook": {
            "failing_since": now - timedelta(minutes=9),
            "last_error": "HTTP 500",
            "waiting": 1,
            "oldest": now - timedelta(minutes=9),
        }
    }
    status = {s["receiver"]: s for s in receiver_status(found, {"webhook": True, "alertmanager": True}, now)}
    assert status["webhook"]["state"] == "failing" and status["webhook"]["failing_seconds"] == 540
    assert status["alertmanager"] == {
        "receiver": "alertmanager",
        "state": "ok",
        "waiting": 0,
        "oldest_seconds": None,
        "failing_since": None,
        "failing_seconds": 0.0,
        "last_error": "",
    }
    assert status["issue_webhook"]["state"] == "off"


@pytest.mark.slow
def test_failing_store_writes_and_the_route_bound_show_on_the_ops_page(components):
    from services.ingest.routes import RouteGuard

    health, metrics = components.health, components.metrics
    client = TestClient(create_api(components))
    assert "this process writes no events" in client.get("/ops").text  # an API alone says so, not "ok"

    health.writes = True
    guard = RouteGuard(10)
    for i in range(9):
        guard.admit(f"r{i}", utcnow())
    metrics.watch_routes(guard)
    health.mark_failed("the disk under the store is full: free space there or move the store", utcnow())
    health.mark_failed("the disk under the store is full: free space there or move the store", utcnow())
    html = client.get("/ops").text
    store = re.search(r'<tr class="ingest (\w+)">\s*<td>store writes</td>(.*?)</tr>', html, re.S)
    assert store and store[1] == "failing" and "2 failed writes in a row" in store[2] and "disk" in store[2]
    routes = re.search(r'<tr class="ingest (\w+)">\s*<td>routes</td>(.*?)</tr>', html, re.S)
    assert routes and routes[1] == "failing" and "9 of 10 active" in routes[2]  # 90% of the bound: near it

    health.mark_ok()
    store = re.search(r'<tr class="ingest (\w+)">\s*<td>store writes</td>', client.get("/ops").text)
    assert store and store[1] == "ok"
