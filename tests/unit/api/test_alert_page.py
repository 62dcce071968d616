"""A page per alert (/alerts/{id}): its timeline (transitions, ack, silence), the rate chart around it with what it
expected and its onset, suspects, the issues behind it and the top issue's runbook, with ack and silence; on the API
tests' store (real chDB)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlparse

import pytest

from services.alerts.lifecycle.records import alert_repository
from services.api.alertpage import chart_range, timeline
from tests.unit.api.test_api import AUTH, START, client_for, world  # noqa: F401  (world is a fixture)


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    """a-numbers: a-billing's copy whose window starts with the route, so an issue (iss-numbers) explains it; its
    transitions recorded, acked and silenced through the API."""
    alerts = alert_repository(world[0].store)
    numbers = replace(alerts.get("a-billing"), alert_id="a-numbers", pending_since=START, starts_at=None, onset=START)
    alerts.save(numbers)
    alerts.record_transition(numbers)
    firing = replace(numbers, starts_at=START + timedelta(minutes=3))
    alerts.save(firing)
    alerts.record_transition(firing)
    client = client_for(world[0])
    assert client.post("/api/alerts/a-numbers/ack", json={"by": "oncall", "note": "on it"}, headers=AUTH).is_success
    made = client.post(
        "/api/silences",
        json={"matchers": ["route=billing-faq"], "by": "oncall", "comment": "rolling back", "duration": "2h"},
        headers=AUTH,
    )
    assert made.status_code == 201, made.text
    return client


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_page_tells_the_alert_in_order_and_acts_on_it(client):
    page = client.get("/alerts/a-numbers")
    assert page.status_code == 200
    shown = text(page.text)
    api = client.get("/api/alerts/a-numbers").json()
    steps = re.findall(r"<li><time[^>]*>[^<]*</time> ([^<]+)</li>", page.text)
    assert steps[:3] == ["onset: the rise began (estimated)", "pending", "firing"], steps
    assert any(s.startswith("acked by oncall: on it") for s in steps) and any("silenced by" in s for s in steps)
    assert f"{100 * api['rate']:.1f}%" in shown and f"Expected {100 * api['expected']:.1f}%" in shown
    top = api["explanation"]["issues"][0]
    assert top["issue_id"] in shown and f"The runbook of {top['issue_id']}" in shown
    assert 'data-path="/api/silences"' in page.text and "a-numbers/ack" not in page.text  # acked: no ack button


def test_the_chart_covers_the_alert_from_before_its_onset(client):
    page = client.get("/alerts/a-numbers").text
    src = re.search(r'id="alert-chart" class="chart" data-src="([^"]+)"', page)[1].replace("&amp;", "&")
    asked = parse_qs(urlparse(src).query)
    chart = client.get(urlparse(src).path, params={k: v[0] for k, v in asked.items()})
    assert chart.status_code == 200, chart.text
    starts = datetime.fromisoformat(chart.json()["start"].replace("Z", "+00:00"))
    assert starts <= START - timedelta(minutes=55)  # about an hour before the onset (whole minutes)
    assert re.search(r'data-onset="2026-11-21T08:00:00', page) and 'data-expected="0.06"' in page


def test_an_unknown_alert_is_a_404_page_naming_it(client):
    page = client.get("/alerts/a-nope", headers={"Accept": "text/html"})
    assert page.status_code == 404 and "a-nope" in page.text


def test_the_timeline_orders_what_happened_and_the_chart_range_ends_at_the_resolve():
    at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    alert = {
        "onset": (at - timedelta(minutes=20)).isoformat(),
        "pending_since": (at - timedelta(minutes=15)).isoformat(),
        "ends_at": (at + timedelta(minutes=30)).isoformat(),
        "transitions": [
            {"state": "resolved", "at": (at + timedelta(minutes=30)).isoformat()},
            {"state": "pending", "at": (at - timedelta(minutes=15)).isoformat()},
        ],
        "acked_at": (at - timedelta(minutes=5)).isoformat(),
        "acked_by": "alice",
        "ack_note": "",
        "silenced_by": [],
    }
    assert [m.what for m in timeline(alert, [])] == [
        "onset: the rise began (estimated)",
        "pending",
        "acked by alice",
        "resolved",
    ]
    window, end = chart_range(alert, at + timedelta(days=2))
    assert (window, end) == ("110m", at + timedelta(minutes=30))  # an hour before the onset to the resolve
