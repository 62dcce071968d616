"""The review endpoints and `rates --calibrated` through an in-process client over a real chDB store."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_api
from services.api.auth import new_token
from services.app.compose import build
from services.app.settings import Settings
from tests.support.review_world import T0, answer, write_answers

TOKEN, TOKEN_HASH = new_token()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ADJUDICATOR, ADJUDICATOR_HASH = new_token()  # settling a dispute is a sign-off: a named token
AS_CY = {"Authorization": f"Bearer {ADJUDICATOR}"}


class Clock:
    def __init__(self):
        self.now = T0 + timedelta(hours=1)

    def __call__(self):
        return self.now


@pytest.fixture
def world(store, tmp_path):
    return make_world(store, tmp_path)


def make_world(store, tmp_path, **review):
    settings = Settings(
        clickhouse=f"chdb:{tmp_path / 'unused'}",
        api={
            "token_hashes": [TOKEN_HASH, f"{ADJUDICATOR_HASH} cy"],
            "mutations_per_minute": 6000,
            "mutation_burst": 1000,
        },
        review={"daily_budget": 8, "reviewers_per_claim": 2, "min_labels": 3, "bootstrap_samples": 200, **review},
    )
    write_answers(
        store,
        [answer(i, route="billing-faq") for i in range(6)]
        + [answer(i, route="shipping", verdicts=("supported", "supported", "stale")) for i in range(4)],
    )
    components = build(settings, store)
    clock = Clock()
    client = TestClient(create_api(components, now=clock))
    assert client.post("/api/review/sample", json={"window": "all"}, headers=AUTH).json()["queued"] == 8
    return client, clock


def label_everything(client, clock, reviewers=("ann", "bob"), choose=lambda slot: "contradicted"):
    for reviewer in reviewers:
        while (got := client.post("/api/review/next", json={"reviewer": reviewer}, headers=AUTH)).status_code == 200:
            slot = got.json()
            done = client.post(
                f"/api/review/{slot['slot']}/label", headers=AUTH, json={"reviewer": reviewer, "label": choose(slot)}
            )
            assert done.status_code == 200, done.text
            clock.now += timedelta(seconds=1)
        assert got.status_code == 404 and "no claim is waiting" in got.json()["detail"]


def test_next_is_blind_and_the_label_reveals(world):
    client, clock = world
    slot = client.post("/api/review/next", json={"reviewer": "ann"}, headers=AUTH).json()
    assert {"slot", "question", "answer_excerpt", "claim", "chunks", "expires_at"} <= set(slot)
    assert not {"verdict", "verifier_verdict", "span", "others"} & set(slot)
    assert slot["chunks"][0]["text"].startswith("Annual plans")
    done = client.post(
        f"/api/review/{slot['slot']}/label",
        headers=AUTH,
        json={"reviewer": "ann", "label": "supported", "span": "A processing fee of 5% applies."},
    ).json()
    assert done["verifier_verdict"] in {"supported", "contradicted", "stale"} and done["chunk_id"] == "refund-1"
    assert done["guide_version"] == "annotation-guide@2026-11" and done["others"] == []


@pytest.mark.parametrize(
    "path, body, status, fragment",
    [
        ("/api/review/next", {"reviewer": ""}, 422, "reviewer"),
        ("/api/review/next", {"who": "ann"}, 422, "who: is not a field this endpoint takes"),
        ("/api/review/next", {}, 422, "reviewer: is required with a token that has no name"),
        ("/api/review/SLOT/label", {"reviewer": "ann", "label": "maybe"}, 422, "unknown verdict"),
        ("/api/review/SLOT/label", {"reviewer": "ann", "label": "no_source"}, 422, "annotation guide"),
        (
            "/api/review/SLOT/label",
            {"reviewer": "ann", "label": "supported", "span": "not in any chunk"},
            422,
            "verbatim",
        ),
        ("/api/review/SLOT/label", {"reviewer": "bob", "label": "supported"}, 409, "reserved for ann"),
        ("/api/review/nope/label", {"reviewer": "ann", "label": "supported"}, 404, "no slot"),
        (
            "/api/review/claims/nope:0/adjudicate",
            {"adjudicator": "cy", "label": "stale"},
            403,
            "needs a token with a name",
        ),
        ("/api/review/sample", {"window": "forever"}, 422, "window"),
    ],
)
def test_bad_review_requests_are_4xx_with_a_message(world, path, body, status, fragment):
    client, _ = world
    slot = client.post("/api/review/next", json={"reviewer": "ann"}, headers=AUTH).json()["slot"]
    got = client.post(path.replace("SLOT", slot), json=body, headers=AUTH)
    assert got.status_code == status, got.text
    assert fragment in str(got.json()["detail"])


def test_writes_need_the_token(world):
    client, _ = world
    assert client.post("/api/review/next", json={"reviewer": "ann"}).status_code == 401
    assert (
        client.post(
            "/api/review/next", json={"reviewer": "ann"}, headers={"Authorization": "Bearer cw_wrong"}
        ).status_code
        == 403
    )
    assert client.get("/api/review/progress").status_code == 200  # reads are open by default


def test_an_expired_slot_is_409(world):
    client, clock = world
    slot = client.post("/api/review/next", json={"reviewer": "ann"}, headers=AUTH).json()["slot"]
    clock.now += timedelta(minutes=16)
    got = client.post(f"/api/review/{slot}/label", json={"reviewer": "ann", "label": "stale"}, headers=AUTH)
    assert got.status_code == 409 and "expired" in got.json()["detail"]


@pytest.mark.slow
def test_two_reviewers_in_parallel_never_share_a_slot_and_finish_the_queue(world):
    client, _ = world

    def work(reviewer):
        taken = []
        while (got := client.post("/api/review/next", json={"reviewer": reviewer}, headers=AUTH)).status_code == 200:
            slot = got.json()
            taken.append((slot["claim_key"], slot["slot"]))
            assert (
                client.post(
                    f"/api/review/{slot['slot']}/label", headers=AUTH, json={"reviewer": reviewer, "label": "stale"}
                ).status_code
                == 200
            )
        return taken

    with ThreadPoolExecutor(2) as pool:
        ann, bob = pool.map(work, ["ann", "bob"])
    assert not {s for _, s in ann} & {s for _, s in bob}
    assert len(ann) == len(bob) == 8, "each claim has two slots: each reviewer labels every claim once"
    progress = client.get("/api/review/progress").json()
    assert {(r["reviewer"], r["labels"]) for r in progress["reviewers"]} == {("ann", 8), ("bob", 8)}
    assert sum(s["complete"] for s in progress["strata"]) == 8


@pytest.mark.slow
def test_two_api_processes_racing_for_one_reviewer_claims_hand_each_claim_out_once(store, tmp_path):
    """Two apps over one store (two API processes: no shared lock), one reviewer a claim, and both reviewers asking
    at the same moment every round: each round both get a claim, never the same one, until the queue is empty."""
    settings = Settings(
        clickhouse=f"chdb:{tmp_path / 'unused'}",
        api={"token_hashes": [TOKEN_HASH], "mutations_per_minute": 6000, "mutation_burst": 1000},
        review={"daily_budget": 8, "reviewers_per_claim": 1, "bootstrap_samples": 200},
    )
    write_answers(store, [answer(i, route="billing-faq") for i in range(4)])  # 8 claims
    clock = Clock()
    apps = [TestClient(create_api(build(settings, store), now=clock)) for _ in range(2)]
    assert apps[0].post("/api/review/sample", json={"window": "all"}, headers=AUTH).json()["queued"] == 8
    together = threading.Barrier(2)

    def work(client, reviewer):
        got = []
        for _ in range(5):  # 4 rounds empty the queue; the 5th finds nothing for either
            together.wait()
            answer_ = client.post("/api/review/next", json={"reviewer": reviewer}, headers=AUTH)
            together.wait()
            if answer_.status_code != 200:
                got.append(answer_.status_code)
                continue
            slot = answer_.json()
            got.append((slot["claim_key"], slot["slot"]))
            done = client.post(
                f"/api/review/{slot['slot']}/label", headers=AUTH, json={"reviewer": reviewer, "label": "supported"}
            )
            assert done.status_code == 200, done.text
        return got

    with ThreadPoolExecutor(2) as pool:
        ann, bob = pool.map(work, apps, ["ann", "bob"])
    assert ann[4] == bob[4] == 404
    assert all(isinstance(x, tuple) for x in ann[:4] + bob[:4]), (ann, bob)  # nobody was turned away early
    claims = [key for key, _ in ann[:4] + bob[:4]]
    assert sorted(claims) == sorted(set(claims)) and len(claims) == 8, "each claim handed out once"


@pytest.mark.slow
def test_agreement_and_disagreements(world):
    client, clock = world
    label_everything(client, clock, ("ann",), lambda slot: "contradicted")
    label_everything(
        client, clock, ("bob",), lambda slot: "contradicted" if slot["route"] == "billing-faq" else "stale"
    )
    report = client.get("/api/review/agreement").json()
    assert [r["route"] for r in report["routes"]] == ["billing-faq", "shipping"]
    assert report["overall"]["human"]["method"] == "cohen" and report["overall"]["human"]["kappa"]["items"] == 8
    assert {d["route"] for d in report["disagreements"]} == {"shipping"}
    key = report["disagreements"][0]["claim_key"]
    unnamed = client.post(
        f"/api/review/claims/{key}/adjudicate", json={"adjudicator": "cy", "label": "stale"}, headers=AUTH
    )
    assert unnamed.status_code == 403 and "needs a token with a name" in unnamed.json()["detail"]
    settled = client.post(f"/api/review/claims/{key}/adjudicate", json={"label": "stale"}, headers=AS_CY).json()
    assert settled["settled"] == "stale" and settled["reviewer"] == "cy"
    missing = client.post("/api/review/claims/nope:0/adjudicate", json={"label": "stale"}, headers=AS_CY)
    assert missing.status_code == 404 and "not in the review queue" in missing.json()["detail"]
    assert key not in {d["claim_key"] for d in client.get("/api/review/agreement").json()["disagreements"]}


@pytest.mark.slow
def test_rates_gain_a_calibrated_field_and_keep_their_old_ones(world):
    client, clock = world
    label_everything(
        client, clock, ("ann", "bob"), lambda slot: "supported" if slot["claim"].endswith(".0") else "contradicted"
    )
    plain = client.get("/api/rates", params={"window": "all"}).json()
    calibrated = client.get("/api/rates", params={"window": "all", "calibrated": "true"}).json()
    assert [{k: v for k, v in e.items() if k != "calibrated"} for e in calibrated] == plain
    assert all("calibrated" not in e for e in plain)
    by_route = {e["route"]: e["calibrated"] for e in calibrated}
    assert set(by_route["billing-faq"]) >= {
        "rate",
        "interval",
        "sensitivity",
        "specificity",
        "labels",
        "pooled",
        "stale",
        "reasons",
        "verifier_version",
    }
    assert by_route["billing-faq"]["verifier_version"] == "nli@1" and by_route["billing-faq"]["labels"] >= 3


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["ppi", "rogan_gladen"])
def test_the_setting_chooses_the_estimator(store, tmp_path, estimator):
    client, clock = make_world(store, tmp_path, calibration_estimator=estimator)
    label_everything(
        client, clock, ("ann", "bob"), lambda slot: "supported" if slot["claim"].endswith(".0") else "contradicted"
    )
    rates = client.get("/api/rates", params={"window": "all", "calibrated": "true"}).json()
    billing = next(e["calibrated"] for e in rates if e["route"] == "billing-faq")
    assert billing["estimator"] == estimator and not billing["pooled"] and billing["rate"] is not None, billing


@pytest.mark.slow
def test_the_review_page_renders_progress_and_agreement_and_loads_its_script(world):
    client, clock = world
    label_everything(client, clock, ("ann", "bob"))
    page = client.get("/review")
    assert page.status_code == 200 and 'id="review-card"' in page.text and "/static/review.js" in page.text
    assert "Human–human kappa (cohen)" in page.text and "billing-faq" in page.text
    assert "<script>" not in page.text, "no inline scripts: the CSP allows only /static/"
    assert 'id="review-plan"' in page.text and "under 3 points" in page.text
    assert '<tr data-route="shipping"><th scope="row">shipping</th>' in page.text.split('id="review-plan"')[1]
    assert client.get("/static/review.js").status_code == 200


@pytest.mark.slow
def test_the_plan_answers_per_route_and_refuses_a_width_out_of_range(world):
    client, clock = world
    label_everything(
        client, clock, ("ann", "bob"), lambda slot: "supported" if slot["claim"].endswith(".0") else "contradicted"
    )
    plans = client.get("/api/review/plan", params={"window": "all", "width": 0.05}).json()
    assert {p["route"] for p in plans} == {"billing-faq", "shipping"}
    assert all(p["target"] == 0.05 and p["estimator"] == "ppi" for p in plans)
    assert client.get("/api/review/plan", params={"window": "all"}).json()[0]["target"] == 0.03, "review.plan_width"
    for width in (0, 1, -0.1, "wide"):
        refused = client.get("/api/review/plan", params={"width": width})
        assert refused.status_code == 422 and "width" in refused.text, refused.text
    assert client.get("/api/review/plan", params={"window": "fortnight"}).status_code == 422
