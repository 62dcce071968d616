"""SLOs on every surface over one store: GET /api/slos and /api/slos/{name}, `claimwatch slo list` and `slo show`
at 80 columns, and /metrics give the same budget and burn figures; an SLO with too little traffic says why instead
of a number; an unknown one is a 404 naming the SLOs there are."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from services.alerts.evaluation.slo_watch import SloWatch
from services.api.app import create_api
from services.api.auth import new_token
from services.app.compose import build
from services.app.settings import Settings
from services.contract.decode import Decoder
from services.core.numbers import pct
from services.store.writer import EventWriter
from tests.support.cli import cli_at

TOKEN, TOKEN_HASH = new_token()
START = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)
HOURS = 8


def traffic() -> list:
    """Eight hours on billing-faq: 10 answers of 4 claims a minute; one claim in 40 failed (2.5%), except in the
    last hour, where one in four did (25%). shipping-faq, outside the SLO, fails every claim."""
    decoder, events, n = Decoder(), [], 0
    for minute in range(HOURS * 60):
        late = minute >= (HOURS - 1) * 60
        for k in range(10):
            failed = late or k == 0
            verdicts = ["contradicted"] + ["supported"] * 3 if failed else ["supported"] * 4
            for route, claims in (("billing-faq", verdicts), ("shipping-faq", ["unsupported"])):
                n += 1
                raw = {
                    "schema": "claimwatch.verdict/v1",
                    "event_id": f"e-{n}",
                    "trace_id": f"t-{n}",
                    "observed_at": (START + timedelta(minutes=minute, seconds=k)).isoformat(),
                    "route": route,
                    "claims": [{"verdict": v} for v in claims],
                }
                events.append(decoder.decode(orjson.dumps(raw)))
    return events


@pytest.fixture
def surfaces(store, monkeypatch, tmp_path):
    EventWriter(store).write(traffic())
    settings = Settings(
        clickhouse=f"chdb:{tmp_path / 'unused'}",
        api={"token_hashes": [TOKEN_HASH]},
        slo=[
            {"name": "billing-faithfulness", "routes": "billing-*", "objective": 0.95, "window": "28d"},
            {"name": "nothing-yet", "routes": "checkout-*", "objective": 0.99, "window": "7d"},
            {"name": "billing-strict", "routes": "billing-*", "objective": 0.985, "window": "7d"},
        ],
        owners=[{"team": "billing-oncall", "route": "billing-*"}],
    )
    components = build(settings, store)
    client = TestClient(create_api(components))
    return client, cli_at(client, monkeypatch, TOKEN, 80), components


def test_the_budget_and_the_burn_rates_agree_on_every_surface(surfaces):
    client, cli, _ = surfaces
    [billing, empty, _] = client.get("/api/slos").json()
    # 7 hours at 2.5% of claims failed and one at 25%: (7 x 60 x 2.5% + 60 x 25%) / 480 = 5.3125% of claims,
    # against a budget of 5%: 106.25% spent.
    assert billing["bad_share"] == pytest.approx((7 * 60 * 0.025 + 60 * 0.25) / 480)
    assert billing["budget_spent"] == pytest.approx(billing["bad_share"] / 0.05)
    assert billing["budget_remaining"] == pytest.approx(1 - billing["budget_spent"])
    assert billing["at"] == (START + timedelta(minutes=HOURS * 60 - 1)).isoformat()
    assert billing["team"] == "billing-oncall" and billing["units"] == HOURS * 60 * 40
    burns = {b["window"]: b for b in billing["burns"]}
    assert burns["1h"]["rate"] == pytest.approx(0.25 / 0.05)  # the last hour: 5 times the budget's pace
    assert burns["5m"]["rate"] == pytest.approx(5.0)
    assert burns["6h"]["rate"] == pytest.approx((5 * 60 * 0.025 + 60 * 0.25) / 360 / 0.05)
    assert burns["3d"]["rate"] is None and burns["3d"]["reason"] == "too little history: 8h of 3d"
    assert (empty["at"], empty["budget_spent"], empty["burns"]) == (None, None, [])  # no checkout traffic at all
    # The CLI prints the API's figures.
    listed = cli("slo", "list")
    row = next(line for line in listed.splitlines() if line.startswith("billing-faithfulness"))
    assert f"overspent by {pct(-billing['budget_remaining'])}" in row and "5.0x" in row
    assert "no traffic yet" in next(line for line in listed.splitlines() if line.startswith("nothing-yet"))
    assert "slo show billing-faithfulness" in listed.splitlines()[-1]
    shown = cli("slo", "show", "billing-faithfulness")
    assert f"{pct(billing['budget_spent'])} of the budget" in shown
    assert "too little history: 8h of 3d" in shown
    assert all(len(line) <= 80 for line in shown.splitlines())
    # /metrics: the same figures.
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
    remaining = {s.labels["slo"]: s.value for s in families["claimwatch_slo_error_budget_remaining"].samples}
    assert set(remaining) == {"billing-faithfulness", "billing-strict"}  # nothing-yet has no traffic: no sample
    assert remaining["billing-faithfulness"] == pytest.approx(billing["budget_remaining"])
    rates = {(s.labels["slo"], s.labels["window"]): s.value for s in families["claimwatch_slo_burn_rate"].samples}
    assert rates[("billing-faithfulness", "1h")] == pytest.approx(burns["1h"]["rate"])
    assert ("billing-faithfulness", "3d") not in rates  # a window that cannot tell has no sample


def test_one_slo_in_full_and_an_unknown_one(surfaces):
    client, _, _ = surfaces
    detail = client.get("/api/slos/billing-faithfulness").json()
    assert detail["burndown"][-1][1] == pytest.approx(detail["budget_remaining"])
    assert detail["burndown"][0][1] > detail["burndown"][-1][1]  # it only goes down
    # No issues were clustered here: all of the spend is in no issue yet.
    assert [s["issue_id"] for s in detail["spenders"]] == [None]
    assert detail["spenders"][0]["budget_spent"] == pytest.approx(detail["budget_spent"])
    missing = client.get("/api/slos/nope")
    assert missing.status_code == 404
    assert "billing-faithfulness, billing-strict, nothing-yet" in missing.json()["detail"]
    assert [r["route"] for r in detail["routes_spending"]] == ["billing-faq"]  # shipping-faq is not billing-*
    assert detail["routes_spending"][0]["budget_spent"] == pytest.approx(detail["budget_spent"])


def test_a_burn_alert_pages_with_a_runbook_that_says_what_spends_the_budget(surfaces):
    client, cli, components = surfaces
    strict = next(s for s in components.settings.slo if s.name == "billing-strict").slo()
    end = START + timedelta(minutes=HOURS * 60 - 1)
    watch = SloWatch([strict], components.repos.rates, components.repos.alerts, lambda: end, lambda s: {})
    watch.last_minute = end - timedelta(hours=2)  # as a cycle that has run all along
    [page] = watch.evaluate(end)
    # 25% of claims failed in the last hour against a 1.5% budget: 16.7 times its pace, over 1h and 5m alike.
    assert (page.severity, page.recorded_state, page.labels["slo"]) == ("critical", "firing", "billing-strict")
    # Before: 2.5% / 1.5% = 1.67x. The 1h burn passes 14.4 once (16.67k + 1.67(60 - k)) / 60 > 14.4: k > 50.9, so
    # at the 51st minute of the last hour.
    assert page.transition_at == START + timedelta(minutes=(HOURS - 1) * 60 + 50)
    shown = client.get(f"/api/alerts/{page.alert_id}").json()
    runbook = shown.get("runbook") or ""
    assert runbook, shown.get("detail", sorted(shown))
    detail = client.get("/api/slos/billing-strict").json()
    assert f"{pct(detail['budget_spent'])} of the budget spent" in runbook
    assert "1h: 16.7x" in runbook and "3d: no figure (too little history: 8h of 3d)" in runbook
    assert "billing-faq:" in runbook and "not in an issue yet" in runbook
    assert "slo show billing-strict" in runbook and "**page** rule" in runbook
    listed = cli("slo", "list")
    assert "critical firing" in next(line for line in listed.splitlines() if line.startswith("billing-strict"))


def test_the_slo_pages_show_the_apis_figures(surfaces):
    client, _, _ = surfaces
    listed = client.get("/slos")
    assert listed.status_code == 200
    billing = client.get("/api/slos/billing-faithfulness").json()
    assert f"overspent by {pct(-billing['budget_remaining'])}" in listed.text
    order = [listed.text.index(n) for n in ("billing-strict", "billing-faithfulness", "nothing-yet")]
    assert order == sorted(order)  # least budget left first; no traffic last
    page = client.get("/slos/billing-faithfulness")
    assert page.status_code == 200
    assert f"{pct(billing['budget_spent'])} of the budget spent" in page.text
    assert 'data-src="/api/slos/billing-faithfulness"' in page.text  # the burn-down chart's data
    assert "too little history: 8h of 3d" in page.text and "not in an issue yet" in page.text
    assert client.get("/slos/nope").status_code == 404


def test_the_overview_gives_each_route_under_an_slo_its_budget(surfaces):
    client, _, _ = surfaces
    strict = client.get("/api/slos/billing-strict").json()  # the covering SLO with least budget left
    page = client.get("/", params={"window": "all"}).text
    row = page[page.index('href="/routes/billing-faq"') :].split("</tr>")[0]
    assert (
        f'<a href="/slos/billing-strict" title="SLO billing-strict">overspent by {pct(-strict["budget_remaining"])}</a>'
        in row
    )
    shipping = page[page.index('href="/routes/shipping-faq"') :].split("</tr>")[0]
    assert "/slos/" not in shipping  # no SLO covers shipping-faq
