"""Instrument alerts on a real store: the agreement alert is recorded once and resolved; `alerts show` on a rate
alert says whether its rise holds on the calibrated rate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import AGREEMENT_KIND, DRIFT_KIND
from services.api.app import create_api
from services.app.compose import build
from services.app.settings import Settings
from services.review.agreement_alerts import AgreementDropTest, AgreementWatch, InstrumentAlerts
from services.review.labels import Review, ReviewedClaim
from tests.support.review_world import T0, answer, write_answers
from tests.unit.review.test_review_api import AUTH, TOKEN_HASH, Clock, label_everything


def reviewed(agreed: int, total: int, days_ago: float, now) -> list[ReviewedClaim]:
    at = now - timedelta(days=days_ago)
    return [
        ReviewedClaim(
            f"c{days_ago}-{i}",
            "billing-faq",
            "contradicted",
            "nli@1",
            "production",
            1.0,
            1,
            (Review("ann", "reviewer", "contradicted" if i < agreed else "supported", at),),
        )
        for i in range(total)
    ]


def test_agreement_alert_is_recorded_once_then_resolved(store, tmp_path):
    components = build(Settings(clickhouse=f"chdb:{tmp_path / 'unused'}"), store)
    now = T0 + timedelta(days=40)
    labels = reviewed(180, 200, 30, now) + reviewed(30, 40, 1, now)
    hook = InstrumentAlerts(AgreementWatch(AgreementDropTest()), lambda: labels, components.repos.alerts)
    [fired] = hook.evaluate(now)
    assert fired.kind == AGREEMENT_KIND and fired.recorded_state == "firing"
    assert hook.evaluate(now + timedelta(minutes=5)) == [], "at most every 15 minutes"
    assert hook.evaluate(now + timedelta(minutes=20)) == [], "still firing: no new transition"
    assert [a.alert_id for a in components.repos.alerts.open_alerts()] == [fired.alert_id]
    assert list(hook.open) == ["billing-faq"], "the cycle re-sends it to Alertmanager while it fires"
    labels[:] = reviewed(180, 200, 30, now) + reviewed(39, 40, 1, now)
    [resolved] = hook.evaluate(now + timedelta(minutes=40))
    assert resolved.alert_id == fired.alert_id and resolved.recorded_state == "resolved"
    assert components.repos.alerts.open_alerts() == [] and hook.open == {}
    shown = components.alerts.show(fired.alert_id, now + timedelta(hours=1)).as_dict()
    assert shown["calibrated"] is None, "a rate figure only"


@pytest.mark.slow
def test_alerts_show_says_whether_a_rise_holds_on_the_calibrated_rate(store, tmp_path):
    settings = Settings(
        clickhouse=f"chdb:{tmp_path / 'unused'}",
        api={"token_hashes": [TOKEN_HASH], "mutations_per_minute": 6000, "mutation_burst": 1000},
        review={"daily_budget": 8, "min_labels": 3, "bootstrap_samples": 200},
    )
    write_answers(store, [answer(i) for i in range(8)])
    components = build(settings, store)
    clock = Clock()
    client = TestClient(create_api(components, now=clock))
    client.post("/api/review/sample", json={"window": "all"}, headers=AUTH)
    shown = lambda: client.get(f"/api/alerts/{alert.alert_id}").json()  # noqa: E731
    alert = Alert(
        "a-rise",
        "billing-faq",
        DRIFT_KIND,
        "warning",
        {},
        30,
        T0,
        starts_at=T0,
        rate=0.6,
        baseline=0.4,
        expected=0.4,
        delta=0.2,
    )
    components.repos.alerts.save(alert)
    before = shown()["calibrated"]
    assert (before["holds"], before["status"], before["stale"]) == (None, "no labels yet", False)
    # Humans agree with every supported verdict and call some contradicted ones supported: Se 1, Sp 0.8 (weighted),
    # so the rise 40% -> 60% is 25% -> 50% on the calibrated rate, (raw + Sp - 1) / (Se + Sp - 1).
    label_everything(
        client,
        clock,
        ("ann", "bob"),
        lambda slot: "supported" if slot["claim"].endswith(".0") or int(slot["claim"][6]) % 2 else "contradicted",
    )
    after = shown()["calibrated"]
    assert after["holds"] is True and not after["stale"]
    assert (after["sensitivity"], after["specificity"]) == (1.0, pytest.approx(0.8))
    assert (after["expected"], after["rate"]) == (pytest.approx(0.25), pytest.approx(0.5))
    # The leader's review tick stores the same figure for Grafana.
    components.review.review_tick(timedelta(hours=24), clock.now)
    [row] = store.query("SELECT route, raw, rate, sensitivity, stale FROM calibrated_rates")
    assert row["route"] == "billing-faq" and row["stale"] == 0 and row["sensitivity"] == 1.0
    assert row["rate"] == pytest.approx(
        client.get("/api/rates", params={"window": "24h", "calibrated": "true"}).json()[0]["calibrated"]["rate"]
    )
