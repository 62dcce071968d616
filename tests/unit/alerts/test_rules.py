"""The rules state their own quality: each kind's severity, whether it pages (as the shipped Alertmanager
routing really routes it), the thresholds in force and the benches' figures, never invented."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from services.alerts.detection.config import CusumConfig, DetectorConfig
from services.alerts.detection.input_health import InputHealthConfig
from services.alerts.lifecycle.alert import Alert
from services.alerts.notify.payloads import alertmanager_payload
from services.alerts.oncall.quality import MISSED, QUALITY_FILE, Quality, load_quality
from services.alerts.oncall.rules import RULE_KINDS, alert_rules, pages
from services.review.agreement_alerts import AgreementDropTest
from tests.support.paths import ROOT

ALERTMANAGER = ROOT / "dashboards/alertmanager/alertmanager.yml"
NOW = datetime(2026, 11, 21, tzinfo=UTC)


def rules(detector=None, health=None, quality=None, **route_thresholds):
    return {
        r.kind: r
        for r in alert_rules(
            detector or DetectorConfig(),
            health or InputHealthConfig(),
            AgreementDropTest(),
            quality or {},
            route_thresholds,
        )
    }


def texts(rule) -> list[str]:
    return [t.text for t in rule.thresholds]


def test_every_kind_has_a_rule_with_its_meaning_and_severity():
    found = rules()
    assert list(found) == list(RULE_KINDS) and len(RULE_KINDS) == 8
    assert found["hallucination_rate_rise"].severity == "warning; critical from +4 pts"
    assert [
        found[k].severities for k in ("route_silent", "events_rejected", "abstention_rise", "route_cardinality")
    ] == [("critical",), ("critical",), ("warning",), ("critical",)]
    assert [k for k, r in found.items() if not r.pages] == ["mix_shift", "abstention_rise", "slo_burn"]
    assert found["slo_burn"].severities == ("warning", "critical")  # a ticket, and a page


def test_thresholds_are_the_configs_in_force_with_the_setting_that_changes_each():
    custom = rules(
        DetectorConfig(threshold=0.03, min_claims=500, learning_margin=0.01, cusum=CusumConfig(h=9.0)),
        InputHealthConfig(silent_ratio=0.1, rejected_rise=0.3, abstention_severity="critical"),
        **{"billing-faq": 0.05},
    )
    drift = custom["hallucination_rate_rise"]
    assert "rise ≥ +3 pts over the expectation; 1 route(s) have their own" in texts(drift)
    assert "≥ 500 claims behind the rise" in texts(drift) and drift.severity == "warning; critical from +6 pts"
    assert any(
        t.text.startswith("CUSUM fires at h = 9,") and t.setting == "drift.detector.h" and t.value == 9.0
        for t in drift.thresholds
    )
    assert any("clear the spread its finished hours show (1.25 x; 1 pts before any)" in t for t in texts(drift))
    assert drift.promised is None  # a fixed h states no rate: nothing is promised
    assert "≤ 10% of the expected events arrived" in texts(custom["route_silent"])
    assert "dead-lettered share ≥ its usual share + 30 pts" in texts(custom["events_rejected"])
    assert custom["abstention_rise"].pages  # configured critical: it pages
    stated = rules(DetectorConfig(false_alarms_per_route_per_90d=0.5))
    fires = next(t for t in stated["hallucination_rate_rise"].thresholds if t.text.startswith("CUSUM"))
    assert "allows 0.5 false alarm(s) per 90 days" in fires.text
    assert (fires.setting, fires.value) == ("drift.false_alarms_per_route_per_90d", 0.5)
    assert stated["hallucination_rate_rise"].promised == stated["mix_shift"].promised == 0.5
    assert stated["route_silent"].promised is None  # a p-value rule states no rate
    window = rules(DetectorConfig(kind="window"))["hallucination_rate_rise"]
    assert any(t.startswith("z ≥ 4 on a 10/30/60-minute window") for t in texts(window))
    settings = {t.setting for r in custom.values() for t in r.thresholds} - {None}
    assert {
        "drift.threshold",
        "drift.min_claims",
        "drift.input_health.silent_ratio",
        "drift.input_health.abstention_rise",
    } <= settings


def test_the_shipped_quality_file_names_every_kind_in_the_benches_format():
    quality, raw = load_quality(), json.loads(QUALITY_FILE.read_text())
    assert set(quality) == set(raw) == set(RULE_KINDS)
    for kind, entry in raw.items():
        assert (
            {"false_alarms_per_route_per_60_days", "median_delay_minutes", "measured_by", "measured_on", "note"}
            <= set(entry)
            <= {
                "false_alarms_per_route_per_60_days",
                "false_alarms_by_volume",
                "median_delay_minutes",
                "measured_by",
                "measured_on",
                "note",
            }
        ), kind
        figures = entry["false_alarms_per_route_per_60_days"] is not None or bool(entry["median_delay_minutes"])
        assert quality[kind].measured == figures, kind  # measured only where a bench wrote a figure
        assert not figures or (entry["measured_by"] and entry["measured_on"]), f"{kind}: a figure says who and when"
    assert quality["verifier_agreement"].measured_by is None  # no bench measures it: nothing to say it did


def test_a_benchs_figures_reach_the_rule_and_a_malformed_file_names_itself(tmp_path):
    path = tmp_path / "rule_quality.json"
    path.write_text(
        '{"route_silent": {"false_alarms_per_route_per_60_days": 0.05, "median_delay_minutes": '
        '{"outage": 4}, "measured_by": "python bench/input_health.py", "measured_on": "2026-12-01", '
        '"note": "200 routes, 60 days"}}'
    )
    silent = rules(quality=load_quality(path))["route_silent"]
    assert silent.quality == Quality(
        0.05,
        {"outage": 4.0},
        measured_by="python bench/input_health.py",
        measured_on="2026-12-01",
        note="200 routes, 60 days",
    )
    assert silent.as_dict()["false_alarms_per_route_per_60_days"] == 0.05
    assert rules(quality=load_quality(path))["events_rejected"].quality == Quality()  # absent: not measured
    path.write_text('{"route_silent": {"false_alarms_per_route_per_60_days": "low"}}')
    with pytest.raises(ValueError, match="route_silent: false_alarms_per_route_per_60_days"):
        load_quality(path)
    path.write_text(
        '{"hallucination_rate_rise": {"false_alarms_per_route_per_60_days": NaN, "median_delay_minutes": '
        '{"+2 pts": 24.0, "+1 pts": Infinity, "+0.5 pts": NaN}}}'
    )  # as Python's json writes them
    drift = load_quality(path)["hallucination_rate_rise"]
    assert drift.false_alarms_per_route_per_60_days is None and drift.median_delay_minutes == {
        "+2 pts": 24.0,
        "+1 pts": MISSED,
    }
    assert orjson.loads(orjson.dumps(drift.median_delay_minutes)) == {"+2 pts": 24.0, "+1 pts": "missed"}
    path.write_text("{not json")
    with pytest.raises(ValueError, match="rule_quality.json: not JSON"):
        load_quality(path)
    assert load_quality(tmp_path / "missing.json") == {}


@pytest.mark.parametrize("kind", RULE_KINDS)
def test_pages_is_what_the_shipped_alertmanager_routing_does(kind):
    """Asked of the real Alertmanager's amtool, with the labels claimwatch sends, at each severity the kind
    opens at (and abstention_rise configured critical)."""
    configs = [InputHealthConfig()] + (
        [InputHealthConfig(abstention_severity="critical")] if kind == "abstention_rise" else []
    )
    for health in configs:
        rule = rules(health=health)[kind]
        for severity in rule.severities:
            a = Alert(
                alert_id="a-1",
                route="billing-faq",
                kind=kind,
                severity=severity,
                labels={"service": "claimwatch"},
                window=30,
                pending_since=NOW,
                starts_at=NOW,
            )
            labels = alertmanager_payload(a, "http://localhost:8080", NOW, timedelta(0))["labels"]
            answer = subprocess.run(
                [
                    "amtool",
                    "config",
                    "routes",
                    "test",
                    f"--config.file={ALERTMANAGER}",
                    *(f"{k}={v}" for k, v in labels.items()),
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert answer.returncode == 0, answer.stderr
            assert (answer.stdout.split() == ["on-call"]) == pages(kind, severity), (kind, severity, answer.stdout)
