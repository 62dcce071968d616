"""`claimwatch mcp` driven by the MCP SDK's own client, over stdio and over streamable HTTP, against a real API
(uvicorn, as `claimwatch api` serves it) on the API tests' store: it lists its tools, reads a firing alert and its
runbook with the API's own figures, and records an ack under the named token's holder, refusing one without a
token."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace

import anyio
import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from services.alerts.lifecycle.records import alert_repository
from services.api.auth import new_token
from services.app.broker import free_port
from services.core.numbers import pts
from services.store.evalset import EvalRepository
from tests.support.serving import serving
from tests.unit.api.test_api import START, TOKEN_HASH, client_for, world  # noqa: F401  (world is a fixture)
from tests.unit.evalset.test_eval_compare_surfaces import lay_down_runs

ALICE, ALICE_HASH = new_token()
TOOLS = {
    "list_alerts", "show_alert", "list_issues", "show_issue", "runbook", "rates", "explain_route",
    "ack_alert", "silence", "assign_issue", "note_issue", "propose_traces", "search_traces", "eval_compare",
    "slo_status",
}  # fmt: skip


@pytest.fixture(scope="module")
def api(world) -> Iterator[tuple[str, httpx.Client]]:  # noqa: F811
    """The API over the world's store at a real port, and a client of it (as the token's holder alice). One more
    alert, a-numbers, has a window from the start, so an issue (iss-numbers) accounts for its rise."""
    alerts = alert_repository(world[0].store)
    billing = alerts.get("a-billing")
    alerts.save(replace(billing, alert_id="a-numbers", pending_since=START, starts_at=START, onset=START))
    lay_down_runs(EvalRepository(world[0].store))
    client = client_for(world[0], token_hashes=(TOKEN_HASH, f"{ALICE_HASH} alice"))
    with serving(client.app) as port:
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ALICE}"}) as http:
            yield url, http


def environment(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMWATCH_")}
    return {**keep, "XDG_CONFIG_HOME": "/nonexistent", **extra}


def stdio(url: str, token: str | None) -> Client:
    command = [sys.executable, "-m", "services.app.cli", "mcp", "--api", url]
    env = environment(**({"CLAIMWATCH_TOKEN": token} if token else {}))
    return Client(StdioServerParameters(command=command[0], args=command[1:], env=env))


async def read_a_firing_alert(session: Client, http: httpx.Client) -> None:
    tools = {t.name for t in (await session.list_tools()).tools}
    assert TOOLS <= tools, TOOLS - tools
    listed = await session.call_tool("list_alerts", {"state": "active"})
    assert not listed.is_error, listed.content
    assert all(a["state"] in ("pending", "firing") for a in listed.structured_content["items"])
    billing = next(a for a in listed.structured_content["items"] if a["alert_id"] == "a-numbers")
    assert billing["state"] == "firing"
    shown = await session.call_tool("show_alert", {"alert_id": billing["alert_id"]})
    expected = http.get(f"/api/alerts/{billing['alert_id']}").json()
    for figure in ("rate", "expected", "delta", "rate_interval", "claims", "suspect_changes", "explanation"):
        assert shown.structured_content[figure] == expected[figure], figure
    assert f"{100 * expected['rate']:.1f}%" in shown.content[0].text  # the line the CLI prints, quotable
    rates = await session.call_tool("rates", {"window": "all"})
    billing_rate = next(r for r in rates.structured_content["items"] if r["route"] == "billing-faq")
    assert billing_rate == next(r for r in http.get("/api/rates", params={"window": "all"}).json() if r == billing_rate)
    assert f"{100 * billing_rate['rate']:.1f}%" in rates.content[0].text  # `claimwatch rates`' own columns
    route = await session.call_tool("explain_route", {"route": "billing-faq", "window": "24h"})
    assert not route.is_error, route.content
    assert route.structured_content == http.get("/api/routes/billing-faq", params={"window": "24h"}).json()
    assert "a-numbers" in route.content[0].text
    runbook = await session.call_tool("runbook", {"alert_id": billing["alert_id"]})
    assert not runbook.is_error, runbook.content
    top = expected["explanation"]["issues"][0]["issue_id"]
    assert runbook.content[0].text == http.get(f"/api/issues/{top}/runbook", params={"alert": "a-numbers"}).text
    search = {"text": "REFUND", "verdict": ["failed"], "limit": 5}
    traces = await session.call_tool("search_traces", search)
    assert not traces.is_error, traces.content
    page = http.get("/api/traces", params=search)
    assert traces.structured_content["items"] == page.json() != []
    assert traces.structured_content["total"] == int(page.headers["x-total-count"])
    assert traces.content[0].text.split()[0] == "TRACE"  # the table `claimwatch traces` prints
    assert traces.content[0].text.endswith(f"of {int(page.headers['x-total-count']):,}")
    compared = await session.call_tool("eval_compare", {"baseline": "model=gen-2026-10", "candidate": "r-11"})
    assert not compared.is_error, compared.content
    expected_compare = http.get("/api/eval/compare", params={"baseline": "model=gen-2026-10", "candidate": "r-11"})
    assert compared.structured_content == expected_compare.json()
    faithfulness = next(m for m in expected_compare.json()["metrics"] if m["metric"] == "faithfulness")
    assert pts(faithfulness["difference"]) in compared.content[0].text  # the figure `eval compare` prints
    slos = await session.call_tool("slo_status", {})
    assert (
        slos.structured_content == {"items": http.get("/api/slos").json()} and "no SLOs are set" in slos.content[0].text
    )
    unknown = await session.call_tool("slo_status", {"name": "billing"})
    assert unknown.is_error and "no SLO named 'billing'" in unknown.content[0].text
    resources = {str(r.uri): r for r in (await session.list_resources()).resources}
    open_alerts = http.get("/api/alerts", params={"state": "active"}).json()
    assert {f"claimwatch://alerts/{a['alert_id']}/runbook" for a in open_alerts} <= set(resources)
    read = await session.read_resource("claimwatch://alerts/a-numbers/runbook")
    assert read.contents[0].text == runbook.content[0].text


def test_over_stdio_an_assistant_reads_a_firing_alert_and_acks_it_as_the_tokens_holder(api):
    url, http = api

    async def drive() -> None:
        async with stdio(url, ALICE) as session:
            await read_a_firing_alert(session, http)
            acked = await session.call_tool("ack_alert", {"alert_id": "a-billing", "note": "rolling back gen-2026-11"})
            assert not acked.is_error, acked.content
            assert acked.structured_content["acked_by"] == "alice"
        async with stdio(url, None) as anonymous:
            refused = await anonymous.call_tool("ack_alert", {"alert_id": "a-html", "note": "x"})
            assert refused.is_error and "token" in refused.content[0].text and "401" in refused.content[0].text

    anyio.run(drive)
    assert http.get("/api/alerts/a-billing").json()["ack_note"] == "rolling back gen-2026-11"
    assert http.get("/api/alerts/a-html").json()["acked_by"] is None


def test_over_http_each_call_carries_the_callers_token_and_none_is_lent(api):
    url, http = api
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "services.app.cli", "mcp", "--transport", "http", "--port", str(port), "--api", url],
        env=environment(CLAIMWATCH_TOKEN=ALICE),  # the server's own user's token: never lent to HTTP callers
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()  # it says where it listens once it is about to serve
        assert f"http://127.0.0.1:{port}/mcp" in line, line

        async def drive() -> None:
            endpoint = f"http://127.0.0.1:{port}/mcp"
            with anyio.fail_after(60):
                while True:  # the port accepts shortly after the line
                    try:
                        httpx.get(endpoint, timeout=1)
                        break
                    except httpx.TransportError:
                        await anyio.sleep(0.1)
            authorised = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=30)
            async with Client(streamable_http_client(endpoint, http_client=authorised)) as session:
                await read_a_firing_alert(session, http)
                acked = await session.call_tool("ack_alert", {"alert_id": "a-html", "note": "looking"})
                assert acked.structured_content["acked_by"] == "alice"
            async with Client(endpoint) as anonymous:
                refused = await anonymous.call_tool("ack_alert", {"alert_id": "a-html", "note": "intruder"})
                assert refused.is_error and "401" in refused.content[0].text

        anyio.run(drive)
    finally:
        server.terminate()
        server.wait(10)
    assert http.get("/api/alerts/a-html").json()["ack_note"] == "looking"
