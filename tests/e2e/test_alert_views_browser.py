"""The alerts page in headless Chromium: the on-call engineer narrows the list to what is active, then to one kind,
previews a silence typed into the form (nothing is made), and creates it; the silence then holds exactly the alerts
the preview listed. On the alert filter tests' world (tests/unit/api/test_alert_filters.py), served on a real port.
Screenshots go to test-output/screenshots/alerts-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect, sync_playwright

from services.alerts.lifecycle.kinds import SILENT_KIND
from services.alerts.lifecycle.records import alert_repository
from services.app.compose import build
from tests.support.serving import serving
from tests.unit.api.test_alert_filters import ADDED, FIRING, OWNERS, PENDING
from tests.unit.api.test_api import TOKEN, client_for, world  # noqa: F401  (world is a fixture)

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.fixture(scope="module")
def site(world):  # noqa: F811
    services, _ = world
    alert_repository(services.store).save_all(ADDED)
    client = client_for(build(services.settings.model_copy(update={"owners": OWNERS}), services.store))
    with serving(client.app) as port:
        yield f"http://127.0.0.1:{port}", client


def cards(page) -> set[str]:
    return set(page.locator("article.card.alert").evaluate_all("cards => cards.map(c => c.id)"))


@pytest.mark.timeout(180)
def test_filter_the_alert_list_preview_a_silence_and_create_it(site, output_dir):
    url, api = site
    shots = output_dir / "screenshots"
    shots.mkdir(exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/alerts")
        expect(page.locator("#alert-counts")).to_have_text("8 alerts: 3 firing, 2 pending, 3 resolved.")

        # 1. What needs a person: the "active" link, then one kind through the form, which keeps the state.
        page.locator("#alert-states a", has_text="active").click()
        expect(page.locator("#alert-states a[aria-current]")).to_have_text("active")
        assert cards(page) == FIRING | PENDING
        page.select_option("#f-kind", SILENT_KIND)
        page.click("#alert-filters button[type=submit]")
        expect(page.locator("#alert-counts")).to_have_text(
            "Showing 1 alert of 8 (state active, kind route_silent): 0 firing, 1 pending, 0 resolved."
        )
        assert cards(page) == {"a-silent-hr"} and "state=active" in page.url and f"kind={SILENT_KIND}" in page.url
        expect(page.locator("#alert-states a[aria-current]")).to_have_text("active")
        page.screenshot(path=str(shots / "alerts-filtered.png"), full_page=True)

        # 2. A silence previewed: the page comes back with what it would match, and what was typed.
        before = len(api.get("/api/silences").json())
        page.fill("#new-matchers", "route=billing-faq")
        page.fill("#new-comment", "rollback under way")
        page.locator("#new-silence button", has_text="Preview").click()
        expect(page.locator("#preview-summary")).to_contain_text(
            "route=billing-faq would silence 1 open alert; 2 resolved alerts match too"
        )
        previewed = page.locator("#preview-alerts tbody th").all_inner_texts()
        assert previewed == ["a-billing"]
        expect(page.locator("#new-matchers")).to_have_value("route=billing-faq")
        expect(page.locator("#new-comment")).to_have_value("rollback under way")
        assert len(api.get("/api/silences").json()) == before  # nothing made
        page.locator("#silence-preview").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "alerts-silence-preview.png"), full_page=True)

        # 3. Made from the same form: it silences exactly what the preview listed.
        page.fill("#token-input", TOKEN)
        page.click("#token-form button[type=submit]")
        page.fill("#new-by", "oncall")
        page.locator("#new-silence button", has_text="Create silence").click()
        expect(page.locator("#action-status")).to_have_text("Silence created.")
        made = [s for s in api.get("/api/silences").json() if s["comment"] == "rollback under way"]
        assert len(made) == 1 and made[0]["matchers"] == ["route=billing-faq"]
        silenced = api.get("/api/alerts", params={"state": "active"}).json()
        assert [a["alert_id"] for a in silenced if made[0]["silence_id"] in a["silenced_by"]] == previewed
        browser.close()
    assert not errors, errors
