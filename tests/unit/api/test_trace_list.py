"""The traces list (issue 53): `claimwatch traces` finds a claim by its text and agrees with `GET /api/traces`, pages
with the next page's command, and the `/traces` page shows the same traces with its filter applied. Over the API
test's store (simulated traffic and hostile rows) plus two answers with a claim no simulated answer makes."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import quote

import orjson
import pytest
from markupsafe import escape

from services.app.cli.tables import ago
from services.contract.decode import Decoder
from services.contract.model import FAILED_VERDICTS, VerdictEvent
from services.core.clock import utcnow
from services.store.writer import EventWriter
from tests.support.cli import cli_at
from tests.unit.api.test_api import EVIL_TEXT, NOW, START, TOKEN, client_for, world  # noqa: F401  (world is a fixture)

WIDTH = 100
NEEDLE = "Water Damage"
WANTED = "The warranty covers water damage for 7 years."


def warranty(event_id: str, trace_id: str, minute: int, verdict: str) -> VerdictEvent:
    decoded = Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": event_id,
                "trace_id": trace_id,
                "observed_at": (START + timedelta(minutes=minute)).isoformat(),
                "route": "billing-faq",
                "query": {"text": "Does the warranty cover water?"},
                "answer": {"text": "Yes, for 7 years.", "action": "served"},
                "versions": {"model": "gen-2026-11", "prompt": "p-7"},
                "claims": [
                    {"text": WANTED, "verdict": verdict},
                    {"text": "Claims go through the shop.", "verdict": "supported"},
                ],
            }
        )
    )
    assert isinstance(decoded, VerdictEvent), decoded
    return decoded


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    EventWriter(world[0].store).write(
        [
            warranty("ev-warranty-1", "tr-warranty-1", 11, "unsupported"),
            warranty("ev-warranty-2", "tr-warranty-2", 12, "supported"),
        ]
    )
    return client_for(world[0])


@pytest.fixture
def cli(client, monkeypatch):
    return cli_at(client, monkeypatch, TOKEN, WIDTH)


def listed(client, **params):
    response = client.get("/api/traces", params=params)
    assert response.status_code == 200, response.text
    return response.json(), int(response.headers["X-Total-Count"])


def words(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def test_claimwatch_traces_finds_a_claim_by_text_as_the_api_does(cli, client):
    api, total = listed(client, text=NEEDLE)
    assert total == 2 and [t["trace_id"] for t in api] == ["tr-warranty-2", "tr-warranty-1"]
    assert api[1]["claim"] == {"claim_key": "ev-warranty-1:0", "text": WANTED, "verdict": "unsupported", "failed": True}
    assert (api[1]["claims"], api[1]["failed"], api[1]["verdicts"], api[1]["events"]) == (1, 1, ["unsupported"], 1)
    assert api[1]["first_observed_at"] == "2026-11-21T08:11:00Z" and api[1]["route"] == "billing-faq"
    lines = cli("traces", "--text", NEEDLE).splitlines()
    assert lines[0] == f"Traces in the 24 h before now with a claim containing {NEEDLE!r}, newest first"
    assert lines[1].split() == ["TRACE", "ROUTE", "FIRST", "SEEN", "CLAIMS", "FAILED", "VERDICTS", "CLAIM"]  # 100 wide
    seen = ago("2026-11-21T08:11:00Z", utcnow())  # relative to the clock, as `alerts list` shows SINCE
    assert re.fullmatch(
        rf"tr-warranty-2 +billing-faq +{seen} +1 +0 +supported +\[supported\] The warranty .*", lines[2]
    )
    assert re.fullmatch(
        rf"tr-warranty-1 +billing-faq +{seen} +1 +1 +unsupported +\[unsupported\] The warranty", lines[4]
    ), lines
    column = lines[1].rindex("CLAIM")  # the claim wraps beside its row
    assert " ".join(line[column:] for line in lines[4:7]) == f"[unsupported] {WANTED}"
    wide = cli("traces", "--text", NEEDLE, "-o", "wide").splitlines()
    assert wide[1].split()[4:7] == ["EVENTS", "CLAIMS", "FAILED"] and wide[3].endswith(f"[unsupported] {WANTED}")
    assert all(len(line) <= WIDTH for line in lines) and "more, the next" not in " ".join(lines)  # one page
    assert orjson.loads(cli("traces", "--text", NEEDLE, "-o", "json")) == api
    one, _ = listed(client, text=NEEDLE, verdict="failed", version="model=gen-2026-11")
    assert [t["trace_id"] for t in one] == ["tr-warranty-1"]
    assert (
        orjson.loads(
            cli("traces", "--text", "water", "--verdict", "failed", "--version", "model=gen-2026-11", "--json")
        )
        == one
    )
    assert cli("traces", "--text", NEEDLE, "--until", "2026-11-21T08:11:30Z", "--json").count("tr-warranty") == 1
    # the one trace the list names is the one trace whole
    assert client.get(f"/api/traces/{quote('tr-warranty-1', safe='')}").json()["claims"][0]["text"] == WANTED


def test_pages_of_the_list_agree_and_the_last_line_is_the_next_pages_command(cli, client):
    first, total = listed(client, route="billing-faq", limit=7)
    second, _ = listed(client, route="billing-faq", limit=7, offset=7)
    assert total > 14 and len(first) == len(second) == 7
    assert {t["trace_id"] for t in first}.isdisjoint(t["trace_id"] for t in second)
    stamps = [t["first_observed_at"] for t in first + second]
    assert stamps == sorted(stamps, reverse=True)
    for t in first + second:  # the claim shown is a failed one whenever one failed
        assert t["route"] == "billing-faq" and (t["failed"] > 0) == (t["claim"]["verdict"] in FAILED_VERDICTS), t
    lines = cli("traces", "--route", "billing-faq", "--limit", "7").splitlines()
    assert [line.split()[0] for line in lines[2:] if line.startswith("tr-")] == [t["trace_id"] for t in first]
    assert re.fullmatch(
        rf"traces 1–7 of {total:,} traces; {total - 7:,} more, the next 7: \S*claimwatch traces --route billing-faq "
        "--limit 7 --offset 7 --api http://testserver",
        lines[-1],
    ), lines[-1]
    after = cli("traces", "--route", "billing-faq", "--limit", "7", "--offset", "7").splitlines()
    assert [line.split()[0] for line in after if line.startswith("tr-")] == [t["trace_id"] for t in second]
    link = client.get("/api/traces", params={"route": "billing-faq", "limit": 7}).headers["Link"]
    assert 'offset=7>; rel="next"' in link


@pytest.mark.parametrize(
    "params, said",
    [
        ({"verdict": "bogus"}, "unknown verdict 'bogus': use one of supported, unsupported, contradicted,"),
        ({"since": "40d"}, "the time range from since to until is 40.0 days; traces are searched over at most 31 days"),
        ({"since": "last week"}, "since 'last week' is not a time: give a length back from now (30m, 6h, 7d)"),
        ({"since": "2026-11-21T08:00:00"}, "is not a time"),
        ({"version": "model"}, "version 'model': give key=value, e.g. model=gen-2026-11"),
        ({"limit": 101}, "limit"),
    ],
)
def test_bad_filters_get_a_422_with_a_plain_sentence(client, params, said):
    response = client.get("/api/traces", params=params)
    assert response.status_code == 422 and said in response.json()["detail"], response.text


def test_the_traces_page_applies_its_filter_and_links_each_trace(client):
    page = client.get("/traces", params={"text": NEEDLE}).text
    rows = re.findall(r"<tr>\s*<th scope=\"row\".*?</tr>", page, re.S)
    assert [re.search(r'href="/traces/([^"]+)"', r)[1] for r in rows] == ["tr-warranty-2", "tr-warranty-1"]
    assert words(rows[1]).startswith("tr-warranty-1 billing-faq 2026-11-21 08:11 UTC 1 1 1 unsupported unsupported")
    assert WANTED in words(rows[1]) and f'value="{NEEDLE}"' in page and 'aria-current="page">Traces' in page
    assert "traces 1–2 of 2" in words(page) and 'rel="next"' not in page
    paged = client.get("/traces", params={"route": "billing-faq", "limit": 5, "offset": 5}).text
    assert 'rel="prev" href' not in paged  # (the attribute order the template writes)
    assert '<a href="?route=billing-faq&amp;limit=5" rel="prev">' in paged
    assert '<a href="?route=billing-faq&amp;limit=5&amp;offset=10" rel="next">' in paged
    assert "traces 6–10 of" in words(paged)


def test_the_page_says_a_bad_filter_above_the_form_and_shows_hostile_text_inertly(client):
    bad = client.get("/traces", params={"since": "40d", "text": "refund"})
    assert bad.status_code == 422 and "at most 31 days" in words(bad.text) and 'value="refund"' in bad.text
    hostile = client.get("/traces", params={"text": "DROP TABLE"}).text
    assert "<script>alert" not in hostile and str(escape(EVIL_TEXT)) in hostile
    assert "tr-evil-0" in hostile
