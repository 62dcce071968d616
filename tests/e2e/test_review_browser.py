"""The review page in headless Chromium: two reviewers label with the keyboard (a span picked by selecting
text, one undo), see the verdict revealed only after labelling, and kappa and the calibrated rate update;
the overview and route pages show the calibrated rate beside the raw one. Screenshots go to
test-output/screenshots/review-*.png."""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest
from playwright.sync_api import expect, sync_playwright

from services.api.app import create_api
from services.api.auth import new_token
from services.app.compose import build
from services.app.settings import Settings
from services.core.errors import NotFound
from tests.support.review_world import answer, write_answers
from tests.support.serving import serving

TOKEN, TOKEN_HASH = new_token()
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def review_settings(tmp_path, daily_budget: int) -> Settings:
    return Settings(
        clickhouse=f"chdb:{tmp_path / 'unused'}",
        api={"token_hashes": [TOKEN_HASH]},
        review={"daily_budget": daily_budget, "bootstrap_samples": 200, "min_labels": 3},
    )


@pytest.fixture
def site(store, tmp_path):
    write_answers(store, [answer(i) for i in range(4)])
    components = build(review_settings(tmp_path, daily_budget=4), store)
    components.review.sample(None, components.review.windows.window_bounds(None)[1])
    with serving(create_api(components)) as port:
        yield f"http://127.0.0.1:{port}"


@contextmanager
def review_page(site: str, errors: list[str]):
    """The Review page in headless Chromium, signed in; console and page errors go to ``errors``."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 1300})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(site + "/review")
        page.fill("#token-input", TOKEN)
        page.click("#token-form button[type=submit]")
        yield page
        browser.close()


def select_in_first_chunk(page, text: str) -> None:
    page.evaluate(
        """text => {
        const node = document.querySelector('#review-chunks .chunk-text').firstChild;
        const start = node.textContent.indexOf(text);
        const range = document.createRange();
        range.setStart(node, start);
        range.setEnd(node, start + text.length);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
    }""",
        text,
    )


def label_with_keys(page, key: str, span: str = "") -> None:
    expect(page.locator("#review-pending")).to_contain_text("Label it")
    assert page.locator("#review-revealed").evaluate("e => e.hidden"), "revealed before labelling"
    assert "Verifier" not in page.locator("#review-card").inner_text()
    if span:
        select_in_first_chunk(page, span)
    page.keyboard.press(key)
    page.keyboard.press("Enter")
    expect(page.locator("#review-revealed")).to_contain_text("Verifier said")


def test_two_reviewers_label_with_the_keyboard_and_see_kappa(site, output_dir):
    shots = output_dir / "screenshots"
    shots.mkdir(exist_ok=True)
    errors: list[str] = []
    with review_page(site, errors) as page:
        expect(page.locator("#review-human-kappa")).to_have_text("—")
        calibrated = page.locator('#review-calibrated tr[data-route="billing-faq"] td').nth(1)
        expect(calibrated).to_have_text("— (no labels yet)")  # not a reason to read as staleness
        plan = page.locator('#review-plan tr[data-route="billing-faq"]')
        expect(plan).to_contain_text("no labels yet")
        for reviewer, keys in (("ann", "ccss"), ("bob", "csss")):
            page.fill("#review-reviewer", reviewer)
            page.click("#review-start button[type=submit]")
            expect(page.locator("#review-card")).to_be_visible()
            expect(page.locator("#review-meta")).to_have_text(re.compile(r"slot held until \d\d:\d\d UTC$"))
            page.locator("#review-claim").click()  # keys go to the page, not the name field
            for n, key in enumerate(keys):
                if n:
                    page.keyboard.press("n")
                if reviewer == "ann" and n == 0:
                    page.keyboard.press("s")
                    expect(page.locator("#review-pending")).to_contain_text("sending in 3 s")
                    page.keyboard.press("z")
                    expect(page.locator("#review-pending")).to_contain_text("Undone")
                    page.screenshot(path=str(shots / "review-blind.png"), full_page=True)
                label_with_keys(page, key, "within 14 days of purchase" if key == "c" else "")
            page.screenshot(path=str(shots / f"review-revealed-{reviewer}.png"), full_page=True)
        # ann c c s s, bob c s s s: p_o 3/4, p_e 1/2, so Cohen's kappa 0.50.
        expect(page.locator("#review-human-kappa")).to_contain_text("0.50 over 4 claims")
        expect(page.locator("#review-disputed")).to_have_text("1")
        # 3 settled labels (the disputed claim waits): of the flagged claims 1 failed in 2, of the passed 0 in 1, so
        # PPI says 50% of 1/2 + 50% of 0 (Se 1.00 and Sp 0.50 weighted, shown beside it).
        expect(calibrated).to_have_text("25.0% (0.0%–79.8%)")
        expect(plan).not_to_contain_text("no labels yet")  # the plan follows the labels without a reload
        expect(page.locator('#review-calibrated tr[data-route="billing-faq"]')).to_contain_text("1.00 / 0.50")
        # Progress follows the labels without a reload, so it agrees with the kappa above.
        expect(page.locator("#review-strata")).to_contain_text("4 / 4")
        expect(page.locator("#review-reviewers")).to_contain_text("ann")
        page.screenshot(path=str(shots / "review-calibrated.png"), full_page=True)
        page.reload()
        expect(page.locator("#review-strata")).to_contain_text("4 / 4")
        page.screenshot(path=str(shots / "review-after.png"), full_page=True)
        page.goto(site + "/?window=all")
        row = page.locator('#routes tr:has(a:text("billing-faq"))')
        expect(row.locator("td.calibrated")).to_have_text("25.0% (0.0%–79.8%)")
        expect(row).to_contain_text("50.0%")  # the raw rate beside it
        page.screenshot(path=str(shots / "review-overview-calibrated.png"), full_page=True)
        page.goto(site + "/routes/billing-faq")
        expect(page.locator("#calibrated-rate")).to_contain_text("25.0% (0.0%–79.8%)")
        expect(page.locator("#calibrated-rate")).to_contain_text("sensitivity 1.00, specificity 0.50, 3 labels")
        page.screenshot(path=str(shots / "review-route-calibrated.png"), full_page=True)
    assert not errors, errors


@pytest.fixture
def scored_site(store, tmp_path):
    """40 answers whose verifier scores its two verdicts; settled labels agree with it more the surer it was."""
    scores = [0.55, 0.65, 0.75, 0.85, 0.95]
    write_answers(store, [answer(i, scores=(scores[i % 5], scores[(i + 2) % 5])) for i in range(40)])
    components = build(review_settings(tmp_path, daily_budget=80), store)
    now = components.review.windows.window_bounds(None)[1]
    components.review.sample(None, now)
    claims = {c["claim_key"]: c for c in store.query("SELECT claim_key, verdict, score FROM review_queue FINAL")}
    turn = 0
    for reviewer in ("ann", "bob"):
        while True:
            try:
                slot = components.review.next(reviewer, now)
            except NotFound:
                break
            queued = claims[slot.claim_key]
            turn += 1
            agrees = (turn * 37 % 100) / 100 < queued["score"]  # right about as often as it says
            label = queued["verdict"] if agrees else ("supported" if queued["verdict"] != "supported" else "stale")
            components.review.label(slot.slot, reviewer, label, "", now)
    with serving(create_api(components)) as port:
        yield f"http://127.0.0.1:{port}"


def test_the_review_page_draws_the_verifier_s_reliability_diagram(scored_site, output_dir):
    shots = output_dir / "screenshots"
    shots.mkdir(exist_ok=True)
    errors: list[str] = []
    with review_page(scored_site, errors) as page:
        chart = page.locator("#review-reliability")
        expect(chart.locator(".legendtext")).to_contain_text(["the score means what it says", "verifier nli@1"])
        expect(chart.locator(".scatterlayer .trace")).to_have_count(2)
        overall = page.locator('#review-confidence tr[data-route="all"]')
        expect(overall).to_contain_text("every route")
        expect(overall).to_contain_text(re.compile(r"over \d+ claims"))  # ECE and AUROC with their intervals
        chart.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "review-reliability.png"), full_page=True)
    assert not errors, errors
