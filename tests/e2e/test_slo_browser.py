"""The SLO pages in headless Chromium: from the nav to the list, worst budget first, then one SLO, whose burn-down
chart draws from the API and whose figures are the API's; its burn alert links to the alert page. On the SLO
surfaces' world (tests/unit/api/test_slos.py), served on a real port. Screenshots go to
test-output/screenshots/slo-*.png."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect, sync_playwright

from services.alerts.evaluation.slo_watch import SloWatch
from services.core.numbers import pct
from tests.support.serving import serving
from tests.unit.api.test_slos import HOURS, START, surfaces  # noqa: F401  (surfaces is a fixture)

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.mark.timeout(180)
def test_an_engineer_finds_the_slo_burning_its_budget_and_its_page(surfaces, output_dir):  # noqa: F811
    client, _, components = surfaces
    strict = next(s for s in components.settings.slos() if s.name == "billing-strict")
    end = START + timedelta(minutes=HOURS * 60 - 1)
    watch = SloWatch([strict], components.repos.rates, components.repos.alerts, lambda: end, lambda s: {})
    watch.last_minute = end - timedelta(hours=2)
    [page_alert] = watch.evaluate(end)
    detail = client.get("/api/slos/billing-strict").json()
    shots = output_dir / "screenshots"
    shots.mkdir(exist_ok=True)
    errors: list[str] = []
    with serving(client.app) as port, sync_playwright() as p:
        url = f"http://127.0.0.1:{port}"
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/")
        page.locator("nav a", has_text="SLOs").click()
        rows = page.locator("#slos tbody tr")
        expect(rows).to_have_count(3)
        expect(rows.nth(0)).to_contain_text("billing-strict")  # least budget left first
        expect(rows.nth(0)).to_contain_text(f"overspent by {pct(-detail['budget_remaining'])}")
        page.screenshot(path=str(shots / "slo-list.png"), full_page=True)
        rows.nth(0).locator("a", has_text="billing-strict").click()
        expect(page.locator("#slo-budget")).to_contain_text(f"{pct(detail['budget_spent'])} of the budget spent")
        expect(page.locator("#slo-burndown .main-svg").first).to_be_visible()  # drawn from GET /api/slos/{name}
        expect(page.locator("#slo-burns")).to_contain_text("too little history: 8h of 3d")
        expect(page.locator("#slo-rules tbody tr").first).to_contain_text("holds")
        page.screenshot(path=str(shots / "slo-page.png"), full_page=True)
        page.locator("a", has_text=page_alert.alert_id).first.click()
        expect(page.locator("h1")).to_contain_text(page_alert.alert_id)
        browser.close()
    assert errors == []
