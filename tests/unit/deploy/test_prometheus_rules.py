"""The alerts about claimwatch itself (dashboards/prometheus/rules.yml), with the real promtool and amtool (Debian's
prometheus and prometheus-alertmanager packages): every rule fires on constructed series when it should and stays
quiet when it should not (rules_test.yml), the shipped prometheus.yml loads the rules and is valid, each rule's
runbook link is a section of the docs, and Alertmanager's shipped routing sends each alert to on-call."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from services.core.metrics import Metrics
from tests.support.paths import ROOT

PROMETHEUS_DIR = ROOT / "dashboards/prometheus"
RULES = PROMETHEUS_DIR / "rules.yml"
RULE_TESTS = PROMETHEUS_DIR / "rules_test.yml"
ALERTMANAGER = ROOT / "dashboards/alertmanager/alertmanager.yml"
DOCS = ROOT / "docs/operations.md"
# Agreed in issue 49 and added by other changes (notifications per receiver; the route bound): the rules use them
# already. Remove each from here once services/core/metrics.py defines it.
AGREED_ELSEWHERE: set[str] = set()


def binary(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed; `make test` installs it (Debian's prometheus / prometheus-alertmanager)"
    return path


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def rule_tests() -> list[dict]:
    return yaml.safe_load(RULE_TESTS.read_text())["tests"]


def github_anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.slow
def test_every_rule_fires_and_stays_quiet_on_constructed_series_in_promtool():
    done = subprocess.run(
        [binary("promtool"), "test", "rules", RULE_TESTS.name],
        cwd=PROMETHEUS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    fired, quiet = set(), set()
    for case in rule_tests():
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in rules()}
    assert fired == names, f"rules never shown firing: {sorted(names - fired)}"
    assert quiet == names, f"rules never shown quiet: {sorted(names - quiet)}"


def test_the_shipped_prometheus_configuration_loads_the_rules_and_is_valid():
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    assert config["rule_files"] == [RULES.name]
    done = subprocess.run(
        [binary("promtool"), "check", "config", "prometheus.yml"],
        cwd=PROMETHEUS_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout, done.stdout


def test_each_rule_is_labelled_described_and_links_a_section_of_the_docs_saying_what_to_do():
    anchors = {github_anchor(line.lstrip("#")) for line in DOCS.read_text().splitlines() if line.startswith("#")}
    for rule in rules():
        name, labels, notes = rule["alert"], rule["labels"], rule["annotations"]
        assert labels["component"] == "claimwatch", name
        assert re.fullmatch(
            r"critical|warning|\{\{ if .+ \}\}warning\{\{ else \}\}critical\{\{ end \}\}", labels["severity"]
        ), name
        assert notes["summary"] and notes["description"], name
        assert notes["runbook_url"] == f"docs/operations.md#{name.lower()}", name
        assert name.lower() in anchors, f"{name}: docs/operations.md has no section {name}"


def test_the_rules_read_only_metrics_claimwatch_exports():
    metrics = Metrics()
    metrics.watch_broker(lambda: True)  # a worker's
    exported = set(metrics.registry._names_to_collectors)
    for rule in rules():
        used = set(re.findall(r"\bclaimwatch_\w+", rule["expr"]))
        assert used <= exported | AGREED_ELSEWHERE, f"{rule['alert']}: {sorted(used - exported)}"
    assert not AGREED_ELSEWHERE & exported, (
        "services/core/metrics.py defines these now: drop them from AGREED_ELSEWHERE"
    )


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param(alert["exp_labels"], id=f"{check['alertname']}-{alert['exp_labels']['severity']}")
        for case in rule_tests()
        for check in case["alert_rule_test"]
        for alert in check["exp_alerts"]
    ],
)
def test_alertmanager_sends_every_alert_about_claimwatch_to_on_call(labels):
    """Whichever team owns the routes: the alerts about the monitor go to whoever runs it."""
    answer = subprocess.run(
        [
            binary("amtool"),
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
    assert answer.stdout.split() == ["on-call"]
