"""An alert names its cause as soon as its window is served, not at the next full re-cluster.

The demo stream is written to a real store and clustered by the real pipeline (the bundled MiniLM model)
before either regression begins, as in the demo, where the first run sampled calm traffic. The live
evaluator then raises the two alerts. Serving each alert's window (``IssueJobs.focus_window``: what the
worker's assignment timer does within seconds of an alert opening) must make the alert name the injected
failure, and that issue's representative traces must come from after the onset, on the suspect version,
with no two questions near duplicates.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from services.app.compose import evaluator_for
from services.client.simulate.coverage import failing_claim_families
from services.contract.decode import validate_event
from services.evalset.promotion import NEAR_DUP_THRESHOLD
from services.issues.schedule import open_alert_windows
from services.store.writer import EventWriter
from tests.integration.test_demo_alert_explanation import MODEL_AT, NOW, START, demo_world

INJECTED = {
    "billing-faq": ("invented_numbers", {"model": "gen-2026-11"}),
    "parcel-status": ("stale_sources", {"corpus": "carrier-docs@2026-11-15"}),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    settings, services, sims = demo_world(tmp_path_factory.mktemp("window-issues"))
    writer = EventWriter(services.store)
    events = [validate_event(s.event) for s in sims]
    calm_until = START + timedelta(minutes=MODEL_AT)
    writer.write([e for e in events if e.observed_at < calm_until], [])
    services.issue_jobs.recluster(calm_until)  # the last full run: calm traffic only
    writer.write([e for e in events if e.observed_at >= calm_until], [])
    evaluator = evaluator_for(
        settings, services.repos.rates, services.repos.dead_letters, services.repos.alerts, checkpoint=False
    )
    evaluator.evaluate(NOW)
    yield services, failing_claim_families(sims)
    services.close()


def test_serving_each_alert_window_names_the_injected_failure_with_post_onset_exemplars(world):
    services, truth = world
    alerts = {a.route: a for a in services.repos.alerts.list()}
    assert set(INJECTED) <= set(alerts), sorted(alerts)
    for route in INJECTED:  # before: the calm issues cannot explain it, and the explanation says it is clustering
        explanation = services.alerts.show(alerts[route].alert_id, NOW).explanation
        assert explanation.status.startswith("clustering "), explanation.as_dict()

    windows = open_alert_windows(services.repos.alerts, NOW)
    reports = {w.route: services.issue_jobs.focus_window(w.route, w.since, w.until, NOW) for w in windows}
    print(dict(reports))  # shown on failure

    for route, (family, suspect) in INJECTED.items():
        alert = alerts[route]
        explanation = services.alerts.show(alert.alert_id, NOW).explanation
        assert explanation.status == "", explanation.as_dict()
        top = explanation.top()
        assert top, (route, explanation.as_dict())
        members = services.repos.issues.members(top[0].issue_id, 100_000)
        families = Counter(truth[m["claim_key"]].family for m in members if m["claim_key"] in truth)
        assert families.most_common(1)[0][0] == family, (route, top[0].name, families)

        record = services.repos.issues.get(top[0].issue_id)
        exemplars = services.issues.representatives(record)
        assert len(exemplars) >= 3, exemplars
        onset = explanation.start
        for m in exemplars:
            assert m["route"] == route
            assert datetime.fromisoformat(str(m["observed_at"])).replace(tzinfo=UTC) >= onset
            key, value = next(iter(suspect.items()))
            assert dict(m["versions"])[key] == value, m
        vectors = services.embedder.embed([m["question"] for m in exemplars])
        similarity = vectors @ vectors.T
        assert (similarity[~_eye(len(exemplars))] <= NEAR_DUP_THRESHOLD).all(), [m["question"] for m in exemplars]


def _eye(n: int):
    import numpy as np

    return np.eye(n, dtype=bool)
