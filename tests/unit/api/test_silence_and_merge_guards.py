"""Silence matchers that cannot hang or miss, unsilence records who, and merges that cannot hide both issues:
through the real API on a real (empty but for two issues) chDB store."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from clustering.issue import IssueRecord
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.api.app import create_api
from services.api.auth import new_token
from services.api.security import ApiPolicy
from services.app.compose import open_components
from services.app.settings import Settings
from services.issues.records import issue_repository

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
TOKEN, TOKEN_HASH = new_token()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EVIL_ROUTE = "a" * 128  # the route (a|a)*b backtracks on exponentially in Python's re


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    settings = Settings(
        clickhouse=f"chdb:{tmp_path_factory.mktemp('guards') / 'ch'}", api={"token_hashes": [TOKEN_HASH]}
    )
    services = open_components(settings, starting=True)
    alert_repository(services.store).save(
        Alert(
            alert_id="a-evil",
            route=EVIL_ROUTE,
            kind="hallucination_rate_rise",
            severity="warning",
            labels={"service": "claimwatch", "tenant": "acme"},
            window=30,
            pending_since=NOW - timedelta(minutes=5),
            starts_at=NOW - timedelta(minutes=3),
        )
    )
    issues = issue_repository(services.store)
    for issue_id in ("iss-a", "iss-b", "iss-c"):
        issues.save(
            [
                IssueRecord(
                    issue_id=issue_id,
                    name=issue_id,
                    keywords=("x",),
                    config_name="test@1",
                    first_seen=NOW - timedelta(hours=1),
                    last_seen=NOW,
                    size=0,
                    hourly_counts={},
                    routes={},
                    centroid=[1.0, 0.0],
                    exemplar_ids=(),
                )
            ]
        )
    policy = ApiPolicy(token_hashes=(TOKEN_HASH,), mutations_per_minute=6000, mutation_burst=1000)
    yield services, TestClient(create_api(services, policy, now=lambda: NOW))
    services.close()


def silence(client, *matchers: str):
    return client.post(
        "/api/silences",
        json={"matchers": list(matchers), "by": "oncall", "comment": "c", "duration": "1h"},
        headers=AUTH,
    )


@pytest.mark.slow
def test_a_catastrophic_regex_is_decided_in_linear_time(world):
    _, client = world

    def timed_get() -> tuple[float, object]:
        started = time.perf_counter()
        alert = client.get("/api/alerts/a-evil")  # the API matches the alert against every silence
        return time.perf_counter() - started, alert

    before = sorted(timed_get()[0] for _ in range(3))[1]  # the request's own cost, without the pattern
    assert silence(client, "route=~(a|a)*b").status_code == 201
    timed = sorted((timed_get() for _ in range(3)), key=lambda t: t[0])
    elapsed, alert = timed[1]
    assert alert.status_code == 200 and alert.json()["silenced_by"] == []  # anchored: no b, no match
    # a backtracking engine would not finish on this route (2^128 paths); RE2 adds milliseconds. The margin is
    # wide because the suite shares two cores: one request here has taken 0.1 s longer than another
    assert elapsed - before < 1.0, f"matching took {elapsed - before:.3f} s more than the request without it"


def test_regex_is_anchored_and_counted_repetition_survives(world):
    _, client = world
    made = silence(client, "route=~a{1,128}")
    assert made.status_code == 201
    assert made.json()["silence_id"] in client.get("/api/alerts/a-evil").json()["silenced_by"]
    client.request("DELETE", f"/api/silences/{made.json()['silence_id']}", json={"by": "oncall"}, headers=AUTH)


@pytest.mark.parametrize(
    "matcher, says",
    [
        ("route=~(?=a)b", "invalid regex"),  # a lookahead: RE2 refuses it
        ("route=~a{1000}{1000}", "invalid regex"),  # too big for RE2
    ],
)
def test_patterns_re2_refuses_are_422_naming_the_matcher(world, matcher, says):
    response = silence(world[1], matcher)
    assert response.status_code == 422 and says in response.json()["detail"] and matcher in response.json()["detail"]


def test_a_label_no_alert_carries_is_refused_naming_the_known_ones(world):
    response = silence(world[1], "routee=x")
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "matcher 'routee=x': no alert carries the label 'routee'; known labels: kind, route, service, severity, tenant"
    )
    assert silence(world[1], "tenant=acme").status_code == 201  # an extra label a stored alert carries


def test_unsilence_records_who_ended_it(world):
    _, client = world
    sid = silence(client, "route=billing-faq").json()["silence_id"]
    assert client.delete(f"/api/silences/{sid}", headers=AUTH).status_code == 422  # by is required
    ended = client.request("DELETE", f"/api/silences/{sid}", json={"by": "ana"}, headers=AUTH)
    assert ended.status_code == 200 and ended.json()["ended_by"] == "ana"
    listed = {s["silence_id"]: s for s in client.get("/api/silences").json()}
    assert listed[sid]["ended_by"] == "ana" and not listed[sid]["active"]
    assert "ended by ana" in client.get("/alerts").text


def test_a_merge_that_would_hide_both_issues_is_409(world):
    _, client = world
    assert client.post("/api/issues/iss-a/merge", json={"into": "iss-b", "by": "x"}, headers=AUTH).status_code == 200
    back = client.post("/api/issues/iss-b/merge", json={"into": "iss-a", "by": "x"}, headers=AUTH)
    assert back.status_code == 409
    assert back.json()["detail"] == (
        "issue iss-a was itself merged, and its merges lead back to iss-b; merging would make a cycle that hides both"
    )
    onto_merged = client.post("/api/issues/iss-c/merge", json={"into": "iss-a", "by": "x"}, headers=AUTH)
    assert onto_merged.status_code == 409
    assert onto_merged.json()["detail"] == "issue iss-a was merged into iss-b; merge into iss-b instead"
    assert "iss-b" in {i["issue_id"] for i in client.get("/api/issues").json()}  # still visible
