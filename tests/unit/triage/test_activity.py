"""Triage through the real API on a real chDB store: every change, note and merge is an activity entry with who and
when (newest first, on `issues show`'s JSON and the runbook's latest notes); changes need a token as every mutation
does, a named token records its holder; refusals are 4xx with a plain sentence; the list filters by owner,
assignee and state, archived included."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_api
from services.api.auth import new_token
from services.api.security import ApiPolicy
from tests.support.triage_world import T0, an_issue, triage_world

TOKEN, TOKEN_HASH = new_token()
NAMED, NAMED_HASH = new_token()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DANA = {"Authorization": f"Bearer {NAMED}"}
OWNERS = [{"route": "billing-*", "team": "payments", "owner": "priya"}]


@pytest.fixture()
def world(tmp_path, store_templates):
    settings = {"owners": OWNERS, "triage": {"default_team": "platform"}}
    with triage_world(tmp_path, store_templates, **settings) as (components, clock):
        an_issue(components, "iss-a")
        an_issue(components, "iss-b", route="hr-policy")
        policy = ApiPolicy(
            token_hashes=(TOKEN_HASH, f"{NAMED_HASH} dana"), mutations_per_minute=6000, mutation_burst=1000
        )
        yield components, clock, TestClient(create_api(components, policy, now=clock))


def post(client, path: str, body: dict, headers=AUTH):
    return client.post(f"/api/issues/{path}", json=body, headers=headers)


@pytest.mark.slow
def test_every_change_note_and_merge_is_in_the_activity_with_who_and_when(world):
    components, clock, client = world
    steps = [
        ("iss-a/assign", {"assignee": "sam", "by": "lee"}),
        ("iss-a/notes", {"text": "rolled back gen-2", "by": "sam"}),
        ("iss-a/link", {"url": "https://tickets.example/PAY-7", "by": "sam"}),
        ("iss-a/archive", {"by": "sam"}),
        ("iss-a/unarchive", {"by": "lee"}),
        ("iss-a/unassign", {"by": "lee"}),
        ("iss-b/merge", {"into": "iss-a"}),
    ]
    for minute, (path, body) in enumerate(steps, 1):
        clock.at(T0 + timedelta(minutes=minute))
        answer = post(client, path, body, headers=DANA if path.endswith("merge") else AUTH)
        assert answer.status_code in (200, 201), (path, answer.text)
    shown = client.get("/api/issues/iss-a").json()
    mine = [(e["event"], e["by"], e["at"]) for e in shown["activity"] if e["at"] > T0.isoformat()]
    assert mine == [
        (event, by, (T0 + timedelta(minutes=m)).isoformat())
        for m, event, by in [
            (7, "absorbed", "dana"),
            (6, "unassigned", "lee"),
            (5, "unarchived", "lee"),
            (4, "archived", "sam"),
            (3, "linked", "sam"),
            (2, "note", "sam"),
            (1, "assigned", "lee"),
        ]
    ]
    assert shown["activity"][-1]["event"] == "created" and shown["activity"][-1]["by"] == "claimwatch"
    assert shown["ticket_url"] == "https://tickets.example/PAY-7" and shown["assignee"] == ""
    assert shown["owner"] == "priya" and shown["team"] == "payments"  # unassigned: its route's owner again
    assert "rolled back gen-2" in client.get("/api/issues/iss-a/runbook").text


@pytest.mark.slow
def test_the_runbook_shows_the_latest_notes_newest_first(world):
    components, clock, client = world
    for n in range(5):
        clock.at(T0 + timedelta(minutes=n))
        post(client, "iss-a/notes", {"text": f"note number {n}", "by": "sam"})
    runbook = client.get("/api/issues/iss-a/runbook").text
    notes = runbook.split("## Latest notes")[1].split("##")[0]
    assert [line.split("sam: ")[1] for line in notes.strip().splitlines()] == [
        "note number 4",
        "note number 3",
        "note number 2",
    ]


def test_changes_need_a_token_and_a_named_token_records_its_holder(world):
    components, clock, client = world
    assert post(client, "iss-a/assign", {"assignee": "sam", "by": "x"}, headers={}).status_code == 401
    assert post(client, "iss-a/assign", {"assignee": "sam"}).status_code == 422  # an unnamed token says who
    assert post(client, "iss-a/assign", {"assignee": "sam", "by": "mallory"}, headers=DANA).status_code == 403
    assert post(client, "iss-a/assign", {"assignee": "sam"}, headers=DANA).status_code == 200
    assert client.get("/api/issues/iss-a").json()["activity"][0]["by"] == "dana"


@pytest.mark.parametrize(
    "path, body, status, says",
    [
        ("iss-a/unassign", {"by": "lee"}, 409, "issue iss-a is not assigned"),
        ("iss-a/unarchive", {"by": "lee"}, 409, "issue iss-a is not archived"),
        ("iss-a/assign", {"assignee": " ", "by": "lee"}, 422, "assignee: must not be blank"),
        (
            "iss-a/link",
            {"url": "ftp://x/1", "by": "lee"},
            422,
            "the ticket link must be an http(s) URL, got 'ftp://x/1'",
        ),
        (
            "iss-a/archive",
            {"claims": 3, "duration": "1h", "by": "lee"},
            422,
            "archive for a duration or until a number of claims, not both",
        ),
        (
            "iss-a/archive",
            {"duration": "soon", "by": "lee"},
            422,
            "duration: duration 'soon': use a number followed by s, m, h or d",
        ),
        ("iss-a/resolve", {"in_next_version": True, "by": "lee"}, 422, "no corpus, model, prompt version is stored"),
        ("iss-zz/notes", {"text": "x", "by": "lee"}, 404, "no issue 'iss-zz'"),
    ],
)
def test_refusals_are_4xx_with_a_plain_sentence(world, path, body, status, says):
    answer = post(world[2], path, body)
    assert answer.status_code == status and answer.json()["detail"].startswith(says), answer.text


def test_the_list_filters_by_owner_assignee_and_state(world):
    components, clock, client = world
    listed = lambda **q: [i["issue_id"] for i in client.get("/api/issues", params=q).json()]  # noqa: E731
    assert listed(owner="payments") == ["iss-a"] and listed(owner="platform") == ["iss-b"]
    post(client, "iss-b/assign", {"assignee": "sam", "by": "lee"})
    assert listed(assignee="sam") == ["iss-b"] and listed(owner="sam") == ["iss-b"]
    post(client, "iss-b/archive", {"by": "lee", "duration": "2h"})
    assert listed() == ["iss-a"] and listed(state="archived") == ["iss-b"] and listed(assignee="sam") == []
    assert client.get("/api/issues", params={"state": "parked"}).status_code == 422
