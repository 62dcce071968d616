"""The trace view: `/traces/<id>` (dashboard), `GET /api/traces/<id>` and `claimwatch trace ID`, over the API
test's store (simulated traffic, hostile rows, two issues with members) plus a trace sent twice and a trace id
with reserved URL characters."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import quote, urlsplit

import httpx
import orjson
import pytest
from click.testing import CliRunner

from services.app.cli import main
from services.app.cli.traces import WIDTH
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.store.writer import EventWriter
from tests.support.cli import answer_http_by, answer_http_with
from tests.unit.api.test_api import EVIL_TEXT, START, TOKEN, client_for, world  # noqa: F401  (world is a fixture)

ODD_ID = "tr/odd?#&+ id"  # reserved URL characters a trace id may carry
TWICE = "tr-sent-twice"


def extra_event(event_id: str, trace_id: str, minute: int, answer: str, verdict: str) -> VerdictEvent:
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": event_id,
                "trace_id": trace_id,
                "observed_at": (START + timedelta(minutes=minute)).isoformat(),
                "route": "billing-faq",
                "query": {"text": "When is the refund paid?", "query_type": "lookup"},
                "answer": {"text": answer, "action": "served"},
                "versions": {"model": "gen-x", "prompt": "p-7"},
                "first_failed_stage": "evidence_admission",
                "evidence": [
                    {
                        "chunk_id": "ck-1",
                        "source_id": "refund-policy",
                        "version": "v3",
                        "used": True,
                        "text": "Refunds are paid within 14 days.",
                    }
                ],
                "claims": [
                    {
                        "text": "Refunds are paid in 3 days.",
                        "verdict": verdict,
                        "chunk_id": "ck-1",
                        "span": "paid within 14 days",
                        "score": 0.9,
                    },
                    {"text": "Refunds go to the card.", "verdict": "supported", "chunk_id": "ck-gone"},
                ],
            }
        )
    )


@pytest.fixture(scope="module")
def store(world):  # noqa: F811
    services, events = world
    EventWriter(services.store).write(
        [
            extra_event("ev-odd", ODD_ID, 5, "In 3 days.", "contradicted"),
            extra_event("ev-twice-1", TWICE, 6, "First try.", "unsupported"),
            extra_event("ev-twice-2", TWICE, 7, "Second try.", "supported"),
        ],
        [],
    )
    return services, events


@pytest.fixture(scope="module")
def client(store):
    return client_for(store[0])


def member_trace(store, issue_id: str):
    """A trace with a claim in the issue, and its event as sent."""
    key = store[0].store.query(
        "SELECT claim_key FROM issue_members FINAL WHERE issue_id = {i:String} ORDER BY claim_key LIMIT 1",
        {"i": issue_id},
    )[0]["claim_key"]
    event_id, idx = key.split(":")
    event = next(e for e in store[1] if e.event_id == event_id)
    return event, int(idx)


def test_api_rebuilds_the_whole_event_with_each_claims_evidence_and_its_issues(client, store):
    event, idx = member_trace(store, "iss-numbers")
    body = client.get(f"/api/traces/{quote(event.trace_id, safe='')}").json()
    assert (body["trace_id"], body["event_id"], body["route"]) == (event.trace_id, event.event_id, event.route)
    assert (body["question"], body["answer"], body["action"]) == (
        event.query.text,
        event.answer.text,
        event.answer.action,
    )
    assert body["versions"] == event.versions and body["first_failed_stage"] == event.first_failed_stage
    assert [c["verdict"] for c in body["claims"]] == [c.verdict for c in event.claims]
    evidence = {e.chunk_id: e for e in event.evidence}
    for got, sent in zip(body["claims"], event.claims):
        assert (got["text"], got["span"], got["chunk_id"]) == (sent.text or "", sent.span, sent.chunk_id)
        assert got["failed"] == sent.failed
        if sent.chunk_id in evidence:
            assert got["chunk"]["text"] == evidence[sent.chunk_id].text
    assert body["claims"][idx]["issue_ids"] == ["iss-numbers"]
    assert body["issues"][0]["issue_id"] == "iss-numbers" and body["issues"][0]["name"] == "Invented refund numbers"
    assert [e["chunk_id"] for e in body["evidence"]] == [e.chunk_id for e in event.evidence]


def test_a_trace_sent_twice_shows_the_newest_answer_and_lists_the_earlier(client):
    body = client.get(f"/api/traces/{TWICE}").json()
    assert body["answer"] == "Second try." and [e["answer"] for e in body["earlier"]] == ["First try."]
    page = client.get(f"/traces/{TWICE}").text
    assert "Newest answer" in page and "Earlier answer" in page and "First try." in page


def test_claims_chunks_are_the_events_and_a_missing_chunk_says_so(client):
    body = client.get(f"/api/traces/{quote(ODD_ID, safe='')}").json()
    assert body["trace_id"] == ODD_ID
    first, second = body["claims"]
    assert first["chunk"] == {
        "chunk_id": "ck-1",
        "source_id": "refund-policy",
        "version": "v3",
        "used": True,
        "text": "Refunds are paid within 14 days.",
    }
    assert (first["verdict"], first["span"], first["score"]) == ("contradicted", "paid within 14 days", 0.9)
    assert second["chunk_id"] == "ck-gone" and second["chunk"] is None
    page = html.unescape(client.get(f"/traces/{quote(ODD_ID, safe='')}").text)
    assert "not among the event's retrieved chunks" in page and "None of this trace's claims" in page


def test_page_shows_question_answer_claims_versions_stage_and_issue_links(client, store):
    event, _ = member_trace(store, "iss-numbers")
    response = client.get(f"/traces/{quote(event.trace_id, safe='')}")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = html.unescape(response.text)
    for text in [event.query.text, event.answer.text, *event.versions.values(), event.first_failed_stage]:
        assert text in page
    for claim in event.claims:
        assert claim.text in page and claim.verdict in page
        if claim.span:
            assert claim.span in page
    assert 'href="/issues/iss-numbers"' in response.text
    assert f'href="/routes/{event.route}"' in response.text


def test_the_query_row_names_each_of_its_three_facts(client):
    """The query type and the answerable flag are separate facts: an "unanswerable" type beside a false flag
    read "unanswerable · stakes low · unanswerable" before each was named."""
    page = html.unescape(client.get(f"/traces/{quote(ODD_ID, safe='')}").text)
    assert "type lookup · stakes not reported · answerable: unknown" in page


def test_hostile_text_on_the_trace_page_is_inert(client):
    response = client.get("/traces/tr-evil-0")
    assert response.status_code == 200
    assert '<script>alert("claim")' not in response.text and "&lt;script&gt;" in response.text
    assert "{{ 7*7 }}" in html.unescape(response.text) and 'href="/issues/iss-evil"' in response.text


def test_unknown_trace_is_404_with_what_to_do(client):
    api = client.get("/api/traces/tr-nope")
    assert api.status_code == 404 and "no trace 'tr-nope' is stored" in api.json()["detail"]
    assert "claimwatch issues show" in api.json()["detail"]
    page = client.get("/traces/tr-nope")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert (
        re.search(r'<link rel="stylesheet" href="/static/app.css\?v=\w+">', page.text)
        and "aged out of the store" in page.text
    )


def test_openapi_documents_the_trace_endpoint(client):
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/traces/{trace_id}"]["get"]
    assert op["tags"] == ["traces"] and "404" in op["responses"]
    assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/TraceView")
    fields = spec["components"]["schemas"]["TraceView"]["properties"]
    assert {"question", "answer", "claims", "versions", "first_failed_stage", "issues", "evidence"} <= set(fields)


def test_reads_of_a_trace_need_the_token_when_reads_are_protected(store):
    client = client_for(store[0], protect_reads=True)
    assert client.get("/api/traces/tr-evil-0").status_code == 401
    assert client.get("/api/traces/tr-nope").status_code == 401  # no existence leak either
    page = client.get("/traces/tr-nope", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/signin?next=/traces/tr-nope"
    assert client.get("/api/traces/tr-evil-0", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


@pytest.mark.slow
def test_every_runbook_trace_link_answers_200_with_that_trace(client):
    for issue_id in ("iss-numbers", "iss-evil"):
        markdown = client.get(f"/api/issues/{issue_id}/runbook", params={"format": "md"}).text
        page = client.get(f"/issues/{issue_id}").text
        links = re.findall(r"\(<?(http://testserver/traces/[^)>\s]+)>?\)", markdown)
        assert links, f"the {issue_id} runbook links no trace"
        assert {urlsplit(u).path for u in links} <= set(re.findall(r'href="http://testserver(/traces/[^"]+)"', page))
        for url in links:
            response = client.get(url)
            assert response.status_code == 200, url
            path = urlsplit(url).path
            assert client.get("/api" + path).json()["issues"][0]["issue_id"] == issue_id


def test_issue_exemplars_link_their_traces(client):
    page = client.get("/issues/iss-numbers").text
    traces = re.findall(r'href="(/traces/[^"]+)"', page)
    assert traces and all(client.get(t).status_code == 200 for t in set(traces))


# -- the CLI ----------------------------------------------------------------------
@pytest.fixture
def cli(client, monkeypatch):
    """`claimwatch` whose HTTP calls reach the in-process API."""
    api = answer_http_with(client, monkeypatch, TOKEN)
    return lambda *args: CliRunner().invoke(main, [*args, "--api", "http://testserver"], obj=api)


def test_cli_prints_the_trace_in_80_columns(cli, store):
    event, idx = member_trace(store, "iss-numbers")
    result = cli("trace", event.trace_id)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    flat = " ".join(line.strip() for line in lines)
    for text in [event.query.text, event.first_failed_stage, *(f"{k}={v}" for k, v in event.versions.items())]:
        assert text in flat
    assert f"[{event.claims[idx].verdict}" in flat and "iss-numbers: Invented refund numbers" in flat
    assert "claimwatch issues show iss-numbers" in flat
    odd = " ".join(line.strip() for line in cli("trace", ODD_ID).output.splitlines())
    assert 'span: "paid within 14 days"' in odd and "chunk: ck-1 · refund-policy · version v3 · used" in odd


def test_cli_json_is_the_apis(cli, client):
    result = cli("trace", "tr-evil-1", "--json")
    assert result.exit_code == 0 and orjson.loads(result.output) == client.get("/api/traces/tr-evil-1").json()


def test_cli_strips_terminal_control_sequences_from_trace_text(cli):
    from services.app.cli.traces import trace_text

    data = {
        "trace_id": "t",
        "event_id": "e",
        "route": "r",
        "observed_at": "2026-11-21T08:00:00+00:00",
        "question": "hi\x1b]0;pwned\x07 there",
        "answer": "\x1b[2Jok",
        "versions": {},
        "claims": [],
        "issues": [],
        "claim_count": 0,
        "failed_claims": 0,
        "claims_from": 0,
        "claims_page": 1,
        "claims_pages": 1,
    }
    text = trace_text(data)
    assert "\x1b" not in text and "\x07" not in text and "hi]0;pwned there" in text


def test_cli_unknown_trace_exits_1_with_the_message(cli):
    result = cli("trace", "tr-nope")
    assert result.exit_code == 1 and "HTTP 404" in result.output and "no trace 'tr-nope' is stored" in result.output


@pytest.mark.slow
def test_cli_reads_the_store_when_no_api_answers(store, monkeypatch):
    import services.app.compose as compose

    class Borrowed:  # the test's components, not closed by the command
        def __getattr__(self, name):
            return getattr(store[0], name)

        def close(self):
            pass

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    api = answer_http_by(refuse)
    monkeypatch.setattr(compose, "open_components", lambda settings, **how: Borrowed())
    result = CliRunner().invoke(main, ["trace", TWICE, "--json", "--api", "http://127.0.0.1:9"], obj=api)
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["answer"] == "Second try."  # (stderr says it read the store)
    missing = CliRunner().invoke(main, ["trace", "tr-nope", "--api", "http://127.0.0.1:9"], obj=api)
    assert missing.exit_code == 1 and "no trace 'tr-nope' is stored" in missing.output


def test_a_missing_eval_items_message_names_a_command_that_exists(client):
    detail = client.get("/api/promotions/e-nope").json()["detail"]
    command = re.search(r"`claimwatch ([^`]+)`", detail).group(1).split()
    assert command == ["evalset", "items"]
    assert CliRunner().invoke(main, [*command, "--help"]).exit_code == 0
