"""Absolute links come from configuration (notify.external_url), never from the request's Host header, which any
client can forge (issue 23, H6). Over the API test's store, with an input-health alert whose runbook links back."""

from __future__ import annotations

import pytest

from services.alerts.lifecycle.records import alert_repository
from services.app.compose import build
from services.app.settings import Settings
from tests.unit.api.test_api import client_for, world  # noqa: F401  (world is a fixture)
from tests.unit.api.test_input_alerts import SILENT

CONFIGURED = "https://claimwatch.example"
FORGED = {"Host": "evil.example"}


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    services = world[0]
    alert_repository(services.store).save(SILENT)
    settings = Settings.model_validate({**services.settings.model_dump(), "notify": {"external_url": CONFIGURED}})
    return client_for(build(settings, services.store))


def only_configured_links(text: str) -> None:
    assert "evil.example" not in text
    assert CONFIGURED + "/" in text


@pytest.mark.slow
def test_issue_runbook_links_ignore_the_host_header(client):
    response = client.get("/api/issues/iss-numbers/runbook", headers=FORGED)
    assert response.status_code == 200
    only_configured_links(response.text)
    assert f"{CONFIGURED}/issues/iss-numbers" in response.text


def test_issue_page_links_ignore_the_host_header(client):
    response = client.get("/issues/iss-numbers", headers=FORGED)
    assert response.status_code == 200
    only_configured_links(response.text)


def test_alert_runbook_links_ignore_the_host_header(client):
    shown = client.get(f"/api/alerts/{SILENT.alert_id}", headers=FORGED)
    assert shown.status_code == 200
    only_configured_links(shown.json()["runbook"])
    assert f"{CONFIGURED}/alerts/{SILENT.alert_id}" in shown.json()["runbook"]
    page = client.get("/alerts", headers=FORGED)
    assert page.status_code == 200
    only_configured_links(page.text)
