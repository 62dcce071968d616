"""One truth on every surface (issue 50): for the firing alert and the issue its explanation names first, the rate,
the expected rate, the delta, the interval, the issue's failing claims and share of the excess, the onset and the
state read the same from the API's JSON, `claimwatch alerts show` (JSON and text), the alerts page and the issue's
runbook. The words come from one module (services/core/numbers.py); the test writes each figure with it and
looks for that text on every surface, so a surface that derives or formats a figure its own way fails here.

Also with no API: the CLI then reads the store itself and must give the same JSON."""

from __future__ import annotations

import html
import re

import httpx
import orjson
import pytest
from click.testing import CliRunner

from services.app.cli import main
from services.core.numbers import interval_text, pct, pts, utc_minute
from tests.support.cli import answer_http_by
from tests.unit.app.test_cli_on_call import cli, client, firing, world  # noqa: F401  (fixtures)

# its fixtures take tens of seconds: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

FIGURES = ("rate", "expected", "delta", "rate_interval", "onset", "state")


def flat(text: str) -> str:
    """Text as read: tags dropped, entities decoded, runs of white space one space."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text))).strip()


@pytest.fixture(scope="module")
def alert(client, firing) -> dict:  # noqa: F811
    found = client.get(f"/api/alerts/{firing['alert_id']}").json()
    assert found["state"] == "firing" and found["explanation"]["issues"], found
    return found


def words(a: dict) -> dict[str, str]:
    """Each figure as every surface must write it."""
    top = a["explanation"]["issues"][0]
    return {
        "rate": pct(a["rate"]),
        "expected": pct(a["expected"]),
        "delta": pts(a["delta"]),
        "interval": interval_text(*a["rate_interval"]),
        "onset": utc_minute(a["onset"]),
        "state": "firing",
        "issue share": pct(abs(top["share"])),
        "issue claims": f"{top['failed']:,} failing claims"[:-7],
    }


def test_the_cli_json_is_the_api_json(alert, cli):  # noqa: F811
    shown = orjson.loads(cli("alerts", "show", alert["alert_id"], "-o", "json"))
    assert {k: shown[k] for k in FIGURES} == {k: alert[k] for k in FIGURES}
    assert shown["explanation"]["issues"][0] == alert["explanation"]["issues"][0]


def test_the_cli_text_writes_each_figure_as_the_api_gives_it(alert, cli):  # noqa: F811
    text = flat(cli("alerts", "show", alert["alert_id"]))
    missing = {name: w for name, w in words(alert).items() if w not in text}
    assert not missing, (missing, text)
    assert f"firing since {utc_minute(alert['starts_at'])}" in text


def test_the_alerts_page_writes_each_figure_as_the_api_gives_it(alert, client):  # noqa: F811
    page = client.get("/alerts").text
    assert "Alerts: firing, then pending, then resolved" in flat(page)
    start = page.index(f'<article class="card alert" id="{alert["alert_id"]}"')
    card = flat(page[start : page.index("</article>", start)])
    missing = {name: w for name, w in words(alert).items() if name != "issue claims" and w not in card}
    assert not missing, (missing, card)
    top = alert["explanation"]["issues"][0]  # its row: name, share of the excess, failing claims
    assert f"{top['name']} {pct(top['share'])} {top['failed']:,}" in card, card


def test_the_runbook_gives_the_alerts_rate_and_expectation_and_the_issue(alert, client):  # noqa: F811
    top = alert["explanation"]["issues"][0]
    runbook = flat(
        client.get(
            f"/api/issues/{top['issue_id']}/runbook", params={"format": "md", "alert": alert["alert_id"]}
        ).text.replace("**", "")
    )
    w = words(alert)
    assert f"the alert recorded {w['rate']}" in runbook and f"where {w['expected']} is expected" in runbook, runbook
    assert alert["alert_id"] in runbook


def test_with_no_api_the_cli_reads_the_store_and_gives_the_same_json(alert, world, monkeypatch):  # noqa: F811
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    monkeypatch.delenv("CLAIMWATCH_TOKEN", raising=False)
    result = CliRunner().invoke(
        main,
        [
            "alerts",
            "show",
            alert["alert_id"],
            "-o",
            "json",
            "--api",
            "http://127.0.0.1:9",
            "--clickhouse",
            world.settings.clickhouse,
        ],
        obj=answer_http_by(refused),
    )
    assert result.exit_code == 0, result.output
    assert "no claimwatch API at http://127.0.0.1:9; reading" in result.stderr
    shown = orjson.loads(result.stdout)
    assert {k: shown[k] for k in FIGURES} == {k: alert[k] for k in FIGURES}


def test_an_api_moved_by_one_setting_is_the_one_the_cli_asks(alert, world, monkeypatch):  # noqa: F811
    """A real API on a free port; the CLI is told only CLAIMWATCH_API__PORT. It asks that API (no notice that it
    reads the store itself) and gives the same JSON and text."""
    from services.api.app import create_api
    from services.api.security import ApiPolicy
    from tests.support.serving import serving
    from tests.unit.app.test_cli_on_call import NOW, TOKEN, TOKEN_HASH

    app = create_api(world, ApiPolicy(token_hashes=(TOKEN_HASH,)), now=lambda: NOW)
    with serving(app) as port:
        env = {"CLAIMWATCH_API__PORT": str(port), "CLAIMWATCH_TOKEN": TOKEN, "COLUMNS": "80"}
        run = lambda *args: CliRunner(env=env).invoke(main, list(args))  # noqa: E731
        shown, text = run("alerts", "show", alert["alert_id"], "-o", "json"), run("alerts", "show", alert["alert_id"])
    no_token = CliRunner(env={"CLAIMWATCH_API__PORT": str(port), "CLAIMWATCH_TOKEN": ""}).invoke(
        main, ["token", "show"]
    )
    assert shown.exit_code == 0 and text.exit_code == 0, (shown.output, text.output)
    assert "no claimwatch API" not in shown.stderr + text.stderr
    answered = orjson.loads(shown.stdout)
    assert {k: answered[k] for k in FIGURES} == {k: alert[k] for k in FIGURES}
    missing = {name: w for name, w in words(alert).items() if w not in flat(text.stdout)}
    assert not missing, (missing, text.stdout)
    assert f"no API token for http://127.0.0.1:{port}:" in no_token.output, no_token.output  # its URL, from the port


def test_the_alert_json_is_exactly_its_read_model_and_openapi_says_so(alert, client):  # noqa: F811
    """One shape, defined once (services/alerts/oncall/readmodel.py): the answer has every field the model names and no
    other, and the OpenAPI document describes that model, closed to fields it does not name."""
    from services.alerts.oncall.readmodel import AlertDetailRead, AlertRead

    assert set(alert) == set(AlertDetailRead.model_fields)
    listed = client.get("/api/alerts").json()
    assert listed and all(set(a) == set(AlertRead.model_fields) for a in listed)
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["AlertDetailRead"]["additionalProperties"] is False
    assert set(schemas["AlertDetailRead"]["properties"]) == set(AlertDetailRead.model_fields)
    assert "AlertDetail" not in schemas and "AlertView" not in schemas  # the documentation-only shapes are gone
