"""An alert explains itself on a real store: the API, the CLI, the alerts and route pages name the issues
behind its excess; the issue page and GET /api/issues/<id> list the alerts it contributes to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import orjson
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from clustering.issue import IssueRecord
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.api.app import create_api
from services.api.auth import new_token
from services.api.security import ApiPolicy
from services.app.cli import main
from services.app.compose import open_components
from services.app.settings import Settings
from services.client.simulate import Scenario, generate
from services.contract.decode import validate_event
from services.issues.records import issue_repository
from services.rates.intervals import Interval
from services.store.convert import ch_time
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter
from tests.support.cli import answer_http_with

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
MINUTES, REGRESSION_AT = 60, 30
NOW = START + timedelta(minutes=MINUTES)
TOKEN, TOKEN_HASH = new_token()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ALERT_ID = "a-billing-explained"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Billing-faq's new model invents numbers from minute 30; its failing claims are stored as two issues
    (the invented numbers, everything else) and an alert is open from the onset."""
    settings = Settings(
        clickhouse=f"chdb:{tmp_path_factory.mktemp('explain') / 'ch'}",
        api={"token_hashes": [TOKEN_HASH]},
        notify={"external_url": "http://testserver"},
        drift={"baseline_minutes": 60},
    )
    services = open_components(settings)
    RetentionKeeper(services.store).apply(KEEP_EVERYTHING)  # fixed event times must not age past a TTL
    scenario = Scenario.demo(regression_at=REGRESSION_AT, corpus_change_at=None).scaled(0.25)
    sims = [s for s in generate(scenario, START, MINUTES, seed=7) if s.event is not None and not s.duplicate]
    events = {e.event_id: e for e in (validate_event(s.event) for s in sims)}
    EventWriter(services.store).write(list(events.values()), [])
    family = {(s.event["event_id"], i): f for s in sims for i, f in enumerate(s.family_by_claim) if f is not None}
    groups: dict[str, list] = {"iss-invented": [], "iss-rest": []}
    for (event_id, idx), f in family.items():
        if events[event_id].route == "billing-faq":
            groups["iss-invented" if f == "invented_numbers" else "iss-rest"].append((events[event_id], idx))
    issues = issue_repository(services.store)
    for issue_id, name in (("iss-invented", "Invented refund amounts"), ("iss-rest", "Everything else on billing")):
        members = groups[issue_id]
        keys = [f"{e.event_id}:{i}" for e, i in members]
        issues.save_members(
            [
                {
                    "claim_key": k,
                    "issue_id": issue_id,
                    "probability": 0.9,
                    "source": "batch",
                    "config_name": "test@1",
                    "x": 0.0,
                    "y": 0.0,
                    "observed_at": ch_time(e.observed_at),
                }
                for k, (e, _) in zip(keys, members)
            ]
        )
        issues.save(
            [
                IssueRecord(
                    issue_id=issue_id,
                    name=name,
                    keywords=("refund",),
                    config_name="test@1",
                    first_seen=START,
                    last_seen=NOW,
                    size=len(keys),
                    routes={"billing-faq": len(keys)},
                    exemplar_ids=tuple(keys[:3]),
                )
            ]
        )
    onset = START + timedelta(minutes=REGRESSION_AT)
    alert_repository(services.store).save(
        Alert(
            alert_id=ALERT_ID,
            route="billing-faq",
            kind="hallucination_rate_rise",
            severity="warning",
            labels={"service": "claimwatch"},
            window=30,
            pending_since=onset + timedelta(minutes=4),
            starts_at=onset + timedelta(minutes=6),
            rate=0.12,
            rate_interval=Interval(0.1, 0.14),
            baseline=0.06,
            baseline_interval=Interval(0.05, 0.07),
            delta=0.06,
            claims=900,
            onset=onset,
        )
    )
    yield services
    services.close()


@pytest.fixture(scope="module")
def client(world):
    return TestClient(create_api(world, ApiPolicy(token_hashes=(TOKEN_HASH,)), now=lambda: NOW), headers=AUTH)


def test_the_alert_names_the_issue_that_caused_it_and_adds_up(client):
    e = client.get(f"/api/alerts/{ALERT_ID}").json()["explanation"]
    assert e["excess"] > 0 and e["claims"] > 0
    assert e["issues"][0]["issue_id"] == "iss-invented" and e["issues"][0]["share"] > 0.6
    assert (
        e["issues"][0]["claim"]["text"]
        and e["issues"][0]["runbook_url"] == f"http://testserver/issues/iss-invented?alert={ALERT_ID}"
    )
    parts = e["issues"] + [e["other_issues"] or {"contribution": 0, "share": 0}, e["unclustered"]]
    assert sum(p["contribution"] for p in parts) == pytest.approx(e["excess"], abs=0.05)
    assert sum(p["share"] for p in parts) == pytest.approx(1.0, abs=1e-3)


def test_the_runbook_url_answers(client):
    e = client.get(f"/api/alerts/{ALERT_ID}").json()["explanation"]
    url = urlsplit(e["issues"][0]["runbook_url"])
    page = client.get(f"{url.path}?{url.query}")
    assert page.status_code == 200 and "Invented refund amounts" in page.text


def test_the_alerts_page_and_the_route_page_show_the_explanation(client):
    for path in ("/alerts", "/routes/billing-faq"):
        page = client.get(path)
        assert page.status_code == 200, page.text[-3000:]
        assert f'id="{ALERT_ID}-why"' in page.text and "Invented refund amounts" in page.text, path
        assert f'href="/issues/iss-invented?alert={ALERT_ID}"' in page.text and "unclustered" in page.text


@pytest.mark.slow
def test_an_issue_lists_the_alerts_it_contributes_to(client):
    listed = client.get("/api/issues/iss-invented").json()["alerts"]
    assert [(a["alert_id"], a["route"], a["state"]) for a in listed] == [(ALERT_ID, "billing-faq", "firing")]
    explained = client.get(f"/api/alerts/{ALERT_ID}").json()["explanation"]["issues"][0]
    assert listed[0]["share"] == pytest.approx(explained["share"])
    page = client.get("/issues/iss-invented").text
    assert 'id="issue-alerts"' in page and ALERT_ID in page
    # a share can pass 100%: the page says why, in the words the alerts page uses
    note = "an issue that grew more than the route did is over 100%"
    assert note in " ".join(page.split()) and note in " ".join(client.get("/alerts").text.split())


def test_cli_alerts_show_carries_the_explanation(client, monkeypatch):
    api = answer_http_with(client, monkeypatch, TOKEN)
    result = CliRunner().invoke(main, ["alerts", "show", ALERT_ID, "-o", "json", "--api", "http://testserver"], obj=api)
    assert result.exit_code == 0, result.output
    shown = orjson.loads(result.output)
    top = shown["explanation"]["issues"][0]
    assert top["name"] == "Invented refund amounts"
    text = CliRunner(env={"COLUMNS": "80"}).invoke(
        main, ["alerts", "show", ALERT_ID, "--api", "http://testserver"], obj=api
    )
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    first = next(n for n, line in enumerate(lines) if line.startswith("issues "))  # what the parts are, then each
    said = " ".join(" ".join(lines[first : first + 8]).split())
    assert f"{shown['explanation']['excess']:,.0f} excess" in said, text.output
    assert (
        f"{top['failed']:,} failing, {top['contribution']:+,.0f} claims beyond expected ({100 * top['share']:+.1f}%) "
        "Invented refund amounts (iss-invented)" in said
    ), text.output  # the top issue first: its claims, its share
    # the runbook command pastes whole at 80 columns (it was wrapped at a space: `--alert` lost its argument)
    command = next(line for line in lines if line.startswith("runbook ")).split(None, 1)[1]
    assert command.endswith(f"runbook iss-invented --alert {ALERT_ID}") and len(lines[0]) <= 80, text.output


def test_members_arriving_while_the_alert_is_open_do_not_reorder_the_ones_shown(world):
    """Clustered members come first, most typical first; those assigned online since follow, oldest first. So the
    issue page and the runbook, read seconds apart while traffic flows, show the same traces."""
    issues = issue_repository(world.store)
    onset = START + timedelta(minutes=REGRESSION_AT)
    claims = world.store.query(
        "SELECT event_id, claim_idx, observed_at FROM claims WHERE route = 'billing-faq' AND observed_at >= "
        "{onset:DateTime64(3)} ORDER BY observed_at, event_id LIMIT 6",
        {"onset": ch_time(onset)},
    )

    def row(c, source, p):
        return {
            "claim_key": f"{c['event_id']}:{c['claim_idx']}",
            "issue_id": "iss-order",
            "probability": p,
            "source": source,
            "config_name": "test@1",
            "x": 0.0,
            "y": 0.0,
            "observed_at": c["observed_at"],
        }

    first, second, third, later, latest, newest = claims
    issues.save_members(
        [row(first, "batch", 0.6), row(second, "batch", 0.9), row(third, "online", 1.0), row(later, "online", 1.0)]
    )
    keys = lambda: [m["claim_key"] for m in issues.members_in_window("iss-order", "billing-faq", onset, NOW, 10)]  # noqa: E731
    shown = keys()
    assert shown == [f"{c['event_id']}:{c['claim_idx']}" for c in (second, first, third, later)]
    issues.save_members([row(newest, "online", 1.0), row(latest, "online", 1.0)])  # arrived since
    assert keys()[:4] == shown
