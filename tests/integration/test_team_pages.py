"""Pages reach the owning team's receiver: a real Alertmanager runs the shipped routing tree
(dashboards/alertmanager/alertmanager.yml, each receiver a webhook into this test), and claimwatch's alerts carry
the team the compose file's [[owners]] rules give their route."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import yaml

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import SLO_KIND
from services.alerts.lifecycle.transitions import severity_for
from services.alerts.notify.payloads import alertmanager_payload
from services.app.compose import owner_rules
from services.app.settings import load_settings
from tests.support.paths import ROOT
from tests.support.peers import Alertmanager
from tests.support.receiver import Receiver

SHIPPED = ROOT / "dashboards/alertmanager/alertmanager.yml"


def shipped_tree_into(receivers: Receiver) -> str:
    """The shipped config with fast grouping, and each receiver a webhook to ``receivers``."""
    config = yaml.safe_load(SHIPPED.read_text())
    config["route"].update(group_wait="1s", group_interval="1s")
    config["receivers"] = [
        {"name": r["name"], "webhook_configs": [{"url": f"{receivers.url}/{r['name']}", "send_resolved": False}]}
        for r in config["receivers"]
    ]
    return yaml.safe_dump(config)


@pytest.fixture()
def receivers():
    with Receiver() as r:
        yield r


def alerts_by_receiver(receivers: Receiver, count: int) -> dict[str, list[dict]]:
    """Receiver name -> the labels of the alerts Alertmanager sent it, once ``count`` alerts arrived in all."""

    def alerts(posts) -> dict[str, list[dict]]:
        got: dict[str, list[dict]] = {}
        for path, _, body in posts:
            got.setdefault(path.strip("/"), []).extend(a["labels"] for a in json.loads(body)["alerts"])
        return got

    return alerts(receivers.wait_until(lambda posts: sum(map(len, alerts(posts).values())) >= count))


def test_a_page_goes_to_the_receiver_of_the_team_that_owns_its_route(tmp_path, receivers):
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    rules = owner_rules(load_settings(environ={"CLAIMWATCH_OWNERS": compose["x-claimwatch-env"]["CLAIMWATCH_OWNERS"]}))
    now = datetime.now(UTC)
    alerts = [
        Alert(
            alert_id=f"a-{route}-{kind}",
            route=route,
            kind=kind,
            severity=severity_for(0.05, 0.02, kind),
            labels={"service": "claimwatch"},
            window=30,
            pending_since=now,
            starts_at=now,
            delta=0.05,
        )
        for route, kind in [
            ("billing-faq", "hallucination_rate_rise"),
            ("search-web", "hallucination_rate_rise"),
            ("hr-policy", "hallucination_rate_rise"),
            ("billing-faq", "mix_shift"),
        ]
    ]
    payloads = [
        alertmanager_payload(a, "http://localhost:8080", now, timedelta(minutes=1), owner=rules.alert_labels(a))
        for a in alerts
    ]
    assert [p["labels"]["team"] for p in payloads] == ["payments", "search", "on-call", "payments"]
    am = Alertmanager(tmp_path / "am")
    am.CONFIG = shipped_tree_into(receivers)
    with am:
        assert httpx.post(am.url + "/api/v2/alerts", json=payloads, timeout=10).status_code == 200
        got = alerts_by_receiver(receivers, len(payloads))
    # each team's pager gets its own route's page; a mix shift is traffic, reviewed in chat whoever owns it
    assert {name: {a["route"] for a in alerts} for name, alerts in got.items()} == {
        "payments-oncall": {"billing-faq"},
        "search-oncall": {"search-web"},
        "on-call": {"hr-policy"},
        "traffic-review": {"billing-faq"},
    }
    assert [a["kind"] for a in got["traffic-review"]] == ["mix_shift"]


def test_an_slo_burn_pages_the_team_that_owns_its_routes_and_its_ticket_goes_to_the_queue(tmp_path, receivers):
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    rules = owner_rules(load_settings(environ={"CLAIMWATCH_OWNERS": compose["x-claimwatch-env"]["CLAIMWATCH_OWNERS"]}))
    now = datetime.now(UTC)
    burns = [
        Alert(
            alert_id=f"a-slo-{severity}",
            route="billing-*",
            kind=SLO_KIND,
            severity=severity,
            labels={"service": "claimwatch", "slo": "billing-faithfulness"},
            window=60,
            pending_since=now,
            starts_at=now,
            rate=rate,
            expected=factor,
            unit="burn",
            details={"slo": "billing-faithfulness", "rule": rule},
        )
        for severity, rate, factor, rule in [
            ("critical", 16.0, 14.4, "page: burn above 14.4x over both 1h and 5m"),
            ("warning", 1.8, 1.0, "ticket: burn above 1x over both 3d and 6h"),
        ]
    ]
    payloads = [
        alertmanager_payload(a, "http://localhost:8080", now, timedelta(minutes=1), owner=rules.alert_labels(a))
        for a in burns
    ]
    am = Alertmanager(tmp_path / "am")
    am.CONFIG = shipped_tree_into(receivers)
    with am:
        # The ticket first (a page on the same routes inhibits it, as the shipped inhibit rule says), then the page.
        for n, payload in enumerate(reversed(payloads), 1):
            assert httpx.post(am.url + "/api/v2/alerts", json=[payload], timeout=10).status_code == 200
            got = alerts_by_receiver(receivers, n)
    assert {name: [(a["alertname"], a["severity"]) for a in alerts] for name, alerts in got.items()} == {
        "payments-oncall": [("ClaimSLOBurn", "critical")],  # the page: billing-* is the payments team's
        "slo-tickets": [("ClaimSLOBurn", "warning")],  # the slow burn: a ticket, never the pager
    }
    page = json.loads(next(body for path, _, body in receivers.posts if path == "/payments-oncall"))["alerts"][0]
    assert page["annotations"]["summary"] == (
        "SLO billing-faithfulness (billing-*): error budget burning 16.0x its pace over 60 min "
        "(page: burn above 14.4x over both 1h and 5m)"
    )
    assert {a["slo"] for alerts in got.values() for a in alerts} == {"billing-faithfulness"}
    assert {a["team"] for alerts in got.values() for a in alerts} == {"payments"}
