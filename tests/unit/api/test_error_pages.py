"""Every error answered to a page request is the styled error page, with its status and one plain sentence; the same
error on an API path stays ``Problem`` JSON. Through the real app over the API test's store; a page and an API route
added here raise what a handler could (a clash, a store outage, a bug)."""

from __future__ import annotations

import html
import re
from http import HTTPStatus

import pytest
from fastapi.testclient import TestClient

from services.core.errors import Conflict, StoreError
from tests.unit.api.test_api import client_for, world  # noqa: F401  (world is a fixture)

RAISED = {
    "clash": Conflict("the issue was merged meanwhile"),
    "store": StoreError("connection refused"),
    "bug": RuntimeError("a bug with internals: {'loc': ['query']}"),
}
DUMP = ("'loc'", '"loc"', "'input'", "'type'", "{", "[", "Traceback")


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    api = client_for(world[0]).app
    for path in ("/failing/{what}", "/api/failing/{what}"):

        @api.get(path)
        def fail(what: str):
            raise RAISED[what]

    return TestClient(api, raise_server_exceptions=False)  # a 500 is answered, as a server would answer it


def styled_page(response, status: int) -> str:
    """The error page's sentence, once the answer is checked to be that page."""
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert re.search(r'<link rel="stylesheet" href="/static/app.css\?v=\w+">', response.text)
    assert f"<h1>{status} {HTTPStatus(status).phrase}</h1>" in response.text
    message = html.unescape(re.search(r"<p>(.*?)</p>\s*<p><a href=\"/\">Back to the overview", response.text, re.S)[1])
    assert len(message.splitlines()) == 1 and not any(piece in message for piece in DUMP), message
    return message


def problem(response, status: int) -> dict:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    return response.json()


def test_bad_query_parameters(client):
    message = styled_page(client.get("/issues", params={"q": "x" * 201}), 422)
    assert message == "q: string should have at most 200 characters"
    assert problem(client.get("/api/issues", params={"q": "x" * 201}), 422) == {"detail": message, "field": "query.q"}


def test_method_not_allowed(client):
    response = client.post("/issues")
    assert styled_page(response, 405) == "Method Not Allowed" and response.headers["allow"] == "GET"
    assert problem(client.post("/api/issues"), 405) == {"detail": "Method Not Allowed"}


def test_unknown_path(client):
    assert styled_page(client.get("/no/such/page"), 404) == "Not Found"
    assert problem(client.get("/api/no/such"), 404) == {"detail": "Not Found"}


@pytest.mark.parametrize(
    "what, status, sentence",
    [
        ("clash", 409, "the issue was merged meanwhile"),
        ("store", 503, "store unavailable: connection refused"),
        ("bug", 500, "Something went wrong on the server; its log has the details."),
    ],
)
def test_errors_raised_by_a_handler(client, what, status, sentence):
    assert styled_page(client.get(f"/failing/{what}"), status) == sentence
    assert problem(client.get(f"/api/failing/{what}"), status) == {"detail": sentence}


def test_oversize_body(client):
    response = client.post(
        "/signin", content=b"x" * 70_000, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert "api.max_body_bytes" in styled_page(response, 413)
    assert "api.max_body_bytes" in problem(client.post("/api/silences", content=b"x" * 70_000), 413)["detail"]


def test_rate_limited_reads_keep_retry_after(world):  # noqa: F811
    client = client_for(world[0], anonymous_reads_per_minute=2)  # two reads, then one every 30 s
    assert client.get("/issues").status_code == client.get("/issues").status_code == 200
    limited = client.get("/issues")
    assert "try again in" in styled_page(limited, 429) and int(limited.headers["retry-after"]) > 0
    api = client.get("/api/issues")
    assert "try again in" in problem(api, 429)["detail"] and int(api.headers["retry-after"]) > 0
