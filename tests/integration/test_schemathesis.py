"""Schemathesis against the live OpenAPI of the API, with a token and without one.

In process, the app runs over a real chDB store holding simulated traffic, an alert and
named issues, so generated ids sometimes hit real rows; then once more over HTTP against
a running worker (uvicorn inside the Faust worker's event loop). Every response must be
documented (status, content type, body schema), no request may get a 5xx, and without a
token every change must be refused. Bounded: a few examples per operation.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    ignored_auth,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from bench.processes import WorkerProcess
from clustering.issue import IssueRecord
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.api.app import create_api
from services.api.auth import new_token
from services.api.security import ApiPolicy
from services.app.broker import create_topics
from services.app.compose import open_components
from services.app.settings import Settings
from services.client.simulate import Scenario, generate
from services.contract.decode import Decoder
from services.contract.model import FAILED_VERDICTS, VerdictEvent
from services.issues.records import issue_repository
from services.rates.intervals import Interval
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.writer import EventWriter

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
TOKEN, TOKEN_HASH = new_token()
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


def seed(store) -> None:
    decoder = Decoder()
    scenario = Scenario.demo(regression_at=15, corpus_change_at=None).scaled(0.05)
    events = [
        e
        for e in (decoder.decode(s.raw) for s in generate(scenario, START, 30, seed=11))
        if isinstance(e, VerdictEvent)
    ]
    EventWriter(store).write(events)
    at = START + timedelta(minutes=18)
    alert_repository(store).save(
        Alert(
            alert_id="a-1",
            route="billing-faq",
            kind="hallucination_rate_rise",
            severity="warning",
            labels={},
            window=30,
            pending_since=at,
            starts_at=at,
            rate=0.12,
            rate_interval=Interval(0.1, 0.14),
            baseline=0.06,
            claims=400,
        )
    )
    failing = [f"{e.event_id}:{i}" for e in events for i, c in enumerate(e.claims) if c.verdict in FAILED_VERDICTS][:8]
    issues = issue_repository(store)
    for n, issue_id in enumerate(("i-1", "i-2")):
        keys = failing[n * 4 : (n + 1) * 4]
        issues.save(
            [
                IssueRecord(
                    issue_id=issue_id,
                    name=f"issue {n}",
                    keywords=("k",),
                    config_name="t@1",
                    first_seen=START,
                    last_seen=at,
                    size=len(keys),
                    routes={"billing-faq": len(keys)},
                    centroid=[1.0, float(n)],
                    exemplar_ids=tuple(keys[:2]),
                )
            ]
        )
        issues.save_members(
            [
                {
                    "claim_key": k,
                    "issue_id": issue_id,
                    "probability": 0.8,
                    "source": "batch",
                    "config_name": "t@1",
                    "x": float(i),
                    "y": float(n),
                    "observed_at": "2026-11-21 08:10:00.000",
                }
                for i, k in enumerate(keys)
            ]
        )


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory):
    services = open_components(Settings(clickhouse=f"chdb:{tmp_path_factory.mktemp('st') / 'ch'}"))
    RetentionKeeper(services.store).apply(KEEP_EVERYTHING)  # fixed event times must not age past a TTL
    seed(services.store)
    # Generous rate limits: this run is about shapes, not throttling (tested in tests/unit/api/test_rate_limits.py).
    policy = ApiPolicy(
        token_hashes=(TOKEN_HASH,),
        mutations_per_minute=60_000,
        mutation_burst=10_000,
        anonymous_mutations_per_minute=60_000,
        anonymous_reads_per_minute=60_000,
        signins_per_minute=60_000,
    )
    yield schemathesis.openapi.from_asgi("/openapi.json", create_api(services, policy))
    services.close()


# No per-example deadline: the first proposal loads the embedding model (~10 s); the run is bounded by the
# example count and the test timeout instead.
BOUNDED = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def run_every_operation(schema, check_case, examples: settings = BOUNDED) -> list[str]:
    """Generated requests (valid and invalid) for every operation; returns the operations run.

    (schemathesis.pytest.from_fixture does not work with pytest 9, so the loop is explicit.)
    """
    ran = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @examples
            def one(case):
                check_case(case)

            try:
                one()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE, operation.label  # no parameters: nothing to make invalid
        ran.append(f"{operation.method.upper()} {operation.path}")
    return ran


@pytest.mark.timeout(240)
def test_with_a_token_every_request_is_answered_as_documented(api_schema):
    ran = run_every_operation(
        api_schema, lambda case: case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS)
    )
    assert {"POST /api/alerts/{alert_id}/ack", "GET /api/routes/{route}", "POST /api/issues/{issue_id}/merge"} <= set(
        ran
    )


@pytest.mark.timeout(240)
def test_without_a_token_reads_work_and_every_change_is_refused(api_schema):
    refused = []

    def check(case):
        response = case.call_and_validate(checks=[*CHECKS, ignored_auth])
        if case.method in ("POST", "DELETE", "PUT", "PATCH"):
            # No token 401, a made-up one 403; 422 only for a body that is not even JSON (it is parsed before
            # the token is checked, and the answer says nothing about the token).
            assert response.status_code in (401, 403, 413, 422), (case.method, case.path, response.status_code)
            refused.append(response.status_code)

    run_every_operation(api_schema, check)
    assert refused.count(401) + refused.count(403) > len(refused) // 2


@pytest.mark.timeout(180)
def test_a_running_worker_answers_as_documented(broker, topic_prefix, tmp_path):
    create_topics(
        broker.bootstrap, [f"{topic_prefix}.verdicts", f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2
    )
    config = tmp_path / "claimwatch.toml"
    config.write_text(f'[api]\ntoken_hashes = ["{TOKEN_HASH}"]\n')
    with WorkerProcess(
        broker.bootstrap,
        f"chdb:{tmp_path / 'ch'}",
        topic_prefix,
        tmp_path / "worker.log",
        args=["--config", str(config)],
    ) as worker:
        live = schemathesis.openapi.from_url(worker.url + "/openapi.json")
        statuses = []

        def check(case):
            # The default rate limit applies here, so a burst of changes also meets documented 429s.
            response = case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS)
            statuses.append(response.status_code)

        ran = run_every_operation(live, check, settings(BOUNDED, max_examples=5))
        assert len(ran) >= 20 and 200 in statuses
