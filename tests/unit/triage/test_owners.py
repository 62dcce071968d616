"""[[owners]] rules: first match wins, every pattern a rule gives must match, the default catches the rest; the
settings build them in file order; alerts carry the owner as labels."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.alerts.lifecycle.alert import Alert
from services.alerts.notify.payloads import alertmanager_payload
from services.app.compose import owner_rules
from services.app.settings import load_settings
from services.issues.owners import DEFAULT_TEAM, Owner, OwnerRule, OwnerRules

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
RULES = OwnerRules(
    [
        OwnerRule(Owner("model-eval", "priya"), route="billing-*", versions={"model": "gen-2026-*"}),
        OwnerRule(Owner("payments"), route="billing-*"),
        OwnerRule(Owner("search"), versions={"corpus": "kb@2026-11*"}),
        OwnerRule(Owner("catch-billing-too"), route="billing-faq"),  # never reached: payments matches first
    ],
    default=Owner("platform", "sam"),
)


@pytest.mark.parametrize(
    "route, versions, team, owner",
    [
        ("billing-faq", {"model": "gen-2026-11"}, "model-eval", "priya"),  # both patterns match: the first rule
        ("billing-faq", {"model": "gen-2025-01"}, "payments", ""),  # the model does not: the next rule
        ("billing-faq", {}, "payments", ""),  # no model: a model pattern cannot match
        ("billing-faq", {"corpus": "kb@2026-11-02"}, "payments", ""),  # order, not specificity, decides
        ("hr-policy", {"corpus": "kb@2026-11-02"}, "search", ""),
        ("hr-policy", {"corpus": "kb@2026-10-30"}, "platform", "sam"),  # nothing matches: the default owner
        ("hr-policy", {}, "platform", "sam"),
    ],
)
def test_the_first_matching_rule_owns_it(route, versions, team, owner):
    assert RULES.of(route, versions) == Owner(team, owner)


def test_without_rules_everything_is_the_default_teams():
    assert OwnerRules().of("anything") == Owner(DEFAULT_TEAM)
    assert Owner(DEFAULT_TEAM).labels() == {"team": DEFAULT_TEAM}


def test_settings_rules_keep_the_files_order_and_default(tmp_path):
    config = tmp_path / "claimwatch.toml"
    config.write_text(
        '[triage]\ndefault_team = "platform"\n\n'
        '[[owners]]\nroute = "billing-*"\nmodel = "gen-2*"\nteam = "model-eval"\nowner = "priya"\n\n'
        '[[owners]]\nroute = "billing-*"\nteam = "payments"\n'
    )
    rules = owner_rules(load_settings(config, environ={}))
    assert rules.of("billing-faq", {"model": "gen-2"}) == Owner("model-eval", "priya")
    assert rules.of("billing-faq", {"model": "gen-1"}) == Owner("payments")
    assert rules.of("hr-policy") == Owner("platform")


def test_an_alert_carries_its_team_and_owner_as_alertmanager_labels():
    suspect = {"key": "model", "value": "gen-2026-11", "kind": "system"}
    alert = Alert(
        alert_id="a-1",
        route="billing-faq",
        kind="hallucination_rate_rise",
        severity="critical",
        labels={"service": "claimwatch"},
        window=30,
        pending_since=NOW,
        starts_at=NOW,
        suspect_changes=(suspect,),
    )
    labels = alertmanager_payload(alert, "http://x", NOW, NOW - NOW, owner=RULES.alert_labels(alert))["labels"]
    assert labels["team"] == "model-eval" and labels["owner"] == "priya" and labels["route"] == "billing-faq"
    plain = Alert(**{**alert.__dict__, "suspect_changes": ()})
    assert RULES.alert_labels(plain) == {"team": "payments"}  # no owner label when the rule names none
