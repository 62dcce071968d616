"""The monitor's own input alerts (issue 21) on every surface, in their own units: `claimwatch alerts list` and
`alerts show` at 80 columns, the API's detail with its runbook, the alerts page card with the runbook, the route
page, and the rules (`claimwatch alerts rules`, GET /api/alerts/rules, /alerts/rules).

On the API test's store (real chDB, simulated traffic) with three more alerts: hr-policy fell silent (events a
minute), product-search's events are being dead-lettered, legal-terms abstains more while its hallucination rate
fell (the gaming case); and a dead-letter alert on a route whose name and sample are hostile HTML."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import orjson
import pytest
from click.testing import CliRunner

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import ABSTENTION_KIND, DRIFT_KIND, REJECTED_KIND, SILENT_KIND
from services.alerts.lifecycle.records import alert_repository
from services.alerts.oncall import quality
from services.alerts.oncall.rules import RULE_KINDS
from services.app.cli import main
from services.core.command import cli_command
from tests.support.cli import answer_http_with
from tests.unit.api.test_api import HTML_ROUTE, START, TOKEN, client_for, world  # noqa: F401  (world is a fixture)

WIDTH = 80
GAMING = (
    "the hallucination rate fell from 7.8% to 7.1% at the same time: abstaining may be hiding failures "
    "(the gaming case)"
)
EVIL_REASON = '<script>alert("dlq")</script> {{ 7*7 }}'
AT = dict(
    labels={"service": "claimwatch"},
    pending_since=START + timedelta(minutes=30),
    starts_at=START + timedelta(minutes=32),
    onset=START + timedelta(minutes=29),
)
SILENT = Alert(
    alert_id="a-silent-hr",
    route="hr-policy",
    kind=SILENT_KIND,
    severity="critical",
    window=45,
    rate=0.4,
    expected=41.2,
    baseline=41.2,
    delta=-40.8,
    claims=18,
    unit="per_minute",
    expected_basis="time of day: this hour's events per minute over 3.0 days",
    details={"received": 18, "expected_events": 1854.0},
    **AT,
)
REJECTED = Alert(
    alert_id="a-rejected-shop",
    route="product-search",
    kind=REJECTED_KIND,
    severity="critical",
    window=10,
    rate=0.35,
    expected=0.01,
    baseline=0.01,
    delta=0.34,
    claims=1000,
    expected_basis="the route's usual dead-lettered share of its events over 52,000 events",
    details={
        "rejected": 350,
        "received": 1000,
        "top_rule": "claims.verdict.unknown",
        "top_rule_count": 341,
        "sample_reason": "claims[0].verdict 'halluc' is not a verdict",
        "sample_source": "claimwatch.verdicts/0/1234",
    },
    **AT,
)
ABSTAINING = Alert(
    alert_id="a-abstain-legal",
    route="legal-terms",
    kind=ABSTENTION_KIND,
    severity="warning",
    window=30,
    rate=0.31,
    expected=0.12,
    baseline=0.12,
    delta=0.19,
    claims=620,
    expected_basis="the route's usual abstained share over 48,000 answers",
    details={
        "served_share": 0.62,
        "served_share_before": 0.81,
        "hallucination_rate": 0.071,
        "hallucination_rate_before": 0.078,
        "hallucination_fell": True,
    },
    **AT,
)
HOSTILE = Alert(
    alert_id="a-rejected-html",
    route=HTML_ROUTE,
    kind=REJECTED_KIND,
    severity="critical",
    window=10,
    rate=0.5,
    expected=0.0,
    baseline=0.0,
    delta=0.5,
    claims=40,
    details={
        "rejected": 20,
        "received": 40,
        "top_rule": "<b>rule</b>",
        "top_rule_count": 20,
        "sample_reason": EVIL_REASON,
        "sample_source": "claimwatch.verdicts/0/9",
    },
    **AT,
)
INPUT = (SILENT, REJECTED, ABSTAINING, HOSTILE)
# a regression on hr-policy that fired before the route fell silent: inhibited by SILENT (notify.inhibit_rules)
REGRESSION_HR = Alert(
    alert_id="a-regress-hr",
    route="hr-policy",
    kind=DRIFT_KIND,
    severity="warning",
    window=30,
    rate=0.12,
    expected=0.06,
    baseline=0.06,
    delta=0.06,
    claims=900,
    labels={"service": "claimwatch"},
    pending_since=START + timedelta(minutes=20),
    starts_at=START + timedelta(minutes=22),
)


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    alerts = alert_repository(world[0].store)
    for alert in (*INPUT, REGRESSION_HR):
        alerts.save(alert)
    alerts.record_transition(SILENT)
    return client_for(world[0])


@pytest.fixture
def cli(client, monkeypatch):
    api = answer_http_with(client, monkeypatch, TOKEN)

    def run(*args: str, columns: int = WIDTH) -> str:
        result = CliRunner(env={"COLUMNS": str(columns)}).invoke(main, [*args, "--api", "http://testserver"], obj=api)
        assert result.exit_code == 0, result.output
        return result.output

    return run


def fits(text: str, width: int = WIDTH) -> list[str]:
    lines = text.splitlines()
    assert lines and all(len(line) <= width for line in lines), max(lines, key=len)
    return lines


def flat(text: str) -> str:
    return " ".join(text.split())


def words(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())


def prose(markdown_lines: list[str]) -> list[str]:
    """The runbook's lines outside its code blocks (commands are kept whole, whatever their length)."""
    out, code = [], False
    for line in markdown_lines:
        code = code != line.startswith("```")
        if not code and not line.startswith("```"):
            out.append(line)
    return out


# -- claimwatch alerts list ---------------------------------------------------------------------------
def test_alerts_list_shows_each_kind_in_its_unit_at_80_columns(cli):
    silent = fits(cli("alerts", "list", "--route", "hr-policy"))
    assert silent[0].split()[:4] == ["ALERT", "ROUTE", "STATE", "KIND"]
    assert re.search(r"^a-silent-hr\s+hr-policy\s+firing\s+route silent\s+.*-40\.8/min$", silent[1]), silent
    wide = cli("alerts", "list", "--route", "hr-policy", columns=120).splitlines()
    assert re.search(r"route silent\s+0\.4/min\s+41\.2/min\s+-40\.8/min\b", wide[1]), wide
    shop = cli("alerts", "list", "--route", "product-search", columns=120).splitlines()
    assert re.search(r"events rejected\s+35\.0%\s+1\.0%\s+\+34\.0 pts\b", shop[1]), shop
    legal = cli("alerts", "list", "--route", "legal-terms", columns=120).splitlines()
    assert re.search(r"abstention rise\s+31\.0%\s+12\.0%\s+\+19\.0 pts\b", legal[1]), legal
    everything = fits(cli("alerts", "list"))
    for alert in INPUT:
        assert any(alert.alert_id in line for line in everything), alert.alert_id
    assert "4120.0%" not in " ".join(everything)  # events a minute are never read as a share


# -- claimwatch alerts show ---------------------------------------------------------------------------
def test_alerts_show_a_silent_route_received_against_expected_with_its_runbook(cli):
    text = cli("alerts", "show", SILENT.alert_id)
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in prose(lines)), max(prose(lines), key=len)
    said = flat(text)
    assert "kind route silent — its events fell far below what its time of day predicts; pages" in said
    assert "rate 0.4/min expected 41.2/min: time of day: this hour's events per minute over 3.0 days" in said
    assert "change -40.8/min against the expectation" in said and "received 18 events in 45 min; 1,854 expected" in said
    assert "window 45 min, 18 events" in said and "baseline" not in said.split("Route silent: hr-policy")[0]
    assert "firing: rate 0.4/min, expected 41.2/min, change -40.8/min" in said
    # the runbook follows, rendered (no raw Markdown), with the exact silence for a retired route
    assert "Route silent: hr-policy" in said and "First checks" in said
    assert "**" not in text and "\\_" not in text and "# " not in text
    assert (
        "claimwatch alerts silence --match route=hr-policy --match kind=route_silent \\\n"
        "  --duration 90d --comment 'route retired'"
    ) in text


def test_alerts_show_rejected_events_names_the_rule_a_sample_and_the_dlq_command(cli):
    text = cli("alerts", "show", REJECTED.alert_id)
    assert all(len(line) <= WIDTH for line in prose(text.splitlines()))
    said = flat(text)
    assert "kind events rejected — more of its events are dead-lettered (broke the contract); pages" in said
    assert "rate 35.0% expected 1.0%: the route's usual dead-lettered share" in said
    assert "rejected 350 of 1,000 events dead-lettered" in said
    assert "top rule claims.verdict.unknown (341 events)" in said
    assert "sample claims[0].verdict 'halluc' is not a verdict at claimwatch.verdicts/0/1234" in said
    assert f"list them {cli_command()} dlq --route product-search" in said  # as this shell runs it
    assert "claimwatch dlq --route product-search --samples 3" in text  # in the runbook's commands


def test_alerts_show_an_abstention_rise_says_the_gaming_case_plainly(cli):
    text = cli("alerts", "show", ABSTAINING.alert_id)
    assert all(len(line) <= WIDTH for line in prose(text.splitlines()))
    said = flat(text)
    assert "rate 31.0% expected 12.0%" in said and "change +19.0 pts against the expectation" in said
    assert "served 62.0% of answers (81.0% before)" in said
    assert f"meanwhile {GAMING}" in said
    assert "window 30 min, 620 answers" in said and "severity warning" in said


def test_alerts_show_json_carries_unit_details_and_the_runbook(cli, client):
    shown = orjson.loads(cli("alerts", "show", SILENT.alert_id, "-o", "json"))
    assert shown == client.get(f"/api/alerts/{SILENT.alert_id}").json()
    assert shown["unit"] == "per_minute" and shown["details"] == {"received": 18, "expected_events": 1854.0}
    assert shown["runbook"].startswith("# Route silent: hr-policy\n")
    assert client.get("/api/alerts/a-billing").json()["runbook"] is None  # a drift alert's runbooks are its issues'


def test_hostile_route_and_dlq_sample_are_inert_in_the_cli_and_the_runbook(cli, client):
    runbook = client.get(f"/api/alerts/{HOSTILE.alert_id}").json()["runbook"]
    text = "\n".join(prose(runbook.splitlines()))  # commands are shell-quoted, in code blocks
    assert "<script>" not in text and "\\<script\\>" in text and "49" not in runbook
    assert "claimwatch dlq --route '<script>alert(\"route\")</script>' --samples 3" in runbook
    text = cli("alerts", "show", HOSTILE.alert_id)
    assert EVIL_REASON in flat(text)  # the terminal shows stored text as text


# -- the pages -------------------------------------------------------------------------------------------
def card(page: str, alert_id: str) -> str:
    """The alert's card on the alerts page, up to the next card (its runbook is an article of its own)."""
    start = page.index(f'<article class="card alert" id="{alert_id}"')
    end = page.find('<article class="card alert"', start + 1)
    return page[start : end if end > 0 else page.index("</section>", start)]


def test_the_alerts_page_shows_each_kind_in_its_unit_with_its_runbook(client):
    page = client.get("/alerts").text
    silent = words(card(page, SILENT.alert_id))
    assert "route silent" in silent and "0.4/min over 45 min and 18 events." in silent
    assert "Expected 41.2/min (time of day: this hour's events per minute over 3.0 days); change -40.8/min." in silent
    assert "Received 18 events in 45 min; 1,854 expected." in silent and "trailing baseline" not in silent
    assert "Runbook: what to check first" in silent and "--match kind=route_silent" in silent
    rejected = words(card(page, REJECTED.alert_id))
    assert "35.0% over 10 min and 1000 events." in rejected and "change +34.0 pts" in rejected
    assert "Top rule: claims.verdict.unknown (341 events)." in rejected
    assert "List them: claimwatch dlq --route product-search" in rejected
    assert 'href="/api/dlq?route=product-search&amp;samples=3"' in card(page, REJECTED.alert_id)
    gaming = card(page, ABSTAINING.alert_id)
    assert f'id="{ABSTAINING.alert_id}-gaming"' in gaming and f"Warning: {GAMING}." in words(gaming)
    assert "Served: 62.0% of answers (81.0% before)." in words(gaming)
    assert '<a href="/alerts/rules">' in page


def test_hostile_text_in_an_input_alert_is_inert_on_the_alerts_page(client):
    page = client.get("/alerts").text
    hostile = card(page, HOSTILE.alert_id)
    assert "<script>" not in hostile and "<b>rule</b>" not in hostile
    assert "&lt;script&gt;alert(&#34;dlq&#34;)&lt;/script&gt;" in hostile and "{{ 7*7 }}" in hostile


def test_the_route_page_shows_the_alert_in_its_unit(client):
    item = words(client.get("/routes/hr-policy").text)
    assert "0.4/min over 45 min and 18 events" in item and "Received 18 events in 45 min" in item
    assert "trailing baseline 4120" not in item


def test_the_route_page_baseline_is_a_rate_never_an_input_alerts_count_or_share(client):
    """An input-health alert's baseline is events a minute or a dead-lettered share: the chart's dashed line and
    the page's "baseline" sentence are claim-level rates, so they never take it."""
    for route, alert in (("hr-policy", SILENT), ("product-search", REJECTED), ("legal-terms", ABSTAINING)):
        detail = client.get(f"/api/routes/{route}").json()
        assert detail["baseline"] is None or alert.alert_id not in detail["baseline"]["source"], route
        assert detail["baseline"] is None or detail["baseline"]["rate"] <= 1.0, route
        assert f"baseline {alert.baseline * 100:.1f}%" not in words(client.get(f"/routes/{route}").text), route


def test_a_notification_link_lands_on_the_alert(client):
    page = client.get(f"/alerts/{SILENT.alert_id}", follow_redirects=False)
    assert page.status_code == 200 and SILENT.alert_id in page.text  # the alert's own page, with its own runbook
    assert 'class="runbook-body"' in page.text and "Issues behind it" not in page.text  # no issues explain silence
    assert client.get("/alerts/a-nope").status_code == 404


# -- the rules ----------------------------------------------------------------------------------------------
MEASURED = {
    "route_silent": {
        "false_alarms_per_route_per_60_days": 0.05,
        "median_delay_minutes": {"outage": 6.0},
        "measured_by": "python bench/input_health.py --write",
        "measured_on": "2026-11-24",
        "note": "200 routes x 60 days",
    }
}


@pytest.fixture
def measured(tmp_path, monkeypatch):
    """A bench has measured route_silent only; every other kind is not measured."""
    path = tmp_path / "rule_quality.json"
    path.write_text(orjson.dumps(MEASURED).decode())
    monkeypatch.setattr(quality, "QUALITY_FILE", path)


def test_the_rules_api_lists_every_kind_with_thresholds_in_force_and_no_invented_figures(client, measured):
    found = client.get("/api/alerts/rules").json()
    assert [r["kind"] for r in found] == list(RULE_KINDS)
    by_kind = {r["kind"]: r for r in found}
    assert by_kind[SILENT_KIND]["pages"] and by_kind[REJECTED_KIND]["pages"]
    assert not by_kind[ABSTENTION_KIND]["pages"] and not by_kind["mix_shift"]["pages"]
    drift = by_kind["hallucination_rate_rise"]
    assert drift["severities"] == ["warning", "critical"] and drift["severity"] == "warning; critical from +4 pts"
    assert {"text": "rise ≥ +2 pts over the expectation", "setting": "drift.threshold", "value": 0.02} in drift[
        "thresholds"
    ]
    assert any(
        t["setting"] == "drift.input_health.silent_ratio" and t["value"] == 0.2
        for t in by_kind[SILENT_KIND]["thresholds"]
    )
    assert {k: by_kind[SILENT_KIND][k] for k in MEASURED[SILENT_KIND]} == MEASURED[SILENT_KIND]
    for kind in set(RULE_KINDS) - {SILENT_KIND}:  # nothing written: nothing shown as measured
        assert (
            by_kind[kind]["false_alarms_per_route_per_60_days"] is None
            and by_kind[kind]["median_delay_minutes"] is None
        )


def test_claimwatch_alerts_rules_fits_80_columns_and_says_not_measured(cli, client, measured):
    text = cli("alerts", "rules")
    lines = fits(text)
    header = next(line for line in lines if line.startswith("KIND"))
    assert header.split() == ["KIND", "SEVERITY", "PAGES", "FALSE", "ALARMS", "MEDIAN", "DELAY"]
    table = lines[lines.index(header) + 1 : lines.index("")]  # the table, then a block per kind
    rows = {line.split()[0]: line for line in table if not line.startswith(" ")}
    assert set(rows) == set(RULE_KINDS)
    assert re.search(r"^route_silent\s+critical\s+yes\s+0\.075\s+outage: 6 min$", rows["route_silent"])  # 0.05 / 60 d
    assert re.search(r"^events_rejected\s+critical\s+yes\s+not measured\s+not measured$", rows["events_rejected"])
    assert re.search(r"^abstention_rise\s+warning\s+no\s+not measured\b", rows["abstention_rise"])
    assert re.search(r"^hallucination_rate_rise\s+warning/critical\s+yes\b", rows["hallucination_rate_rise"])
    drift_cell = table[table.index(rows["hallucination_rate_rise"]) + 1]
    assert drift_cell.strip() == "(promised 1)"  # its thresholds derive from the stated rate; none measured here
    said = flat(text)
    assert "thresholds ≤ 20% of the expected events arrived (drift.input_health.silent_ratio)" in said
    assert (
        "measured by python bench/input_health.py --write on 2026-11-24: false alarms per route per 90 days "
        "0.075; median delay outage: 6 min; 200 routes x 60 days"
    ) in said
    unmeasured = [line for line in lines if line.startswith("  measured    not measured")]
    assert len(unmeasured) == len(RULE_KINDS) - 1  # no figure was written for them: none is shown
    assert orjson.loads(cli("alerts", "rules", "-o", "json")) == client.get("/api/alerts/rules").json()


def test_the_rules_page_lists_every_kind(client, measured):
    page = client.get("/alerts/rules")
    assert page.status_code == 200
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())  # table cells apart
    for kind in RULE_KINDS:
        assert f'id="rule-{kind}"' in page.text
    assert "route_silent critical yes none stated 0.075 outage: 6 min" in text  # 0.05 per 60 days
    assert "events_rejected critical yes none stated not measured not measured" in text
    assert "hallucination_rate_rise warning; critical from +4 pts yes 1 not measured" in text
    assert "rise ≥ +2 pts over the expectation drift.threshold" in text


# -- inhibition (issue 53) -------------------------------------------------------------------------------------
INHIBITED_BY = f"inhibited by {SILENT.alert_id} (route_silent on hr-policy)"


def test_a_regression_on_a_silent_route_is_inhibited_by_its_route_silent_alert_in_the_api(client):
    listed = {a["alert_id"]: a for a in client.get("/api/alerts", params={"route": "hr-policy"}).json()}
    regression, silent = listed[REGRESSION_HR.alert_id], listed[SILENT.alert_id]
    assert (regression["state"], regression["state_text"]) == ("firing", "firing·inhibited")
    assert regression["inhibited_by"] == [SILENT.alert_id]
    assert regression["inhibitors"] == [
        {
            "alert_id": SILENT.alert_id,
            "kind": SILENT_KIND,
            "route": "hr-policy",
            "starts_at": AT["starts_at"].isoformat(),
        }
    ]
    assert (silent["state_text"], silent["inhibited_by"]) == ("firing", [])  # the source is not inhibited
    shown = client.get(f"/api/alerts/{REGRESSION_HR.alert_id}").json()
    assert (shown["state_text"], shown["inhibited_by"]) == ("firing·inhibited", [SILENT.alert_id])
    # another route's regression (billing-faq, in the world) is not: the rule is equal on route
    billing = client.get("/api/alerts", params={"route": "billing-faq"}).json()
    assert billing and all(a["inhibited_by"] == [] and "inhibited" not in a["state_text"] for a in billing)


def test_the_cli_shows_the_inhibited_state_and_what_inhibits_it(cli):
    listed = fits(cli("alerts", "list", "--route", "hr-policy"))
    assert re.search(rf"^{REGRESSION_HR.alert_id}\s+hr-policy\s+firing·inhibited\s+regression\b", listed[2]), listed
    wide = cli("alerts", "list", "--route", "hr-policy", "-o", "wide", columns=250).splitlines()
    assert "INHIBITED BY" in wide[0] and SILENT.alert_id in wide[2].split(REGRESSION_HR.alert_id, 1)[1]
    said = flat(cli("alerts", "show", REGRESSION_HR.alert_id))
    assert f"inhibited by {SILENT.alert_id} (route_silent on hr-policy): not notified while it fires" in said
    assert "inhibited" not in flat(cli("alerts", "show", SILENT.alert_id)).split("runbook")[0].lower()


def test_the_alerts_page_and_route_page_cards_link_the_inhibiting_alert(client):
    link = f'inhibited by <a href="/alerts/{SILENT.alert_id}">{SILENT.alert_id}</a> (route_silent on hr-policy)'
    page = client.get("/alerts").text
    assert link in card(page, REGRESSION_HR.alert_id) and "firing·inhibited" in card(page, REGRESSION_HR.alert_id)
    assert "inhibited by" not in card(page, SILENT.alert_id)
    route = client.get("/routes/hr-policy").text
    assert link in route and INHIBITED_BY in words(route)


def test_the_overview_counts_an_inhibited_alert_apart_from_the_firing_ones(client):
    page = client.get("/", params={"window": "all", "route": "hr-policy"}).text
    row = page[page.index('href="/routes/hr-policy"') :]
    row = words(row[: row.index("</tr>")])
    assert "1 firing" in row and "1 inhibited" in row  # route_silent pages; the regression it inhibits does not


def test_the_rules_name_the_inhibition_rule(cli, client, measured):
    found = {r["kind"]: r for r in client.get("/api/alerts/rules").json()}
    (rule,) = found[DRIFT_KIND]["inhibition"]
    assert (rule["source_kinds"], rule["target_kinds"], rule["equal"]) == (
        [SILENT_KIND, REJECTED_KIND],
        [DRIFT_KIND, "mix_shift"],
        ["route"],
    )
    assert found[SILENT_KIND]["inhibition"] == [rule] and found[ABSTENTION_KIND]["inhibition"] == []
    text = flat(cli("alerts", "rules"))
    assert (
        "inhibition a firing route_silent or events_rejected alert inhibits the hallucination_rate_rise and mix_shift "
        "alerts with the same route: they show as inhibited and are not notified (notify.inhibit_rules)"
    ) in text
    page = words(client.get("/alerts/rules").text)
    assert f"Inhibition: {rule['text']}. notify.inhibit_rules" in page
