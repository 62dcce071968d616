"""On the demo's data, each alert's top contributing issue is the injected failure that caused it.

The demo stream (a new model on billing-faq that invents numbers, a corpus update on parcel-status that
serves stale sources) is written to a real store, clustered by the real pipeline (the bundled MiniLM
model), and walked by the live evaluator; each alert it raises is then explained. The simulator knows
every failing claim's family, so the test checks the top issue's members against it.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from services.app.compose import evaluator_for, open_components
from services.app.settings import Settings
from services.client.simulate import Scenario, generate
from services.client.simulate.coverage import failing_claim_families
from services.contract.decode import validate_event
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter

START = datetime(2026, 11, 21, 9, tzinfo=UTC)
MINUTES, MODEL_AT, CORPUS_AT = 70, 40, 45
NOW = START + timedelta(minutes=MINUTES)
INJECTED = {"billing-faq": "invented_numbers", "parcel-status": "stale_sources"}


def demo_world(directory):
    """Settings and components on an empty store in ``directory``, and the demo stream's valid events."""
    settings = Settings(
        clickhouse=f"chdb:{directory / 'ch'}",
        drift={
            "baseline_minutes": MODEL_AT,
            "watermark_seconds": 0,
            "detector": {"min_baseline_claims": 3000, "block_minutes": 10},
        },
    )
    services = open_components(settings)
    RetentionKeeper(services.store).apply(KEEP_EVERYTHING)  # fixed event times must not age past a TTL
    scenario = Scenario.demo(regression_at=MODEL_AT, corpus_change_at=CORPUS_AT)
    sims = [s for s in generate(scenario, START, MINUTES, seed=11) if s.event is not None and not s.duplicate]
    return settings, services, sims


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    settings, services, sims = demo_world(tmp_path_factory.mktemp("demo-explain"))
    EventWriter(services.store).write([validate_event(s.event) for s in sims], [])
    services.issue_jobs.recluster(NOW)
    evaluator = evaluator_for(
        settings, services.repos.rates, services.repos.dead_letters, services.repos.alerts, checkpoint=False
    )
    evaluator.evaluate(NOW)
    yield services, failing_claim_families(sims)
    services.close()


def family_of_issue(services, truth, issue_id: str, route: str) -> tuple[str, float]:
    """The family most of the issue's members on ``route`` belong to, and its share of them."""
    members = services.repos.issues.members(issue_id, 100_000)
    families = Counter(
        truth[m["claim_key"]].family for m in members if m.get("route") == route and m["claim_key"] in truth
    )
    family, n = families.most_common(1)[0]
    return family, n / sum(families.values())


def test_each_alerts_top_issue_is_the_injected_failure(demo):
    services, truth = demo
    alerts = {a.route: a for a in services.repos.alerts.list()}
    assert set(INJECTED) <= set(alerts), sorted(alerts)  # both regressions raised an alert
    for route, family in INJECTED.items():
        explanation = services.alerts.show(alerts[route].alert_id, NOW).explanation
        top = explanation.top()
        assert top, (route, explanation.as_dict())
        found, purity = family_of_issue(services, truth, top[0].issue_id, route)
        print(route, top[0].name, f"{top[0].share:.0%}", found, f"{purity:.0%}")  # shown on failure
        assert found == family and purity >= 0.8, (route, top[0].name, found, purity)
        assert top[0].share >= 0.5, (route, explanation.as_dict())  # it accounts for most of the excess
        parts = explanation.parts()
        assert sum(p.contribution for p in parts) == pytest.approx(explanation.excess)
        assert sum(p.share for p in parts) == pytest.approx(1.0)
