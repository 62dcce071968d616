"""The alert list filtered by state, kind, route and team, and the preview of a silence, on every surface: the API
(GET /api/alerts, POST /api/silences/preview), the CLI (`alerts list --state/--kind/--team/--route`,
`alerts silence --preview`), the alerts page (state links, a GET form, counts, the silence form's Preview) and the
MCP tools (list_alerts, silence with preview); and the route page's range links, which change the chart's window
and every figure beside it.

On the API test's store (real chDB, simulated traffic) with [[owners]] rules (billing-* to payments, hr-* to
people) and six more alerts: a pending silent route, a resolved rejected-events alert, a mix shift that cleared
without firing, an agreement alert, one recorded as firing whose firing time is still ahead of now (so pending
now), and a regression resolved a day before the others."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import quote

import anyio
import httpx
import orjson
import pytest
from click.testing import CliRunner
from mcp.client.client import Client

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import AGREEMENT_KIND, DRIFT_KIND, MIX_KIND, REJECTED_KIND, SILENT_KIND
from services.alerts.lifecycle.records import alert_repository
from services.alerts.oncall.rules import RULE_KINDS
from services.app.assistant import ApiGateway, build_server
from services.app.compose import build
from services.app.sections import OwnerRuleSettings
from services.store.convert import ch_time
from tests.support.cli import answer_http_with, cli_at
from tests.unit.api.test_api import AUTH, NOW, START, TOKEN, client_for, world  # noqa: F401  (world is a fixture)

WIDTH = 160  # every column of the list, so rows can be read by id
OWNERS = [OwnerRuleSettings(team="payments", route="billing-*"), OwnerRuleSettings(team="people", route="hr-*")]


def alert(alert_id: str, route: str, kind: str, minutes: int, fired: int | None, ended: int | None, **extra) -> Alert:
    at = lambda m: None if m is None else START + timedelta(minutes=m)  # noqa: E731
    return Alert(
        alert_id=alert_id,
        route=route,
        kind=kind,
        severity=extra.pop("severity", "warning"),
        labels={"service": "claimwatch"},
        window=30,
        pending_since=at(minutes),
        starts_at=at(fired),
        ends_at=at(ended),
        rate=0.1,
        baseline=0.05,
        delta=0.05,
        claims=100,
        **extra,
    )


ADDED = (
    alert("a-silent-hr", "hr-policy", SILENT_KIND, 40, None, None, severity="critical", unit="per_minute"),
    alert("a-rejected-parcel", "parcel-status", REJECTED_KIND, 5, 7, 15, severity="critical"),
    alert("a-mix-billing", "billing-faq", MIX_KIND, 10, None, 12),  # cleared: ended without firing
    alert("a-agreement-legal", "legal-terms", AGREEMENT_KIND, 2, 4, None),
    alert("a-later-legal", "legal-terms", DRIFT_KIND, 44, 50, None),  # recorded firing, but at 08:50: pending at 08:45
    alert("a-old-billing", "billing-faq", DRIFT_KIND, -30 * 60, -30 * 60 + 5, -29 * 60),  # before a 24 h range
)
# the world's own two (firing regressions) and these, by state now
FIRING = {"a-billing", "a-html", "a-agreement-legal"}
PENDING = {"a-silent-hr", "a-later-legal"}
RESOLVED = {"a-rejected-parcel", "a-mix-billing", "a-old-billing"}
BILLING = {"a-billing", "a-mix-billing", "a-old-billing"}
TEAMS = {**dict.fromkeys(BILLING, "payments"), "a-silent-hr": "people"}  # the rest: on-call


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    services, _ = world
    alerts = alert_repository(services.store)
    alerts.save_all(ADDED)
    earlier = {"dim": "", "value": "", "route": "billing-faq", "events": 10, "served": 10, "claims": 40, "failed": 20}
    earlier |= {"claims_sq": 160, "failed_sq": 40, "failed_claims": 20, "supported": 20, "contradicted": 20}
    services.store.insert(
        "rate_minute", [{**earlier, "minute": ch_time(START - timedelta(hours=3))}]
    )  # in 6 h, not 1 h
    settings = services.settings.model_copy(update={"owners": OWNERS})
    return client_for(build(settings, services.store))


@pytest.fixture
def cli(client, monkeypatch):
    return cli_at(client, monkeypatch, TOKEN, WIDTH)


def ids(found: list[dict]) -> set[str]:
    return {a["alert_id"] for a in found}


def listed(client, **params) -> list[dict]:
    response = client.get("/api/alerts", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def words(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())


def section(page: str, element_id: str, tag: str) -> str:
    start = page.index(f'id="{element_id}"')
    start = page.rindex(f"<{tag}", 0, start)
    return page[start : page.index(f"</{tag}>", start)]


def silence_count(client) -> int:
    return len(client.get("/api/silences").json())


# -- the API's filters ------------------------------------------------------------------------------
def test_each_state_filter_keeps_the_alerts_in_that_state_now(client):
    assert ids(listed(client)) == FIRING | PENDING | RESOLVED
    assert ids(listed(client, state="active")) == FIRING | PENDING
    assert ids(listed(client, state="firing")) == FIRING
    assert ids(listed(client, state="pending")) == PENDING  # a-later-legal: recorded firing, from 08:50
    assert ids(listed(client, state="resolved")) == RESOLVED
    states = [a["state"] for a in listed(client)]
    assert states == sorted(states, key=["firing", "pending", "resolved"].index)  # the list's order holds


def test_the_kind_route_and_team_filters_and_their_combinations(client):
    assert ids(listed(client, kind=SILENT_KIND)) == {"a-silent-hr"}
    assert ids(listed(client, kind=DRIFT_KIND)) == {"a-billing", "a-html", "a-later-legal", "a-old-billing"}
    assert ids(listed(client, kind=DRIFT_KIND, state="firing")) == {"a-billing", "a-html"}
    assert ids(listed(client, route="billing-faq")) == BILLING
    assert ids(listed(client, route="billing-faq", state="resolved")) == {"a-mix-billing", "a-old-billing"}
    assert ids(listed(client, team="payments")) == BILLING
    assert ids(listed(client, team="people", state="active")) == {"a-silent-hr"}
    everyone = FIRING | PENDING | RESOLVED
    assert ids(listed(client, team="on-call")) == everyone - set(TEAMS)
    assert ids(listed(client, team="nobody")) == set() and listed(client, kind=MIX_KIND, state="active") == []
    assert {a["alert_id"]: a["team"] for a in listed(client) if a["team"] != "on-call"} == TEAMS


def test_an_unknown_state_or_kind_is_a_422_naming_the_choices(client):
    response = client.get("/api/alerts", params={"kind": "route_slient"})
    assert response.status_code == 422
    assert response.json()["detail"] == f"kind 'route_slient' is not one of the choices: {', '.join(RULE_KINDS)}"
    response = client.get("/api/alerts", params={"state": "open"})
    assert response.status_code == 422 and response.json()["field"] == "query.state"
    assert response.json()["detail"] == "state: must be 'active', 'pending', 'firing' or 'resolved'"
    assert client.get("/api/alerts", params={"team": " "}).status_code == 422


def test_the_store_filters_before_its_bound(world, client):  # noqa: F811
    """A filter reaches past the newest alerts: one alert a list, and still the one of a kind and a state."""
    alerts = alert_repository(world[0].store)
    assert [a.alert_id for a in alerts.list(limit=1)] == ["a-later-legal"]  # the newest
    assert [a.alert_id for a in alerts.list(limit=1, kind=AGREEMENT_KIND)] == ["a-agreement-legal"]
    assert [a.alert_id for a in alerts.list(limit=1, kind=DRIFT_KIND, states=("resolved",), at=NOW)] == [
        "a-old-billing"
    ]  # the oldest of all
    assert [a.alert_id for a in alerts.list(limit=1, states=("resolved",), at=NOW)] == ["a-mix-billing"]
    assert {a.alert_id for a in alerts.list(states=("pending",), at=NOW)} == PENDING
    assert {a.alert_id for a in alerts.list(states=("firing",), at=START + timedelta(minutes=55))} == FIRING | {
        "a-later-legal"
    }


# -- the CLI's filters ------------------------------------------------------------------------------
def rows(text: str) -> set[str]:
    """The alert ids of a table's rows (not its header or the notes under it)."""
    return {line.split()[0] for line in text.splitlines()[1:] if line.startswith("a-")}


def test_alerts_list_filters_as_the_api_does(cli, client):
    assert rows(cli("alerts", "list", "--state", "active")) == FIRING | PENDING
    assert rows(cli("alerts", "list", "--state", "resolved")) == RESOLVED
    assert rows(cli("alerts", "list", "--state", "pending", "--kind", DRIFT_KIND)) == {"a-later-legal"}
    assert rows(cli("alerts", "list", "--kind", REJECTED_KIND)) == {"a-rejected-parcel"}
    assert rows(cli("alerts", "list", "--team", "payments", "--route", "billing-faq")) == BILLING
    wide = cli("alerts", "list", "--team", "people", "-o", "wide").splitlines()
    assert "TEAM" in wide[0].split() and re.search(r"^a-silent-hr\s.*\speople\s", wide[1]), wide
    as_json = orjson.loads(cli("alerts", "list", "--state", "active", "--team", "payments", "-o", "json"))
    assert as_json == listed(client, state="active", team="payments") and ids(as_json) == {"a-billing"}
    assert cli("alerts", "list", "--team", "nobody", "--state", "firing").strip() == (
        "no alerts match state firing, team nobody"
    )


def test_alerts_list_refuses_an_unknown_state_or_kind_naming_the_choices(client, monkeypatch):
    from services.app.cli import main

    api = answer_http_with(client, monkeypatch, TOKEN)
    for flag, value, choice in (("--kind", "route_slient", SILENT_KIND), ("--state", "open", "active")):
        result = CliRunner().invoke(main, ["alerts", "list", flag, value, "--api", "http://testserver"], obj=api)
        assert result.exit_code == 2 and f"'{value}' is not one of" in result.output, result.output
        assert f"'{choice}'" in result.output, result.output


# -- the silence preview ----------------------------------------------------------------------------
PREVIEWED = (
    ["route=billing-faq"],
    ["kind=~route_.*|events_.*"],
    ["severity=critical", "route!=hr-policy"],
    ["route=~.*-.*", "kind!~hallucination.*"],
)


@pytest.mark.parametrize("matchers", PREVIEWED, ids=lambda m: ",".join(m))
def test_the_preview_is_exactly_what_the_silence_then_silences(client, matchers):
    before = silence_count(client)
    preview = client.post("/api/silences/preview", json={"matchers": matchers})
    assert preview.status_code == 200, preview.text
    shown = preview.json()
    assert silence_count(client) == before  # nothing was created
    assert shown["active"] == len(shown["alerts"]) and all(a["state"] in ("pending", "firing") for a in shown["alerts"])
    made = client.post(
        "/api/silences",
        json={"matchers": matchers, "by": "oncall", "comment": "preview check", "duration": "1h"},
        headers=AUTH,
    ).json()
    try:
        now_listed = listed(client)
        silenced = [a for a in now_listed if made["silence_id"] in a["silenced_by"]]
        assert [a["alert_id"] for a in silenced if a["state"] != "resolved"] == [a["alert_id"] for a in shown["alerts"]]
        assert len([a for a in silenced if a["state"] == "resolved"]) == shown["resolved"]
        assert shown["matchers"] == made["matchers"]
    finally:
        client.request("DELETE", f"/api/silences/{made['silence_id']}", json={"by": "oncall"}, headers=AUTH)


def test_the_preview_counts_resolved_matches_and_shows_alerts_as_listed(client):
    shown = client.post("/api/silences/preview", json={"matchers": ["route=billing-faq"]}).json()
    assert ids(shown["alerts"]) == {"a-billing"} and shown["resolved"] == 2  # a-mix-billing, a-old-billing
    assert shown["alerts"] == listed(client, route="billing-faq", state="active")
    assert shown["searched"] == 500


@pytest.mark.parametrize(
    ("matchers", "detail"),
    [
        (["route=~(unclosed"], "matcher 'route=~(unclosed': invalid regex"),
        (["billing-faq"], "matcher 'billing-faq': use label=value, label!=value, label=~regex or label!~regex"),
        (["tema=payments"], "matcher 'tema=payments': no alert carries the label 'tema'"),
        (["route=~.*"], "would silence everything"),
        ([], "matchers: "),
    ],
)
def test_a_malformed_matcher_is_a_422_naming_it(client, matchers, detail):
    response = client.post("/api/silences/preview", json={"matchers": matchers})
    assert response.status_code == 422 and detail in response.json()["detail"], response.text


def test_the_preview_needs_only_read_rights(world):  # noqa: F811
    body = {"matchers": ["route=billing-faq"]}
    assert client_for(world[0]).post("/api/silences/preview", json=body).status_code == 200  # open reads
    protected = client_for(world[0], protect_reads=True)
    assert protected.post("/api/silences/preview", json=body).status_code == 401
    assert protected.post("/api/silences/preview", json=body, headers=AUTH).status_code == 200


def test_alerts_silence_preview_prints_the_matches_and_creates_nothing(cli, client):
    before = silence_count(client)
    text = cli("alerts", "silence", "--match", "route=billing-faq", "--preview")
    lines = text.splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith("route=billing-faq would"))
    assert rows("\n".join(lines[:said])) == {"a-billing"}
    assert " ".join(" ".join(lines[said:]).split()) == (  # (the sentence wraps where the terminal ends)
        "route=billing-faq would silence 1 open alert; 2 resolved alerts match too (of the newest 500 open and "
        "resolved). No silence was created."
    )
    shown = orjson.loads(cli("alerts", "silence", "--match", "severity=critical", "--preview", "-o", "json"))
    assert shown == client.post("/api/silences/preview", json={"matchers": ["severity=critical"]}).json()
    assert ids(shown["alerts"]) == {"a-silent-hr"} and shown["resolved"] == 1
    assert silence_count(client) == before


# -- the MCP tools ----------------------------------------------------------------------------------
def test_the_mcp_tools_pass_the_filters_and_preview_through_the_api(client):
    gateway = ApiGateway("http://testserver", TOKEN, transport=httpx.ASGITransport(client.app))
    before = silence_count(client)

    async def ask():
        async with Client(build_server(gateway)) as session:
            found = await session.call_tool("list_alerts", {"state": "active", "team": "payments"})
            kinds = await session.call_tool("list_alerts", {"kind": SILENT_KIND})
            wrong = await session.call_tool("list_alerts", {"kind": "route_slient"})
            preview = await session.call_tool("silence", {"matchers": ["route=billing-faq"], "preview": True})
            return found, kinds, wrong, preview

    found, kinds, wrong, preview = anyio.run(ask)
    assert found.structured_content["items"] == listed(client, state="active", team="payments")
    assert ids(kinds.structured_content["items"]) == {"a-silent-hr"}
    assert wrong.is_error and "is not one of the choices" in wrong.content[0].text
    assert (
        preview.structured_content
        == client.post("/api/silences/preview", json={"matchers": ["route=billing-faq"]}).json()
    )
    assert "would silence 1 open alert" in preview.content[0].text and "a-billing" in preview.content[0].text
    assert silence_count(client) == before


# -- the alerts page --------------------------------------------------------------------------------
def cards(page: str) -> set[str]:
    return set(re.findall(r'<article class="card alert" id="([^"]+)"', page))


def test_the_alerts_page_filters_by_links_and_form_and_says_what_it_shows(client):
    page = client.get("/alerts").text
    assert cards(page) == FIRING | PENDING | RESOLVED
    assert words(section(page, "alert-counts", "p")) == "8 alerts: 3 firing, 2 pending, 3 resolved."
    links = section(page, "alert-states", "nav")
    assert '<a href="/alerts" aria-current="true">any state</a>' in links
    active = client.get("/alerts", params={"state": "active", "team": "payments"}).text
    assert cards(active) == {"a-billing"}
    assert words(section(active, "alert-counts", "p")) == (
        "Showing 1 alert of 8 (state active, team payments): 1 firing, 0 pending, 0 resolved."
    )
    links = section(active, "alert-states", "nav")
    assert '<a href="/alerts?team=payments&amp;state=resolved">resolved</a>' in links  # keeps the team
    assert '<a href="/alerts?team=payments&amp;state=active" aria-current="true">active</a>' in links
    form = section(active, "alert-filters", "form")
    assert '<input type="hidden" name="state" value="active">' in form and 'value="payments"' in form
    assert 'id="clear-filters"' in form
    kind = client.get("/alerts", params={"kind": SILENT_KIND, "state": "", "route": "", "team": ""}).text  # the form
    assert cards(kind) == {"a-silent-hr"} and f'<option value="{SILENT_KIND}" selected>' in kind
    none = client.get("/alerts", params={"team": "nobody"}).text
    assert cards(none) == set() and "No alerts match team nobody." in words(none)
    assert "team people" in words(section(page, "a-silent-hr-h", "h3"))


def test_the_alerts_page_refuses_an_unknown_kind_with_the_choices(client):
    response = client.get("/alerts", params={"kind": "route_slient"})
    assert response.status_code == 422 and "text/html" in response.headers["content-type"]
    assert "is not one of the choices: hallucination_rate_rise" in words(response.text)


def test_the_silence_forms_preview_lists_the_matches_and_keeps_what_was_typed(client):
    before = silence_count(client)
    page = client.get(
        "/alerts",
        params={
            "matchers": "route=billing-faq\r\n",
            "duration": "3h",
            "by": "oncall",
            "comment": "rollout",
            "preview": "1",
        },
    )
    assert page.status_code == 200 and silence_count(client) == before
    shown = section(page.text, "silence-preview", "section")
    assert re.findall(r'<th scope="row" class="mono"><a href="/alerts/([^"]+)"', shown) == ["a-billing"]
    assert (
        "route=billing-faq would silence 1 open alert; 2 resolved alerts match too (of the newest 500 open and "
        "resolved). Nothing is created until you press Create silence."
    ) in words(shown)
    form = section(page.text, "new-silence", "form")
    assert ">route=billing-faq\r\n</textarea>" in form and 'value="3h"' in form and 'value="rollout"' in form
    assert 'formaction="/alerts"' in form and "formnovalidate" in form
    assert page.text.index('id="silence-preview"') < page.text.index('id="list-h"')  # above the list, in sight
    bad = client.get("/alerts", params={"matchers": "route=~(unclosed", "preview": "1"})
    assert bad.status_code == 422
    assert "matcher 'route=~(unclosed': invalid regex" in words(section(bad.text, "silence-preview", "section"))
    assert 'id="silence-preview"' not in client.get("/alerts").text  # shown only when asked


# -- the route page's range links -------------------------------------------------------------------
def range_links(page: str) -> dict[str, tuple[str, bool]]:
    nav = section(page, "ranges", "nav")
    return {
        label: (html.unescape(href), bool(current))
        for href, current, label in re.findall(r'<a href="([^"]+)"( aria-current="true")?>([^<]+)</a>', nav)
    }


@pytest.mark.parametrize("window", ["1h", "6h", "24h", "7d"])
def test_the_route_pages_range_links_set_the_charts_window_and_its_figures(client, window):
    start = client.get("/routes/billing-faq", params={"window": "6h", "from": "overview"}).text
    links = range_links(start)
    assert list(links) == ["1h", "6h", "24h", "7d"] and [c for c in links.values() if c[1]] == [links["6h"]]
    href = links[window][0]
    assert href == f"/routes/billing-faq?from=overview&window={window}"  # keeps the page's other parameters
    page = client.get(href).text
    assert range_links(page)[window][1] and sum(c for _, c in range_links(page).values()) == 1
    assert f'data-src="/api/routes/billing-faq?window={window}"' in page
    detail = client.get("/api/routes/billing-faq", params={"window": window}).json()
    t = detail["totals"]
    average = words(section(page, "range-average", "p"))
    assert average.startswith(f"{window} average: {100 * t['rate']:.1f}% of {t['claims']:,} claims failed"), average
    verdicts = re.findall(
        r'<th scope="row">(\w+)</th><td class="num">([\d,]+)</td>', section(page, "verdicts", "table")
    )
    assert verdicts == [(v, f"{n:,}") for v, n in t["verdicts"].items()]


@pytest.mark.slow
def test_the_ranges_read_different_minutes(client):
    claims = {
        w: client.get("/api/routes/billing-faq", params={"window": w}).json()["totals"]["claims"]
        for w in "1h 6h".split()
    }
    assert claims["6h"] == claims["1h"] + 40  # the minute three hours back
    pages = {
        w: words(section(client.get(f"/routes/billing-faq?window={w}").text, "range-average", "p")) for w in claims
    }
    assert f"of {claims['1h']:,} claims" in pages["1h"] and f"of {claims['6h']:,} claims" in pages["6h"]


def test_a_range_given_in_the_url_is_listed_and_marked(client):
    links = range_links(client.get("/routes/billing-faq", params={"window": "30m"}).text)
    assert list(links) == ["30m", "1h", "6h", "24h", "7d"] and links["30m"][1]


def test_the_route_pages_alerts_are_those_of_its_range(client):
    """An alert that ended before the range is not beside the chart; the page says so and links to them all."""
    page = client.get("/routes/billing-faq", params={"window": "24h"}).text
    shown = section(page, "alerts-h", "section")
    assert "a-old-billing" not in shown and "a-billing" in shown and "a-mix-billing" in shown
    assert "1 more alert of this route ended before this range: all its alerts." in words(shown)
    assert f'href="/alerts?route={quote("billing-faq")}"' in shown
    assert "a-old-billing" in section(
        client.get("/routes/billing-faq", params={"window": "7d"}).text, "alerts-h", "section"
    )
