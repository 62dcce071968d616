"""What a page says: the expectation it used and the rise split into mix and rate effects."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from services.alerts.lifecycle.alert import Alert
from services.alerts.notify.dispatch import Dispatcher
from services.alerts.notify.payloads import alertmanager_payload, webhook_payload
from services.alerts.notify.receivers import Outgoing
from services.app.settings import Settings

NOW = datetime(2026, 11, 21, 14, 0, tzinfo=UTC)
URL = "https://claimwatch.example"


def alert(kind: str, **fields) -> Alert:
    return Alert(
        alert_id="a-1",
        route="billing-faq",
        kind=kind,
        severity="warning",
        labels={"service": "claimwatch"},
        window=40,
        pending_since=NOW,
        starts_at=NOW,
        rate=0.112,
        baseline=0.08,
        expected=0.091,
        expected_basis="time of day: the 24 h level plus this hour's offset from 3.0 days of history",
        delta=0.021,
        claims=9000,
        **fields,
    )


def test_a_regression_page_shows_the_expectation_and_both_parts_of_the_rise():
    payload = alertmanager_payload(
        alert("hallucination_rate_rise", mix_effect=0.003, rate_effect=0.018), URL, NOW, timedelta(minutes=5)
    )
    notes = payload["annotations"]
    assert payload["labels"]["alertname"] == "ClaimHallucinationRateRise"
    assert notes["expected"] == "9.1%" and notes["mix_effect"] == "+0.3 pts" and notes["rate_effect"] == "+1.8 pts"
    assert notes["expected_basis"].startswith("time of day")
    assert notes["summary"] == (
        "billing-faq: claim hallucination rate 11.2% vs 9.1% expected (+2.1 pts: "
        "+1.8 pts on the same questions, +0.3 pts from the mix)"
    )
    assert "+0.3 pts is mix" in notes["description"] and "+1.8 pts is rate" in notes["description"]
    assert "mix_slice" not in notes  # the mix explains little: no slice is named


def test_a_mix_shift_names_its_slice_and_has_its_own_alertname():
    shift = alert(
        "mix_shift",
        mix_effect=0.019,
        rate_effect=0.002,
        mix_slice="query_type=multi_hop stakes=-: 20% of claims -> 40%",
    )
    payload = alertmanager_payload(shift, URL, NOW, timedelta(minutes=5))
    assert payload["labels"]["alertname"] == "ClaimQuestionMixShift" and payload["labels"]["kind"] == "mix_shift"
    assert payload["annotations"]["mix_slice"] == shift.mix_slice
    assert "mostly the question mix: query_type=multi_hop" in payload["annotations"]["summary"]
    body = webhook_payload(shift, "new firing", URL)
    assert body["alert"]["mix_effect"] == 0.019 and "mostly the question mix" in body["text"]


def test_a_failing_notification_backs_off_as_the_settings_say(monkeypatch):
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    class Down:
        async def post(self, url, **_):
            raise httpx.ConnectError("refused")

    notify = Settings(notify={"retry_initial_seconds": 1.0, "retry_max_seconds": 3.0}).notify
    d = Dispatcher(
        "http://am:9093",
        None,
        URL,
        timedelta(minutes=5),
        max_attempts=4,
        retry_initial_seconds=notify.retry_initial_seconds,
        retry_max_seconds=notify.retry_max_seconds,
        attempt_timeout_seconds=notify.attempt_timeout_seconds,
    )
    monkeypatch.setattr("services.alerts.notify.dispatch.asyncio.sleep", sleep)
    asyncio.run(
        d._deliver(Down(), d.receivers["alertmanager"], Outgoing("alertmanager", "http://am:9093/api/v2/alerts", []))
    )
    # a wait between attempts, none after the last; full jitter
    assert len(waits) == 3 and all(c / 2 <= w <= c for w, c in zip(waits, [1.0, 2.0, 3.0]))


def test_the_dispatcher_has_no_backoff_or_timeout_of_its_own():
    with pytest.raises(TypeError, match="retry_initial_seconds"):
        Dispatcher("http://am:9093", None, URL, timedelta(minutes=5))
    with pytest.raises(TypeError, match="attempt_timeout_seconds"):  # notify.attempt_timeout_seconds is the default
        Dispatcher("http://am:9093", None, URL, timedelta(minutes=5), retry_initial_seconds=1, retry_max_seconds=2)
