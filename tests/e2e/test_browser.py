"""The dashboard in a real browser against a real worker with simulated traffic.

Headless Chromium (Debian's, never a downloaded build) loads every page, acks a firing
alert, and walks the on-call journey: from the alert to the issue behind it, its runbook and
a trace, then promotes that trace and approves it on the eval page, each checked through
the API. The JS console stays free of errors; screenshots go to test-output/screenshots/.
"""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from playwright.sync_api import sync_playwright

from bench.processes import LIVE, WorkerProcess, send_all
from services.api.auth import new_token
from services.app.broker import create_topics
from services.client.simulate import Regression, Scenario, generate
from services.triage.webhook import verify
from tests.support.receiver import Receiver

TOKEN, TOKEN_HASH = new_token()
REVIEWER, REVIEWER_HASH = new_token()  # a second person, named: sign-off needs one
HOOK_SECRET = "e2e-secret-of-the-ticket-bridge"
CONFIG = f"""
[drift]
eval_interval_seconds = 1.0
watermark_seconds = 0
[drift.detector]
min_baseline_claims = 4000
[clustering]
interval_minutes = 0.5
lookback_hours = 0.5
[api]
token_hashes = ["{TOKEN_HASH}", "{REVIEWER_HASH} reviewer"]
"""
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def traffic(now: datetime, route_index: int, regressed: bool):
    """160 minutes of one route; a regressed one gets a new model that invents numbers (+10 points) at minute 130.

    The baseline moves in whole wall-clock hours (the current one is left out), so 130 calm minutes leave
    at least 70 in finished hours before the regression, whatever the minute of the hour the test starts."""
    route = Scenario.demo().routes[route_index]
    route = dataclasses.replace(route, per_minute=min(route.per_minute, 30))  # keeps the first clustering run short
    # Flat volume: with the diurnal curve a night-time run had too few claims to warm the baseline.
    calm = Scenario(routes=(route,), bad_fraction=0.0, duplicate_fraction=0.0, diurnal_amplitude=0.0)
    start = now - timedelta(minutes=160)
    if not regressed:
        return list(generate(calm, start, 160, seed=30 + route_index))
    bad = calm.replace(regressions=(Regression(route.name, 0, {"model": "gen-2026-11"}, 0.10),))
    return [*generate(calm, start, 130, seed=31), *generate(bad, start + timedelta(minutes=130), 30, seed=32)]


@pytest.fixture(scope="module")
def hook():
    """The issue webhook's target: a team's ticket bridge."""
    with Receiver() as r:
        yield r


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory, hook):
    tmp = tmp_path_factory.mktemp("e2e")
    prefix = "e2e" + new_token()[1][:8]
    topic = f"{prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{prefix}.verdicts.dlq", f"{prefix}.alerts"], 2)
    config = tmp / "claimwatch.toml"
    config.write_text(
        CONFIG + f'[triage]\nwebhook_url = "{hook.url}/hook"\nwebhook_secret = "{HOOK_SECRET}"\ntick_seconds = 1.0\n'
    )
    with WorkerProcess(
        broker.bootstrap, f"chdb:{tmp / 'ch'}", prefix, tmp / "worker.log", args=["--config", str(config)]
    ) as w:
        # This worker serves the whole module and this fixture stops it (even on failure), so the per-test
        # reaper in tests/conftest.py must leave it alone.
        LIVE.discard(w)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        send_all(broker.bootstrap, topic, traffic(now, 0, regressed=True))  # billing-faq
        w.wait_for(
            lambda: [a for a in w.get("/api/alerts", route="billing-faq") or [] if a["state"] == "firing"],
            90,
            "billing-faq to fire",
        )
        w.fired_at = time.monotonic()  # the journey starts here, the moment the page goes out
        send_all(broker.bootstrap, topic, traffic(now, 2, regressed=False))  # hr-policy, calm, for the overview
        w.wait_for(lambda: len(w.get("/api/rates", window="all") or []) == 2, 60, "hr-policy to be stored")
        yield w


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path="/usr/bin/chromium",
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        # The worker's clustering runs share its process with the API and can hold it up for a while.
        context.set_default_timeout(90_000)
        yield context
        context.close()


class Session:
    """One tab, with every console error and uncaught exception it sees."""

    def __init__(self, context, base_url: str, shots):
        self.page = context.new_page()
        self.base_url, self.shots = base_url, shots
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def open(self, path: str, shot: str | None = None):
        response = self.page.goto(self.base_url + path)
        assert response.status == 200, (path, response.status)
        self.page.wait_for_load_state("networkidle")
        if shot:
            self.shot(shot)
        return self.page

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)

    def act(self, form_selector: str, fields: dict[str, str], button: str, done: str) -> None:
        """Fill a form that calls the API and submit it; the page reloads and says what was done."""
        form = self.page.locator(form_selector)
        for name, value in fields.items():
            form.locator(f"[name={name}]").fill(value)
        form.locator(f"button:has-text('{button}')").click()
        # Done: the reloaded page says so; refused: the same page says why (and does not reload).
        self.page.wait_for_function(
            """done => {
            const text = (document.getElementById("action-status") || {}).textContent || "";
            return text === done || /^(Refused|Could not)/.test(text);
        }""",
            arg=done,
        )
        self.page.wait_for_load_state("networkidle")
        status = self.page.locator("#action-status").inner_text()
        assert status == done, status


@pytest.fixture(scope="module")
def session(browser, worker, output_dir):
    shots = output_dir / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    s = Session(browser, worker.url, shots)
    yield s
    assert s.errors == [], s.errors


@pytest.mark.timeout(300)
def test_the_on_call_journey_from_a_page_to_a_regression_test(worker, session):
    """From the moment the page goes out: within 30 s the firing alert names its top issue, whose traces come from
    after the onset on the suspect model; its runbook and a trace follow; the trace becomes an eval item."""
    firing = [a for a in worker.get("/api/alerts", route="billing-faq") if a["state"] == "firing"][0]
    alert_id = firing["alert_id"]

    def explained_with_traces():
        detail = worker.get(f"/api/alerts/{alert_id}") or {}
        top = ((detail.get("explanation") or {}).get("issues") or [None])[0]
        if not top:
            return None
        issue = worker.get(f"/api/issues/{quote(top['issue_id'], safe='')}")
        return (detail, issue) if issue and any(e.get("trace_id") for e in issue["exemplars"]) else None

    left = 30 - (time.monotonic() - worker.fired_at)
    detail, issue = worker.wait_for(
        explained_with_traces, max(left, 0.1), "the alert to name the issue behind it within 30 s of firing"
    )
    onset = datetime.fromisoformat(detail["explanation"]["window"][0])
    for exemplar in issue["exemplars"]:
        assert datetime.fromisoformat(exemplar["observed_at"]).replace(tzinfo=UTC) >= onset, exemplar
    explanation = detail["explanation"]
    shares = [c["share"] for c in explanation["issues"]] + [explanation["unclustered"]["share"]]
    if explanation.get("other_issues"):
        shares.append(explanation["other_issues"]["share"])
    assert abs(sum(shares) - 1) < 0.01, explanation  # the decomposition adds up

    # 1. The page: the alert card says which issue accounts for the rise, and links to it.
    page = session.open("/alerts")
    page.fill("#token-input", TOKEN)  # the on-call engineer signs in to act
    page.click("#token-form button[type=submit]")
    why = page.locator(f'[id="{alert_id}-why"]')
    top_link = why.locator("a[href^='/issues/']").first
    assert (
        top_link.get_attribute("href") == f"/issues/{quote(issue['issue_id'], safe='')}?alert={alert_id}"
    )  # its traces from this alert
    session.shot("journey-1-alert")

    # 1b. The alert's own page, from its card: its timeline, the chart with its onset, its top issue's runbook.
    page.locator(f'[id="{alert_id}-h"] a[href="/alerts/{alert_id}"]').click()
    page.wait_for_selector("#alert-chart .main-svg")
    assert "firing" in page.locator("#timeline").inner_text()
    marked = page.evaluate("document.getElementById('alert-chart').layout.annotations.map(a => a.text)")
    assert "onset" in marked, marked
    assert f"The runbook of {issue['issue_id']}" in page.locator("section.runbook").inner_text()
    session.shot("journey-1b-alert-page")
    page = session.open("/alerts")

    # 2. The cause: the issue page, with its runbook.
    top_link.click()
    page.wait_for_load_state("networkidle")
    assert page.url.endswith(f"/issues/{quote(issue['issue_id'], safe='')}?alert={alert_id}")
    # drawn, or (an issue formed from the alert's window minutes ago) waiting for the next full re-cluster
    page.wait_for_selector("#issue-map .main-svg, #issue-map.map-pending")
    assert page.locator(".runbook-body h3").count() >= 1
    assert alert_id in page.content()  # the issue shows the alert it contributes to
    session.shot("journey-2-issue")

    # 3. The evidence: one of its traces, claim by claim.
    trace_link = page.locator("#exemplars a[href^='/traces/']").first
    trace = trace_link.inner_text().strip()
    trace_link.click()
    page.wait_for_load_state("networkidle")
    assert "/traces/" in page.url and trace in page.content() and "billing-faq" in page.content()
    session.shot("journey-3-trace")

    # 4. The fix's regression test: promote that trace, see the eval set change, approve it.
    before = len(worker.get("/api/promotions") or [])
    page = session.open("/issues", "issues")
    assert page.locator(f'a[href="/issues/{quote(issue["issue_id"], safe="")}"]').count() == 1
    page = session.open(f"/issues/{quote(issue['issue_id'], safe='')}")
    page.locator(f'#exemplars input[type=checkbox][value="{trace}"]').check()
    session.act("#promote-form", {"by": "oncall"}, "Promote", "Proposed for the eval set.")
    proposed = [i for i in worker.get("/api/promotions", state="proposed") if i["origin_trace_id"] == trace]
    assert len(proposed) == 1 and proposed[0]["origin_issue_id"] == issue["issue_id"]
    assert len(worker.get("/api/promotions")) == before + 1

    item = proposed[0]["item_id"]
    page = session.open("/eval", "journey-4-eval")
    page.fill("#token-input", REVIEWER)  # the sign-off is a second person's, with a token that names them
    page.click("#token-form button[type=submit]")
    session.act(f'form[data-path="/api/promotions/{item}/approve"]', {"by": "reviewer"}, "Approve", "Approved.")
    assert worker.get(f"/api/promotions/{item}")["state"] == "approved"
    assert item in page.locator("#items").inner_text()
    session.shot("journey-5-approved")
    assert session.errors == [], session.errors


@pytest.mark.timeout(240)
def test_overview_route_and_alerts_pages_and_an_ack_through_the_ui(worker, session):
    firing = [a for a in worker.get("/api/alerts", route="billing-faq") if a["state"] == "firing"][0]

    page = session.open("/", "overview")
    assert page.locator("#routes tbody tr").first.locator("th").inner_text() == "billing-faq"  # worst first
    assert "1 firing" in page.locator("#routes tbody tr").first.inner_text()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"

    page = session.open("/routes/billing-faq")
    page.wait_for_selector("#route-chart .main-svg")  # Plotly drew the rate with its band
    assert "gen-2026-11" in page.locator("#versions").inner_text()
    # marked on the chart: the new model only, not the versions the route's first events already carried, also
    # where those events fall inside the first point's step (24 h: 15-minute points, the traffic began 160 min ago)
    for window in ("6h", "24h"):
        page = session.open(f"/routes/billing-faq?window={window}")
        page.wait_for_selector("#route-chart .main-svg")
        marked = page.evaluate("document.getElementById('route-chart').layout.annotations.map(a => a.text)")
        assert marked == ["model=gen-2026-11"], (window, marked)
    session.shot("route")

    page = session.open("/alerts")
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    assert page.locator("#token-status").inner_text() == "token set for this tab"
    session.shot("alerts")
    session.act(
        f'form[data-path="/api/alerts/{firing["alert_id"]}/ack"]',
        {"by": "oncall", "note": "rolling back"},
        "Ack",
        f"Acknowledged {firing['alert_id']}.",
    )
    assert "acked by oncall" in page.locator(f'[id="{firing["alert_id"]}"]').inner_text()
    session.shot("alerts-acked")
    acked = worker.get(f"/api/alerts/{firing['alert_id']}")
    assert (acked["acked"], acked["acked_by"], acked["ack_note"]) == (True, "oncall", "rolling back")
    assert session.errors == [], session.errors


@pytest.mark.timeout(240)
def test_assign_archive_and_unarchive_an_issue_from_its_page(worker, session, hook):
    """The on-call engineer takes the issue behind the page, parks it, and brings it back: each from the page, each
    recorded in its activity; archived, it leaves the list until un-archived; "Mine" finds it."""
    issue_id = worker.wait_for(
        lambda: [i["issue_id"] for i in worker.get("/api/issues", route="billing-faq") or []],
        90,
        "an issue on billing-faq",
    )[0]
    path = f"/issues/{quote(issue_id, safe='')}"
    page = session.open(path)
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    session.act("#assign-form", {"assignee": "oncall", "by": "oncall"}, "Assign", "Assigned.")
    assert (
        page.locator("#owner").inner_text() == "oncall"
        and worker.get(f"/api/issues/{issue_id}")["assignee"] == "oncall"
    )
    session.shot("triage-1-assigned")
    # the leader's triage tick tells the ticket bridge, signed with the shared secret
    posts = hook.wait_until(lambda posts: [p for p in posts if b'"event":"assigned"' in p[2]], 30)
    _, headers, body = next(p for p in posts if b'"event":"assigned"' in p[2])
    assert verify(HOOK_SECRET, body, headers["X-Claimwatch-Signature"])
    assert json.loads(body)["issue"]["issue_id"] == issue_id and json.loads(body)["owner"] == "oncall"

    session.act("#archive-form", {"duration": "2h", "by": "oncall"}, "Archive", "Archived.")
    assert page.locator("#archived").inner_text().startswith("archived until 20")
    assert worker.get(f"/api/issues/{issue_id}")["state"] == "archived"
    session.shot("triage-2-archived")
    page = session.open("/issues")
    assert page.locator(f'#issues a[href="{path}"]').count() == 0  # parked: out of the default list
    page = session.open("/issues?state=archived", "triage-3-archived-list")
    assert page.locator(f'#issues a[href="{path}"]').count() == 1

    page = session.open(path)
    session.act("#unarchive-form", {"by": "oncall"}, "Unarchive", "Unarchived.")
    assert page.locator("#archived").count() == 0 and worker.get(f"/api/issues/{issue_id}")["state"] != "archived"
    activity = page.locator("#activity li").all_inner_texts()
    assert [line.split(": ", 1)[1].split(" ")[0] for line in activity[:3]] == ["unarchived", "archived", "assigned"]
    assert all("oncall:" in line for line in activity[:3])
    session.shot("triage-4-unarchived")
    page.locator("#triage").screenshot(path=str(session.shots / "triage-4-section.png"))  # legible at full size

    page = session.open("/issues")
    page.click("#mine")  # the name this tab signs changes with: issues it owns or was assigned
    page.wait_for_load_state("networkidle")
    assert page.url.endswith("/issues?owner=oncall") and page.locator(f'#issues a[href="{path}"]').count() == 1
    session.shot("triage-5-mine")
    assert session.errors == [], session.errors


def test_pages_fit_a_terminal_sized_window(worker, session):
    session.page.set_viewport_size({"width": 640, "height": 480})  # ~80 columns
    try:
        for path, name in (
            ("/", "overview-80col"),
            ("/alerts", "alerts-80col"),
            ("/routes/billing-faq", None),
            ("/ops", "ops-80col"),
        ):
            page = session.open(path, name)
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path
        assert session.errors == [], session.errors
    finally:
        session.page.set_viewport_size({"width": 1280, "height": 900})
