"""The issue list's priority order (Sentry-style): issues driving a firing alert first, then regressed or
escalating ones, then the rest by recent volume; the escalating flag from members' event time.

A real chDB store holds five issues with hand-built member histories (event time) and two alerts: one
firing on billing (its window holds claims of a small, old issue), one resolved on catalog.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest
from fastapi.testclient import TestClient

from clustering.issue import REGRESSED, IssueRecord
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.api.app import create_api
from services.api.auth import new_token
from services.api.security import ApiPolicy
from services.app.cli.issues import _state_cell
from services.app.compose import open_components
from services.app.settings import Settings
from services.contract.decode import Decoder
from services.issues.priority import ALERT, REGRESSED_OR_ESCALATING, REST, is_escalating, priority_key, tier
from services.store.convert import ch_time
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=3)
TOKEN, TOKEN_HASH = new_token()


def test_a_burst_against_a_quiet_history_escalates_a_steady_or_tiny_one_does_not():
    assert is_escalating({0: 30, **dict.fromkeys(range(1, 7), 2)})  # 30 >= 3 x 2 and >= 10
    assert not is_escalating({0: 12})  # no history: new, not escalating
    assert not is_escalating(dict.fromkeys(range(7), 10))  # steady: 10 < 3 x 10
    assert not is_escalating({0: 25, **dict.fromkeys(range(1, 7), 9)})  # 25 < 27
    assert not is_escalating({0: 9})  # a few claims are not news
    assert not is_escalating({0: 0, 1: 40})  # quiet now, after a burst


def test_tiers_put_alert_drivers_before_regressed_or_escalating_before_the_rest():
    views = [
        {"issue_id": "big", "state": "ongoing", "count": 900, "recent_count": 400},
        {"issue_id": "esc", "state": "new", "count": 40, "recent_count": 40, "escalating": True},
        {"issue_id": "reg", "state": REGRESSED, "count": 5, "recent_count": 5},
        {
            "issue_id": "alert",
            "state": "ongoing",
            "count": 3,
            "recent_count": 3,
            "drives_alerts": [{"alert_id": "a", "route": "r", "claims": 3}],
        },
    ]
    assert [tier(v) for v in views] == [REST, REGRESSED_OR_ESCALATING, REGRESSED_OR_ESCALATING, ALERT]
    assert [v["issue_id"] for v in sorted(views, key=priority_key)] == ["alert", "esc", "reg", "big"]


def test_the_state_column_of_the_cli_flags_escalation_and_alerts():
    assert _state_cell({"state": "ongoing", "escalating": True, "drives_alerts": [{"alert_id": "a"}]}) == (
        "ongoing\nescalating\nalert"
    )
    assert _state_cell({"state": "new", "escalating": False, "drives_alerts": []}) == "new"


def event(event_id: str, route: str, at: datetime):
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": event_id,
                "trace_id": f"tr-{event_id}",
                "observed_at": at.isoformat(),
                "route": route,
                "query": {"text": f"question {event_id}"},
                "claims": [{"text": f"claim {event_id}", "verdict": "contradicted"}],
            }
        )
    )


# issue -> (route, state, first_seen, [(hours ago, members)]); members sit mid-hour, so "hours ago" is exact
HISTORIES = {
    "iss-alert": ("billing", "ongoing", LONG_AGO - timedelta(days=5), [(0, 4)]),  # small and old
    "iss-escalating": ("search", "new", NOW - timedelta(hours=8), [(0, 30), *((h, 2) for h in range(1, 7))]),
    "iss-regressed": ("hr", REGRESSED, LONG_AGO, [(2, 3)]),
    "iss-big": ("catalog", "ongoing", LONG_AGO, [(h, 4) for h in range(24)]),  # 96 in a day
    "iss-steady": ("catalog", "ongoing", LONG_AGO, [(h, 10) for h in range(7)]),  # 70
    # on the alerting route, but hours before the alert's window: it does not drive the alert
    "iss-billing-earlier": ("billing", "ongoing", LONG_AGO, [(5, 2)]),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    settings = Settings(
        clickhouse=f"chdb:{tmp_path_factory.mktemp('priority') / 'ch'}", api={"token_hashes": [TOKEN_HASH]}
    )
    components = open_components(settings)
    RetentionKeeper(components.store).apply(KEEP_EVERYTHING)  # fixed event times must not age past a TTL
    components.issues.clock = lambda: NOW
    events, members = [], []
    for issue_id, (route, _, _, history) in HISTORIES.items():
        for ago, n in history:
            for k in range(n):
                at = NOW - timedelta(hours=ago, minutes=30, seconds=k)
                e = event(f"{issue_id}-{ago}-{k}", route, at)
                events.append(e)
                members.append(
                    {
                        "claim_key": f"{e.event_id}:0",
                        "issue_id": issue_id,
                        "probability": 0.9,
                        "source": "batch",
                        "config_name": "t@1",
                        "x": 0.0,
                        "y": 0.0,
                        "observed_at": ch_time(at),
                    }
                )
    EventWriter(components.store).write(events, [])
    issues = components.repos.issues
    issues.save(
        [
            IssueRecord(
                issue_id=i,
                name=f"title of {i}",
                keywords=("k",),
                config_name="t@1",
                first_seen=first,
                last_seen=NOW,
                state=state,
                routes={route: 1},
                subtitle=f"k · contradicted · {route}",
            )
            for i, (route, state, first, _) in HISTORIES.items()
        ]
    )
    issues.save_members(members)
    alerts = alert_repository(components.store)
    fired = NOW - timedelta(minutes=10)
    alerts.save(
        Alert(
            alert_id="a-billing",
            route="billing",
            kind="hallucination_rate_rise",
            severity="warning",
            labels={},
            window=30,
            pending_since=fired - timedelta(minutes=2),
            starts_at=fired,
            claims=4,
        )
    )
    alerts.save(
        Alert(
            alert_id="a-catalog-old",
            route="catalog",
            kind="hallucination_rate_rise",
            severity="warning",
            labels={},
            window=30,
            pending_since=NOW - timedelta(hours=3),
            starts_at=NOW - timedelta(hours=3),
            ends_at=NOW - timedelta(hours=2),
        )
    )
    yield components
    components.close()


@pytest.fixture(scope="module")
def client(world):
    return TestClient(create_api(world, ApiPolicy(token_hashes=(TOKEN_HASH,)), now=lambda: NOW))


def test_member_hours_count_event_time_back_from_now(world):
    hours = world.repos.issues.member_hours(NOW - timedelta(hours=24), NOW)
    assert hours["iss-escalating"] == {0: 30, **dict.fromkeys(range(1, 7), 2)}
    assert sum(hours["iss-big"].values()) == 96 and set(hours["iss-big"]) == set(range(24))
    on_billing = world.repos.issues.members_on_route("billing", NOW - timedelta(minutes=40), NOW)
    assert on_billing == {"iss-alert": 4}


def test_default_order_puts_the_alert_driver_first_then_regressed_and_escalating_then_volume(client):
    listed = client.get("/api/issues").json()
    assert [i["issue_id"] for i in listed] == [
        "iss-alert",
        "iss-escalating",
        "iss-regressed",
        "iss-big",
        "iss-steady",
        "iss-billing-earlier",
    ]
    by_id = {i["issue_id"]: i for i in listed}
    # the smallest, oldest issue leads: it is behind the firing alert
    assert by_id["iss-alert"]["drives_alerts"] == [{"alert_id": "a-billing", "route": "billing", "claims": 4}]
    assert by_id["iss-alert"]["count"] < by_id["iss-big"]["count"]
    assert all(not by_id[i]["drives_alerts"] for i in by_id if i != "iss-alert")  # a resolved alert drives nothing
    assert [i for i in by_id if by_id[i]["escalating"]] == ["iss-escalating"]
    assert by_id["iss-big"]["recent_count"] == 96 and by_id["iss-steady"]["recent_count"] == 70
    assert by_id["iss-alert"]["subtitle"] == "k · contradicted · billing"
    # the other sorts are still there
    by_count = [i["issue_id"] for i in client.get("/api/issues", params={"sort": "count"}).json()]
    assert by_count[0] == "iss-big"


def test_the_issues_page_defaults_to_priority_and_flags_escalation_and_alerts(client):
    page = client.get("/issues").text
    assert '<option value="priority" selected>' in page
    rows = page.split("<tbody>", 1)[1]
    assert rows.index("title of iss-alert") < rows.index("title of iss-escalating") < rows.index("title of iss-big")
    assert rows.count('class="badge escalating"') == 1 and "drives alert on billing" in rows
    assert "k · contradicted · search" in rows  # the subtitle under the title
