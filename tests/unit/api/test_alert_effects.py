"""Every alert surface shows what the alert expected and its rise split into mix and rate, in the same
figures: `claimwatch alerts show` (text and -o json), `alerts list`, the alerts page and the route page.

On the API test's store (real chDB, simulated traffic) with two more alerts: a mix shift on parcel-status
and a regression on legal-terms whose rate is now below what was expected (a negative delta)."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from datetime import timedelta

import orjson
import pytest

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import DRIFT_KIND, MIX_KIND
from services.alerts.lifecycle.records import alert_repository
from services.rates.intervals import Interval
from tests.support.cli import cli_at
from tests.unit.api.test_api import START, TOKEN, client_for, world  # noqa: F401  (world is a fixture)

WIDTH = 80
SEASONAL = "time of day: the 24 h level plus this hour's offset from 2.0 days of history"
TRAILING = "trailing 24 h level: less than a day of history, so no time-of-day profile yet"
SLICE = "query_type=multi_hop stakes=high: 20% of claims -> 40%"
SUSPECTS = tuple(
    {"dim": f"version.{k}", "key": k, "value": v, "kind": kind, "rate_before": before, "rate_after": after}
    for k, v, kind, before, after in (
        ("retriever", "bm25-v3", "system", 0.05, 0.11),
        ("corpus", "2026-11-20", "evidence", 0.06, 0.09),
        ("prompt", "p-7", "system", 0.07, 0.08),
        ("model", "gen-2026-11", "system", 0.07, 0.075),
    )
)
SUSPECTS = ({**SUSPECTS[0], "share_before": 0.0, "share_after": 0.7}, *SUSPECTS[1:])  # as Suspect.as_dict has them
MIX = Alert(
    alert_id="a-mix-parcel",
    route="parcel-status",
    kind=MIX_KIND,
    severity="warning",
    labels={},
    window=45,
    pending_since=START + timedelta(minutes=25),
    starts_at=START + timedelta(minutes=28),
    rate=0.091,
    rate_interval=Interval(0.072, 0.113),
    baseline=0.043,
    baseline_interval=Interval(0.038, 0.049),
    expected=0.046,
    expected_basis=SEASONAL,
    delta=0.045,
    mix_effect=0.032,
    rate_effect=0.013,
    mix_slice=SLICE,
    claims=1234,
    onset=START + timedelta(minutes=22),
    driving_verdict="unsupported",
    suspect_changes=SUSPECTS,
)
BELOW = Alert(
    alert_id="a-below-legal",
    route="legal-terms",
    kind=DRIFT_KIND,
    severity="warning",
    labels={},
    window=30,
    pending_since=START + timedelta(minutes=30),
    rate=0.118,
    rate_interval=Interval(0.09, 0.15),
    baseline=0.125,
    baseline_interval=Interval(0.11, 0.14),
    expected=0.121,
    expected_basis=TRAILING,
    delta=-0.003,
    mix_effect=0.002,
    rate_effect=-0.005,
    claims=410,
)


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    alerts = alert_repository(world[0].store)
    for alert in (MIX, BELOW):
        alerts.save(alert)
    alerts.record_transition(replace(MIX, starts_at=None))  # pending at 08:25, then firing at 08:28
    alerts.record_transition(MIX)
    return client_for(world[0])


@pytest.fixture
def cli(client, monkeypatch):
    return cli_at(client, monkeypatch, TOKEN, WIDTH)


def words(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())


# -- the API carries the fields every surface reads ------------------------------------------
def test_the_api_json_has_the_expectation_and_both_effects(client):
    shown = client.get(f"/api/alerts/{MIX.alert_id}").json()
    assert (shown["expected"], shown["expected_basis"], shown["mix_slice"]) == (0.046, SEASONAL, SLICE)
    assert (shown["delta"], shown["mix_effect"], shown["rate_effect"]) == (0.045, 0.032, 0.013)
    assert [t["state"] for t in shown["transitions"]] == ["pending", "firing"]
    listed = {a["alert_id"]: a for a in client.get("/api/alerts").json()}
    assert listed[BELOW.alert_id]["delta"] == -0.003 and listed[BELOW.alert_id]["kind"] == DRIFT_KIND
    assert listed["a-billing"]["expected"] == 0.06 and listed["a-billing"]["mix_effect"] is None


# -- claimwatch alerts show --------------------------------------------------------------------
def test_alerts_show_reads_the_rate_against_the_expectation_and_splits_the_rise(cli):
    text = cli("alerts", "show", MIX.alert_id)
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    flat = " ".join(text.split())
    assert lines[0].split() == ["alert", MIX.alert_id] and lines[1].split() == ["route", "parcel-status"]
    assert "kind mix shift — a change in the mix of questions; warning, does not page" in flat
    assert "state firing since 2026-11-21 08:28 UTC" in flat and "severity warning" in flat
    assert "acked no" in flat and "silenced no" in flat
    assert "rate 9.1% (95% interval 7.2%–11.3%)" in flat
    assert f"expected 4.6%: {SEASONAL}" in flat
    assert "baseline 4.3% (95% interval 3.8%–4.9%), the trailing level" in flat
    assert "rise +4.5 pts over the expectation = mix effect +3.2 pts / rate effect +1.3 pts" in flat
    assert f"mix slice {SLICE}" in flat
    assert "onset 2026-11-21 08:22 UTC" in flat and "window 45 min, 1,234 claims" in flat
    assert "driven by unsupported claims" in flat
    assert (
        "suspects 1. retriever=bm25-v3 (system change, share of answers 0% -> 70%), rate 5.0% -> 11.0% "
        "2. corpus=2026-11-20 (evidence "
        "change), rate 6.0% -> 9.0% 3. prompt=p-7 (system change), rate 7.0% -> 8.0% +1 more (-o json)"
    ) in flat
    assert "gen-2026-11" not in flat  # the top three only
    assert (
        "transitions 2026-11-21 08:25 UTC pending: rate 9.1%, expected 4.6%, rise +4.5 pts "
        "2026-11-21 08:28 UTC firing: rate 9.1%, expected 4.6%, rise +4.5 pts"
    ) in flat
    for label in ("kind", "rate", "expected", "baseline", "rise", "mix slice", "suspects", "transitions"):
        assert any(line.startswith(label + "  ") for line in lines), label


def test_alerts_show_a_regression_below_its_expectation_and_a_rise_without_its_split(cli):
    flat = " ".join(cli("alerts", "show", BELOW.alert_id).split())
    assert "kind regression state pending since 2026-11-21 08:30 UTC" in flat
    assert f"expected 12.1%: {TRAILING}" in flat
    assert "rise -0.3 pts over the expectation = mix effect +0.2 pts / rate effect -0.5 pts" in flat
    assert "mix slice" not in flat and "transitions" not in flat and "suspects" not in flat
    billing = " ".join(cli("alerts", "show", "a-billing").split())
    assert "expected 6.0%: trailing 24 h level" in billing
    assert "rise +7.0 pts over the expectation" in billing and "mix effect" not in billing


def test_alerts_show_json_is_the_apis(cli, client):
    expected = client.get(f"/api/alerts/{MIX.alert_id}").json()
    for flag in (["-o", "json"], ["--json"]):
        shown = orjson.loads(cli("alerts", "show", MIX.alert_id, *flag))
        assert shown == expected and shown["mix_effect"] == 0.032 and shown["expected_basis"] == SEASONAL


# -- claimwatch alerts list --------------------------------------------------------------------
def test_alerts_list_has_kind_and_expected_and_signs_the_delta(cli):
    mix = cli("alerts", "list", "--route", "parcel-status").splitlines()
    assert mix[0].split()[:7] == ["ALERT", "ROUTE", "STATE", "KIND", "RATE", "EXPECTED", "DELTA"]
    assert re.search(r"^a-mix-parcel\s+parcel-status\s+firing\s+mix shift\s+9\.1%\s+4\.6%\s+\+4\.5 pts\b", mix[1]), mix
    below = cli("alerts", "list", "--route", "legal-terms").splitlines()
    assert re.search(
        r"^a-below-legal\s+legal-terms\s+pending\s+regression\s+11\.8%\s+12\.1%\s+-0\.3 pts\b", below[1]
    ), below
    assert "+-" not in below[1]
    everything = cli("alerts", "list").splitlines()
    assert all(len(line) <= WIDTH for line in everything) and "BASELINE" not in everything[0]  # wide only
    wide = cli("alerts", "list", "-o", "wide").splitlines()
    assert wide[0].split()[-1] == "BASELINE"
    billing = next(line for line in wide if line.startswith("a-billing "))
    assert re.search(r"billing-faq\s+firing\s+regression\s+13\.0%\s+6\.0%\s+\+7\.0 pts\b.*\s6\.0%$", billing), billing


# -- the pages ---------------------------------------------------------------------------------
def card(page: str, alert_id: str, tag: str) -> str:
    start = page.index(f'id="{alert_id}"') if tag == "article" else page.index(f'href="/alerts/{alert_id}"')
    start = page.rindex(f"<{tag}", 0, start + 1)
    return page[start : page.index(f"</{tag}>", start)]


def test_the_alerts_page_shows_the_expectation_the_split_and_the_mix_shift(client):
    page = client.get("/alerts").text
    mix = card(page, MIX.alert_id, "article")
    assert '<span class="badge mix-shift">mix shift</span>' in mix and f'id="{MIX.alert_id}-expected"' in mix
    text = words(mix)
    assert "Mix shift, does not page:" in text
    assert f"Expected 4.6% ({SEASONAL}); rise +4.5 pts = mix +3.2 pts + rate +1.3 pts" in text
    assert f"The slice whose share moved most: {SLICE}." in text
    assert "9.1% (7.2%–11.3%) over 1,234 claims; trailing baseline 4.3% (3.8%–4.9%)" in text
    below = card(page, BELOW.alert_id, "article")
    assert '<span class="badge regression">regression</span>' in below and "mix-shift" not in below
    text = words(below)
    assert f"Expected 12.1% ({TRAILING}); rise -0.3 pts = mix +0.2 pts + rate -0.5 pts" in text
    assert "does not page" not in text and "slice" not in text
    billing = words(card(page, "a-billing", "article"))
    assert "Expected 6.0% (trailing 24 h level); rise +7.0 pts." in billing


def test_the_route_page_shows_the_same_figures(client):
    page = client.get("/routes/parcel-status")
    assert page.status_code == 200
    item = card(page.text, MIX.alert_id, "li")
    assert '<span class="badge mix-shift">mix shift</span>' in item and f'id="{MIX.alert_id}-expected"' in item
    text = words(item)
    assert "Mix shift, does not page:" in text
    assert f"Expected 4.6% ({SEASONAL}); rise +4.5 pts = mix +3.2 pts + rate +1.3 pts" in text
    assert f"The slice whose share moved most: {SLICE}." in text
    below = words(card(client.get("/routes/legal-terms").text, BELOW.alert_id, "li"))
    assert "rise -0.3 pts = mix +0.2 pts + rate -0.5 pts" in below and "does not page" not in below
