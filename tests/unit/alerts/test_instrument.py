"""Alerts on the instrument: the agreement-drop test on exact counts, the alert it raises and resolves, and what
a rate alert's rise is on the calibrated rate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from services.alerts.explain.calibrated import calibrated_rise, calibration_suspect
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import AGREEMENT_KIND, DRIFT_KIND
from services.alerts.notify.summary import summary
from services.app.cli.alerts import alert_fields
from services.review.agreement_alerts import AgreementDropTest, AgreementWatch, LabelAgreement, label_agreements
from services.review.labels import Review, ReviewedClaim

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
RECENT, OLD = NOW - timedelta(days=1), NOW - timedelta(days=30)


def labels(agreed: int, total: int, at: datetime, route: str = "billing-faq", version: str = "nli@1"):
    return [LabelAgreement(route, at, version, i < agreed) for i in range(total)]


@pytest.mark.parametrize(
    "recent, history, z, p_value, significant",
    [
        ((30, 40), (180, 200), -2.6186, 0.00441, True),  # 75% vs 90%: p < 0.01, 15 points
        ((34, 40), (180, 200), -0.9289, 0.1765, False),  # 85% vs 90%: could be chance
        ((9700, 10000), (9800, 10000), -4.5291, 2.96e-6, False),  # significant but a 1-point drop is below min_drop
    ],
)
def test_the_two_proportion_test_on_exact_counts(recent, history, z, p_value, significant):
    found = AgreementDropTest().test(labels(*recent, RECENT) + labels(*history, OLD), NOW)
    assert found.z == pytest.approx(z, abs=1e-3) and found.p_value == pytest.approx(p_value, rel=0.02)
    assert found.significant is significant
    assert (found.recent_labels, found.history_labels) == (recent[1], history[1])


def test_too_few_labels_on_either_side_is_no_test():
    assert AgreementDropTest().test(labels(10, 29, RECENT) + labels(180, 200, OLD), NOW) is None
    assert AgreementDropTest().test(labels(10, 40, RECENT) + labels(20, 29, OLD), NOW) is None


def test_settled_claims_count_by_side_of_supported_vs_failed():
    def claim(key, verdict, *said):
        reviews = tuple(Review(who, "reviewer", label, NOW) for who, label in zip("ab", said))
        return ReviewedClaim(key, "r", verdict, "v1", "production", 1.0, 2, reviews)

    found = label_agreements(
        [
            claim("1", "contradicted", "stale", "overreach"),  # both failed: agree
            claim("2", "supported", "contradicted", "contradicted"),
            claim("3", "supported", "supported", "stale"),  # unsettled: left out
        ]
    )
    assert [(x.agreed) for x in found] == [True, False]


def test_the_watch_fires_a_warning_naming_the_new_verifier_then_resolves():
    watch = AgreementWatch(AgreementDropTest())
    history = labels(180, 200, OLD, version="nli@1")
    [fired] = watch.step(history + labels(30, 40, RECENT, version="nli@2"), {}, NOW)
    assert (fired.kind, fired.severity, fired.recorded_state) == (AGREEMENT_KIND, "warning", "firing")
    assert fired.rate == pytest.approx(0.75) and fired.baseline == pytest.approx(0.90) and fired.claims == 40
    assert [(s["key"], s["value"], s["kind"]) for s in fired.suspect_changes] == [("verifier", "nli@2", "system")]
    assert "agrees with human labels on 75.0% of 40 recent labels vs 90.0% before" in summary(fired)
    later = NOW + timedelta(hours=1)
    [still] = watch.step(history + labels(30, 40, RECENT, version="nli@2"), {"billing-faq": fired}, later)
    assert still.alert_id == fired.alert_id and still.starts_at == NOW
    [resolved] = watch.step(history + labels(38, 40, RECENT), {"billing-faq": still}, later)
    assert resolved.alert_id == fired.alert_id and resolved.recorded_state == "resolved"
    assert watch.step(history + labels(38, 40, RECENT), {}, later) == []


@dataclass
class Calibration:
    sensitivity: float | None = 0.8
    specificity: float | None = 0.95
    labels: int = 120
    stale: bool = False
    reasons: tuple[str, ...] = ()
    verifier_version: str = "nli@2"


def rate_alert(rate: float, expected: float) -> Alert:
    return Alert(
        "a-1",
        "billing-faq",
        DRIFT_KIND,
        "warning",
        {},
        30,
        NOW,
        starts_at=NOW,
        rate=rate,
        baseline=expected,
        expected=expected,
        delta=rate - expected,
    )


@pytest.mark.parametrize(
    "rate, expected, calibration, holds, delta",
    [
        (0.10, 0.06, Calibration(), True, (0.05 - 0.01) / 0.75),  # RG: (raw + Sp - 1) / (Se + Sp - 1)
        (0.045, 0.03, Calibration(), False, 0.0),  # both under the 5% false-positive floor
        (0.10, 0.06, Calibration(stale=True, reasons=("only 12 settled labels",)), None, (0.05 - 0.01) / 0.75),
        (0.10, 0.06, None, None, None),
    ],
)
def test_whether_a_rise_holds_on_the_calibrated_rate(rate, expected, calibration, holds, delta):
    found = calibrated_rise(rate_alert(rate, expected), calibration)
    assert found["holds"] is holds
    assert found["delta"] == (None if delta is None else pytest.approx(delta))


def test_the_verifier_change_that_staled_the_calibration_is_a_suspect_and_alerts_show_says_so():
    stale = Calibration(stale=True, reasons=("40 labels are of verifier nli@1; the route now runs nli@2",))
    suspect = calibration_suspect(stale)
    assert (suspect["key"], suspect["value"], suspect["kind"]) == ("verifier", "nli@2", "system")
    assert calibration_suspect(Calibration(stale=True, reasons=("only 3 settled labels",))) is None
    view = {
        **rate_alert(0.10, 0.06).as_dict(),
        "state": "firing",
        "acked": False,
        "silenced_by": [],
        "calibrated": calibrated_rise(rate_alert(0.10, 0.06), stale),
        "suspect_changes": [suspect],
    }
    fields = dict(alert_fields(view, NOW))
    assert fields["calibrated"].startswith("unknown: the calibration is stale (40 labels are of verifier nli@1")
    assert "verifier=nli@2 (system change); calibration stale" in fields["suspects"][0]
    fine = {**view, "calibrated": calibrated_rise(rate_alert(0.045, 0.03), Calibration())}
    assert "does not hold" in dict(alert_fields(fine, NOW))["calibrated"]


@pytest.mark.parametrize(
    "calibration",
    [None, Calibration(sensitivity=None, specificity=None, labels=0, stale=True, reasons=("only 0 settled labels",))],
)
def test_a_route_with_no_labels_says_so_rather_than_stale(calibration):
    """`alerts show` said "the calibration is stale (only 0 settled labels ...)" on a route nobody has labelled."""
    found = calibrated_rise(rate_alert(0.10, 0.06), calibration)
    assert (found["holds"], found["status"], found["stale"]) == (None, "no labels yet", False)
    view = {
        **rate_alert(0.10, 0.06).as_dict(),
        "state": "firing",
        "acked": False,
        "silenced_by": [],
        "calibrated": found,
    }
    assert dict(alert_fields(view, NOW))["calibrated"] == "unknown: no human labels yet on billing-faq"


def test_the_alert_cycle_sends_the_agreement_alert_and_resends_it_while_it_fires():
    import asyncio

    from services.alerts.evaluation.cycle import AlertCycle
    from services.alerts.notify.dispatch import Dispatcher
    from services.core.metrics import Metrics
    from services.review.agreement_alerts import InstrumentAlerts

    class Evaluator:  # no rate alerts: only the instrument speaks
        open: dict = {}
        last_minute = None

        def evaluate(self, now):
            return []

    class Records:  # the alert records' part the hook and the cycle use, in memory
        def __init__(self):
            self.saved, self.transitions = {}, []

        def open_alerts(self):
            return [a for a in self.saved.values() if a.ends_at is None]

        def save(self, alert):
            self.saved[alert.alert_id] = alert

        def record_transition(self, alert):
            self.transitions.append(alert.recorded_state)

        def silences(self, now=None):
            return []

    claims = [
        ReviewedClaim(
            f"c{i}",
            "billing-faq",
            "contradicted",
            "nli@1",
            "production",
            1.0,
            1,
            (Review("ann", "reviewer", "contradicted" if agreed else "supported", at),),
        )
        for i, (agreed, at) in enumerate([(i < 180, OLD) for i in range(200)] + [(i < 30, RECENT) for i in range(40)])
    ]

    async def inline(fn, *args):
        return fn(*args)

    async def run():
        records = Records()
        dispatcher = Dispatcher(
            "http://am:9093",
            None,
            "https://claimwatch.example",
            timedelta(minutes=5),
            retry_initial_seconds=0.5,
            retry_max_seconds=30,
            attempt_timeout_seconds=10,
        )
        hook = InstrumentAlerts(AgreementWatch(AgreementDropTest()), lambda: claims, records)
        cycle = AlertCycle(Evaluator(), records, dispatcher, Metrics(), inline, hooks=(hook,))
        published = await cycle.evaluate(NOW)
        await cycle.resend(NOW + timedelta(minutes=6))
        sent = [item.body[0] for item in dispatcher.queued()]
        return published, sent, records.transitions

    published, sent, transitions = asyncio.run(run())
    assert len(published) == 1 and transitions == ["firing"]
    assert [s["labels"]["alertname"] for s in sent] == ["ClaimVerifierAgreementDrop"] * 2, "sent, then re-sent"
    assert (
        sent[0]["labels"]["kind"] == AGREEMENT_KIND and "75.0% of 40 recent labels" in sent[0]["annotations"]["summary"]
    )
