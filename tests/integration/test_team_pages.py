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
