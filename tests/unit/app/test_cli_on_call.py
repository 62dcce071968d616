"""The first minutes after an alert, at 80 columns, against a real store that the live evaluator ran over:
billing-faq's new model invents numbers (+4.5 points) and its alert fires; legal-terms fails more often but as it
always does. Every command is the real CLI, its HTTP calls answered by the in-process API.

- `rates` and the API, the overview and the route page put the firing route first and give the same expected
  rate and delta, the expected rate being the one the alert carries;
- `alerts list` says `firing·acked` after an ack and `cleared` for an alert that never fired, ids whole;
- `issues list` keeps the route column and cuts titles after whole words; `issues show` and `runbook` print
  text (not JSON, not Markdown escapes) with their key fields whole; `eval agreement` names the commands
  that add human labels."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import orjson
import pytest
from fastapi.testclient import TestClient

from clustering.issue import IssueRecord
from services.alerts.explain.figures import expected_text, figure
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.api.app import create_api
from services.api.auth import new_token
from services.api.security import ApiPolicy
from services.app.compose import evaluator_for, open_components
from services.app.settings import load_settings
from services.client.simulate import Regression, Scenario, generate
from services.contract.decode import validate_event
from services.issues.records import issue_repository
from services.store.convert import ch_time
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter
from tests.support.cli import cli_at

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
MINUTES, REGRESSION_AT = 260, 200
NOW = START + timedelta(minutes=MINUTES)
WIDTH = 80
TOKEN, TOKEN_HASH = new_token()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# As clustering/naming.py titles an issue: the claim quoted and cut at a word with "…", then verdict and route.
TITLE = '"Refunds for the annual plan arrive within 37 business days of the…" contradicts billing-faq'
CLEARED = "a-cleared-legal"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    settings = load_settings(
        None,
        {"CLAIMWATCH_DRIFT__WATERMARK_SECONDS": "0"},
        {
            "clickhouse": f"chdb:{tmp_path_factory.mktemp('oncall') / 'ch'}",
            "api": {"token_hashes": [TOKEN_HASH]},
            "drift": {"detector": {"min_baseline_claims": 8000}},
        },
    )
    services = open_components(settings)
    RetentionKeeper(services.store).apply(KEEP_EVERYTHING)  # fixed event times must not age past a TTL
    demo = Scenario.demo()
    routes = tuple(r for r in demo.routes if r.name in ("billing-faq", "legal-terms"))
    scenario = Scenario(
        routes=routes,
        bad_fraction=0.0,
        duplicate_fraction=0.0,
        late_fraction=0.0,
        regressions=(Regression("billing-faq", REGRESSION_AT, {"model": "gen-2026-11"}, 0.045),),
    )
    sims = [s for s in generate(scenario, START, MINUTES, seed=4) if s.event is not None]
    events = {e.event_id: e for e in (validate_event(s.event) for s in sims)}
    EventWriter(services.store).write(list(events.values()), [])
    evaluator_for(
        settings, services.repos.rates, services.repos.dead_letters, services.repos.alerts, wall_clock=False
    ).evaluate(NOW)
    invented = [
        (events[s.event["event_id"]], i)
        for s in sims
        for i, f in enumerate(s.family_by_claim)
        if f == "invented_numbers" and s.event["route"] == "billing-faq"
    ]
    keys = [f"{e.event_id}:{i}" for e, i in invented]
    issues = issue_repository(services.store)
    issues.save(
        [
            IssueRecord(
                issue_id="iss-refund-days",
                name=TITLE,
                keywords=("refund", "days"),
                config_name="t@1",
                first_seen=invented[0][0].observed_at,
                last_seen=invented[-1][0].observed_at,
                size=len(keys),
                routes={"billing-faq": len(keys)},
                exemplar_ids=tuple(keys[-3:]),
            )
        ]
    )
    issues.save_members(
        [
            {
                "claim_key": k,
                "issue_id": "iss-refund-days",
                "probability": 0.9,
                "source": "batch",
                "config_name": "t@1",
                "x": 0.0,
                "y": 0.0,
                "observed_at": ch_time(e.observed_at),
            }
            for k, (e, _) in zip(keys, invented)
        ]
    )
    alert_repository(services.store).save(
        Alert(  # pending for a while, then it cleared: it never fired
            alert_id=CLEARED,
            route="legal-terms",
            kind="hallucination_rate_rise",
            severity="warning",
            labels={},
            window=30,
            pending_since=START + timedelta(minutes=150),
            ends_at=START + timedelta(minutes=170),
        )
    )
    yield services
    services.close()


@pytest.fixture(scope="module")
def client(world):
    return TestClient(create_api(world, ApiPolicy(token_hashes=(TOKEN_HASH,)), now=lambda: NOW), headers=AUTH)


@pytest.fixture
def cli(client, monkeypatch):
    return cli_at(client, monkeypatch, TOKEN, WIDTH)


@pytest.fixture(scope="module")
def firing(client) -> dict:
    found = [
        a
        for a in client.get("/api/alerts", params={"state": "firing"}).json()
        if a["kind"] == "hallucination_rate_rise"
    ]
    assert [a["route"] for a in found] == ["billing-faq"], found
    return found[0]


@pytest.fixture
def acked(client, firing) -> dict:
    """The firing alert, acked (again, if an earlier test did): each test that reads the ack makes it."""
    assert client.post(f"/api/alerts/{firing['alert_id']}/ack", json={"by": "oncall", "note": ""}).status_code == 200
    return firing


def row_of(lines: list[str], route: str) -> list[str]:
    return next(line for line in lines if line.startswith(route + " ")).split()


# -- worst means furthest above the expectation, and every surface agrees --------------------------------
@pytest.mark.slow
def test_the_firing_route_comes_first_with_the_expectation_its_alert_carries(client, cli, firing):
    rates = client.get("/api/rates", params={"sort": "priority"}).json()
    assert [r["route"] for r in rates] == ["billing-faq", "legal-terms"]
    billing, legal = rates
    assert legal["rate"] > billing["rate"] and not legal["firing_alerts"]  # higher, but normal for it
    assert billing["firing_alerts"] == [firing["alert_id"]] and billing["expected"] == firing["expected"]
    assert billing["delta"] == pytest.approx(billing["rate"] - billing["expected"])
    assert [r["route"] for r in client.get("/api/rates").json()] == ["legal-terms", "billing-faq"]  # sort=rate

    lines = cli("rates").splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    assert [line.split()[0] for line in lines[2:4]] == ["billing-faq", "legal-terms"]
    cells = row_of(lines, "billing-faq")
    expected = expected_text(billing).split()  # "learning (…)" while the baseline is learning, else the figure
    assert cells[: 5 + len(expected)] == [
        "billing-faq",
        figure(billing["rate"]),
        *expected,
        *figure(billing["delta"], change=True).split(),
        "firing",
    ]
    assert any(line.startswith("EXPECTED: ") for line in lines) and any(line.startswith("DELTA: ") for line in lines)

    route = client.get("/api/routes/billing-faq").json()["current"]
    assert (route["rate"], route["expected"], route["delta"]) == (
        billing["rate"],
        billing["expected"],
        billing["delta"],
    )
    for page in (client.get("/").text, client.get("/routes/billing-faq").text):
        said = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
        assert expected_text(billing) in said and figure(billing["delta"], change=True) in said
    overview = client.get("/").text
    assert overview.index(f'href="/routes/{quote("billing-faq")}"') < overview.index('href="/routes/legal-terms"')


# -- alerts list ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_alerts_list_says_acked_and_cleared_with_whole_ids(client, cli, acked):
    lines = cli("alerts", "list").splitlines()
    assert all(len(line) <= WIDTH for line in lines) and lines[0].split()[:3] == ["ALERT", "ROUTE", "STATE"]
    row = next(line for line in lines if acked["alert_id"] in line)
    assert re.match(rf"{acked['alert_id']}\s+billing-faq\s+firing·acked\s", row), row
    cleared = next(line for line in lines if CLEARED in line)
    assert re.match(rf"{CLEARED}\s+legal-terms\s+cleared\s", cleared), cleared
    # its RATE is not the `rates` table's: the legend says which window it is over, and where it is named
    legend = " ".join(" ".join(lines[lines.index(next(line for line in lines if line.startswith("RATE:"))) :]).split())
    assert "alert's own window" in legend and "`alerts show ID` gives the window" in legend
    listed = {a["alert_id"]: a for a in client.get("/api/alerts").json()}
    assert listed[CLEARED]["state"] == "resolved" and listed[CLEARED]["state_text"] == "cleared"  # API compatible
    shown = cli("alerts", "show", CLEARED)
    assert "cleared at 2026-11-20 10:50 UTC" in shown and "resolved" not in shown


# -- issues --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_issues_list_keeps_the_route_and_cuts_titles_after_whole_words(cli):
    lines = cli("issues", "list").splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    assert lines[0].split()[:5] == ["ISSUE", "NAME", "STATE", "ROUTES", "COUNT"]
    assert lines[1].startswith("iss-refund-days ") and "billing-faq" in lines[1]
    start = lines[0].index("NAME")
    title = " ".join(line[start : lines[0].index("STATE")].strip() for line in lines[1:3])
    assert title.endswith("…") and '…"…' not in title and "…" not in title[:-1]
    words = set(TITLE.split())
    assert all(w in words or w.rstrip("…") in words for w in title.split()), title  # no word cut in two


@pytest.mark.slow
def test_issues_show_is_text_with_its_key_fields_whole(cli, client, acked):
    issue = client.get("/api/issues/iss-refund-days").json()
    text = cli("issues", "show", "iss-refund-days")
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in lines) and not text.lstrip().startswith("{")
    said = " ".join(text.split())
    assert lines[0].split() == ["issue", "iss-refund-days"] and f"name {TITLE}" in said
    assert "state new" in said and "routes billing-faq:" in said and f"{issue['count']:,} failing claims" in said
    for label in ("first seen", "last seen"):
        assert re.search(rf"^{label}\s+2026-11-20 \d\d:\d\d UTC", text, re.M), label
    for exemplar in issue["exemplars"]:
        assert any(exemplar["trace_id"] in line for line in lines), exemplar["trace_id"]
    assert any(acked["alert_id"] in line and "firing·acked" in line for line in lines), text
    shown = orjson.loads(cli("issues", "show", "iss-refund-days", "-o", "json"))
    # the API's answer from just before or just after (an open alert's window grows when a minute turns between)
    assert shown in (issue, client.get("/api/issues/iss-refund-days").json())


@pytest.mark.slow
def test_the_runbook_is_rendered_for_the_terminal_without_escapes_or_broken_words(cli, client):
    source = client.get("/api/issues/iss-refund-days/runbook", params={"format": "md"}).text
    assert "claim\\_generation" in source  # the Markdown escapes untrusted text …
    text = cli("runbook", "iss-refund-days")
    assert "\\_" not in text and "\\<" not in text and "claim_generation" in text  # … the terminal shows it plain
    assert "iss-refund-days" in text and "billing-faq" in text
    code = [line.strip() for line in source.splitlines()]
    for line in text.splitlines():  # prose wraps at 80; a command runs on, whole, so that it pastes
        assert len(line.rstrip()) <= WIDTH or line.strip() in code, line
    tokens = lambda t: set(re.findall(r"[A-Za-z0-9_]+", t))  # noqa: E731
    assert tokens(text) <= tokens(re.sub(r"\\(.)", r"\1", source))  # every word whole, none cut in two
    assert cli("runbook", "iss-refund-days", "--markdown").rstrip("\n") == source.rstrip("\n")


@pytest.mark.slow
def test_eval_agreement_without_pairs_names_the_commands_that_add_human_labels(cli):
    text = cli("eval", "agreement")
    said = " ".join(text.split())
    assert "no claim of an approved eval item has both a verifier and a human label" in said
    assert "review sample --eval" in said and "review next --reviewer NAME" in said
    assert orjson.loads(cli("eval", "agreement", "-o", "json"))["pairs"] == 0


@pytest.mark.parametrize(
    "share, says",
    [
        (0.4, "40.0% of its excess failing claims"),
        (1.839, "183.9% of its excess failing claims (it grew more than the route did)"),
        (-0.2, "-20.0% of its excess failing claims (it shrank)"),
        (None, "— of its excess failing claims"),
    ],
)
def test_issues_show_says_why_a_share_of_an_alert_passes_100_or_falls_below_zero(share, says):
    from services.app.cli.issues import issue_fields

    issue = {
        "issue_id": "iss-1",
        "name": "refund window",
        "state": "open",
        "count": 3,
        "alerts": [{"alert_id": "al-1", "route": "billing-faq", "state": "firing", "share": share}],
    }
    fields = dict(issue_fields(issue, datetime(2026, 11, 29, tzinfo=UTC)))
    assert fields["alerts"] == [f"al-1 on billing-faq: firing, {says}"]
