"""The HTTP API and dashboard through an in-process client, over a real chDB store holding
simulated traffic, an alert, and hostile text (SQL and HTML in route names, claims and matchers)."""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import orjson
import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from clustering.issue import IssueRecord
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.api.app import create_api
from services.api.auth import new_token
from services.api.plotly_assets import BUNDLE
from services.api.security import ApiPolicy
from services.app.compose import open_components
from services.app.settings import Settings
from services.client.simulate import Scenario, generate
from services.contract.decode import Decoder, reject
from services.contract.model import FAILED_VERDICTS, VerdictEvent
from services.evalset.readmodel import NO_PAIRS
from services.ingest.ingestor import BrokerHealth
from services.ingest.records import DeadLetter
from services.issues.records import issue_repository
from services.rates.intervals import Interval
from services.store.convert import ch_time
from services.store.evalset import EvalRepository
from services.store.writer import EventWriter
from tests.support.eval_labels import add_human_labels

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
MINUTES, REGRESSION_AT = 40, 20
NOW = START + timedelta(minutes=MINUTES + 5)
TOKEN, TOKEN_HASH = new_token()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REVIEWER, REVIEWER_HASH = new_token()  # a named token: sign-off needs one
AS_REVIEWER = {"Authorization": f"Bearer {REVIEWER}"}
HTML_ROUTE = '<script>alert("route")</script>'
SQL_ROUTE = "x' OR '1'='1' --"
EVIL_TEXT = '<script>alert("claim")</script> {{ 7*7 }} \'; DROP TABLE events; --'
SQL_ROUTE_IN_CONTRACT = "drop--table:events/x"  # the contract allows only A-Z a-z 0-9 . _ : / -
EVIL_ISSUE = '<script>alert("issue")</script> {{ 7*7 }}'
PAGES = ["/", "/routes/billing-faq", "/alerts", "/issues", "/issues/iss-numbers", "/issues/iss-evil", "/eval"]


def hostile_event(i: int) -> VerdictEvent:
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": f"evil-{i}",
                "trace_id": f"tr-evil-{i}",
                "observed_at": (START + timedelta(minutes=MINUTES - 1, seconds=i)).isoformat(),
                "route": SQL_ROUTE_IN_CONTRACT,
                "query": {"text": EVIL_TEXT, "answerable": True},
                "answer": {"text": EVIL_TEXT, "action": "served"},
                "versions": {"model": "<b>m</b>"},
                "claims": [{"text": EVIL_TEXT, "verdict": "contradicted"}, {"text": "fine", "verdict": "supported"}],
            }
        )
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Services on a real store with ~1,000 simulated answers, one alert and hostile rows."""
    settings = Settings(
        clickhouse=f"chdb:{tmp_path_factory.mktemp('api') / 'ch'}",
        api={"token_hashes": [TOKEN_HASH]},
        notify={"external_url": "http://testserver"},  # where the test client reaches the pages
        retention={"raw_days": 3650, "aggregate_days": 3650},
    )  # event times are fixed
    services = open_components(settings, starting=True)
    decoder = Decoder()
    scenario = Scenario.demo(regression_at=REGRESSION_AT, corpus_change_at=None).scaled(0.08)
    decoded = [decoder.decode(s.raw) for s in generate(scenario, START, MINUTES, seed=3)]
    events = [e for e in decoded if isinstance(e, VerdictEvent)] + [hostile_event(i) for i in range(3)]
    dead = [DeadLetter("claimwatch.verdicts", 0, 7, b"{nope", reject("not_json", "", "not JSON"))]
    EventWriter(services.store).write(events, dead)
    # Rows a producer outside the contract could have written: shown and queried inertly.
    minute = (START + timedelta(minutes=MINUTES - 2)).strftime("%Y-%m-%d %H:%M:%S")
    services.store.insert(
        "rate_minute",
        [
            {
                "dim": "",
                "value": "",
                "route": route,
                "minute": minute,
                "events": 2,
                "claims": 4,
                "failed": failed,
                "claims_sq": 8,
                "failed_sq": failed * failed // 2,
                "failed_claims": failed * 2,
                "supported": 4 - failed,
                "contradicted": failed,
                "served": 2,
            }
            for route, failed in ((HTML_ROUTE, 1), (SQL_ROUTE, 2))
        ],
    )
    pending = START + timedelta(minutes=REGRESSION_AT + 3)
    alerts = alert_repository(services.store)
    for route, alert_id in (("billing-faq", "a-billing"), (HTML_ROUTE, "a-html")):
        alerts.save(
            Alert(
                alert_id=alert_id,
                route=route,
                kind="hallucination_rate_rise",
                severity="warning",
                labels={"service": "claimwatch"},
                window=30,
                pending_since=pending,
                starts_at=pending + timedelta(minutes=2),
                rate=0.13,
                rate_interval=Interval(0.1, 0.16),
                baseline=0.06,
                baseline_interval=Interval(0.05, 0.07),
                expected=0.06,
                expected_basis="trailing 24 h level",
                delta=0.07,
                claims=900,
                onset=pending,
                driving_verdict="contradicted",
                suspect_changes=({"key": "model", "value": "gen-2026-11", "kind": "version"},),
            )
        )
    write_issues(services.store, events)
    yield services, events
    services.close()


def write_issues(store, events) -> None:
    """Two named issues as a clustering run stores them: the records and their members with map positions."""
    failing = [
        (e, i)
        for e in {e.event_id: e for e in events}.values()
        for i, c in enumerate(e.claims)
        if c.verdict in FAILED_VERDICTS and c.text
    ]
    numbers = [(e, i) for e, i in failing if e.route == "billing-faq"][:12]
    evil = [(e, i) for e, i in failing if e.route == SQL_ROUTE_IN_CONTRACT]
    issues = issue_repository(store)
    first, last = START + timedelta(minutes=1), START + timedelta(minutes=MINUTES - 1)
    for issue_id, name, members, centroid in (
        ("iss-numbers", "Invented refund numbers", numbers, [1.0, 0.0]),
        ("iss-evil", EVIL_ISSUE, evil, [0.8, 0.6]),
    ):
        keys = [f"{e.event_id}:{i}" for e, i in members]
        issues.save(
            [
                IssueRecord(
                    issue_id=issue_id,
                    name=name,
                    keywords=("refund", "days"),
                    config_name="test@1",
                    first_seen=first,
                    last_seen=last,
                    size=len(keys),
                    hourly_counts={"2026-11-21T08": len(keys)},
                    routes={members[0][0].route: len(keys)},
                    centroid=centroid,
                    exemplar_ids=tuple(keys[:3]),
                )
            ]
        )
        issues.save_members(
            [
                {
                    "claim_key": k,
                    "issue_id": issue_id,
                    "probability": 0.9,
                    "source": "batch",
                    "config_name": "test@1",
                    "x": float(n),
                    "y": float(n % 3),
                    "observed_at": ch_time(e.observed_at),
                }
                for n, (k, (e, _)) in enumerate(zip(keys, members))
            ]
        )


def client_for(services, **policy) -> TestClient:
    fields = {
        "token_hashes": (TOKEN_HASH, f"{REVIEWER_HASH} reviewer"),
        "mutations_per_minute": 6000,
        "mutation_burst": 1000,
        "anonymous_mutations_per_minute": 6000,
        "signins_per_minute": 6000,
        "anonymous_reads_per_minute": 60000,
        **policy,
    }
    return TestClient(create_api(services, ApiPolicy(**fields), now=lambda: NOW))


@pytest.fixture(scope="module")
def client(world):
    return client_for(world[0])


def expected_by_route(events):
    """[failed, non-trivial claims] per route, each event_id once (the simulator redelivers some)."""
    out = defaultdict(lambda: [0, 0])
    for e in {e.event_id: e for e in events}.values():
        for c in e.claims:
            if c.verdict != "trivial":
                out[e.route][1] += 1
                out[e.route][0] += c.verdict in FAILED_VERDICTS
    return out


# -- rates and routes -----------------------------------------------------------
def test_rates_are_worst_first_and_match_the_events_written(client, world):
    rows = client.get("/api/rates", params={"window": "all"}).json()
    rates = [r["rate"] for r in rows if r["rate"] is not None]
    assert rates == sorted(rates, reverse=True)
    by_route = {r["route"]: r for r in rows}
    for route, (failed, claims) in expected_by_route(world[1]).items():
        assert (by_route[route]["failed"], by_route[route]["claims"]) == (failed, claims)
        lo, hi = by_route[route]["interval"]
        assert lo <= failed / claims <= hi
    assert by_route[SQL_ROUTE]["failed"] == 2 and by_route[HTML_ROUTE]["failed"] == 1  # stored as given


def test_slices_by_dimension(client):
    body = client.get("/api/slices", params={"window": "all", "dim": ["query_type", "version.model"]}).json()
    assert set(body) == {"query_type", "version.model"}
    models = {(e["route"], e["value"]) for e in body["version.model"]}
    assert ("billing-faq", "gen-2026-11") in models and ("billing-faq", "gen-2026-10") in models
    assert all(e["dim"] == "query_type" for e in body["query_type"])


def test_route_detail_has_series_band_baseline_alert_spans_and_version_changes(client, world):
    d = client.get("/api/routes/billing-faq", params={"window": "2h", "step": 5}).json()
    assert d["step_minutes"] == 5
    failed, claims = expected_by_route(world[1])["billing-faq"]
    assert (d["totals"]["failed"], d["totals"]["claims"]) == (failed, claims)
    assert sum(p["claims"] for p in d["series"]) == claims and sum(p["failed"] for p in d["series"]) == failed
    assert all(p["lo"] <= p["rate"] <= p["hi"] for p in d["series"] if p["claims"])
    assert d["baseline"] == {"rate": 0.06, "interval": [0.05, 0.07], "expectation": False, "source": "alert a-billing"}
    assert [(a["alert_id"], a["state"]) for a in d["alerts"]] == [("a-billing", "firing")]
    seen = {(v["key"], v["value"]): v for v in d["versions"]}
    change = datetime.fromisoformat(seen[("model", "gen-2026-11")]["first_seen"])
    assert change == START + timedelta(minutes=REGRESSION_AT)
    assert datetime.fromisoformat(seen[("model", "gen-2026-10")]["first_seen"]) == START
    # the world holds hours, not a day: the route's baseline is still learning, and the page says so
    hours = datetime.fromisoformat(d["end"]).hour - START.hour  # finished hour blocks, as the detector counts them
    assert d["baseline_status"]["learning"] is True and d["baseline_status"]["history_hours"] == hours
    assert d["baseline_status"]["basis"].startswith(f"learning: {hours:.0f} h of history")
    page = client.get("/routes/billing-faq").text
    assert "baseline learning" in page and f"learning: {hours:.0f} h of history" in page


def test_route_names_with_slashes_and_sql_reach_only_their_own_rows(client, world):
    d = client.get("/api/routes/" + quote(SQL_ROUTE_IN_CONTRACT, safe="")).json()
    assert d["route"] == SQL_ROUTE_IN_CONTRACT and d["totals"]["claims"] == 6
    d = client.get("/api/routes/" + quote(SQL_ROUTE, safe="")).json()
    assert (d["route"], d["totals"]["claims"], d["totals"]["failed"]) == (SQL_ROUTE, 4, 2)
    assert client.get("/api/alerts", params={"route": "' OR 1=1 --"}).json() == []
    total = len({e.event_id for e in world[1]})
    assert world[0].store.query("SELECT count() AS n FROM events FINAL")[0]["n"] == total  # nothing dropped


@pytest.mark.parametrize(
    "path, status, fragment",
    [
        ("/api/routes/no-such-route", 404, "no events stored for route 'no-such-route'"),
        ("/api/routes/billing-faq?window=all", 422, "not allowed here"),
        ("/api/routes/billing-faq?window=5 weeks", 422, "use a positive number"),
        ("/api/routes/billing-faq?window=60d", 422, "longer than 31 days"),
        ("/api/routes/billing-faq?window=99999999999d", 422, "longer than 366 days"),
        ("/api/rates?window=99999999999d", 422, "longer than 366 days"),
        ("/api/slices?window=30m&dim=nonsense", 422, "unknown slice dimension(s) 'nonsense'"),
        ("/api/routes/billing-faq?end=0001-01-01T00:00:00Z", 422, "between 1971 and 2105"),
        ("/api/rates?window=0m", 422, "use a positive number"),
        ("/api/alerts/a-nope", 404, "no alert 'a-nope'"),
    ],
)
def test_bad_reads_are_4xx_with_a_message(client, path, status, fragment):
    response = client.get(path)
    assert response.status_code == status
    assert fragment in str(response.json()["detail"])


def test_malformed_query_parameters_name_the_field(client):
    response = client.get("/api/alerts", params={"state": "exploded"})
    assert response.status_code == 422
    assert response.json()["field"] == "query.state" and response.json()["detail"].startswith("state: ")
    assert response.json()["detail"] == "state: must be 'active', 'pending', 'firing' or 'resolved'"
    response = client.get("/api/routes/billing-faq", params={"step": 0})
    assert response.status_code == 422 and response.json()["field"] == "query.step"
    assert response.json()["detail"].startswith("step: ")


def test_unknown_paths_and_methods_are_json(client):
    assert client.get("/api/nothing").json() == {"detail": "Not Found"}
    response = client.put("/api/rates")
    assert response.status_code == 405 and "detail" in response.json()


# -- alerts and silences --------------------------------------------------------
def test_alert_list_detail_and_ack(client):
    listed = {a["alert_id"]: a for a in client.get("/api/alerts").json()}
    assert listed["a-billing"]["state"] == "firing" and not listed["a-billing"]["acked"]
    assert client.get("/api/alerts", params={"state": "resolved"}).json() == []
    detail = client.get("/api/alerts/a-billing").json()
    assert detail["suspect_changes"][0]["value"] == "gen-2026-11" and "transitions" in detail
    acked = client.post("/api/alerts/a-billing/ack", json={"by": "oncall", "note": "rolling back"}, headers=AUTH)
    assert acked.status_code == 200
    assert (acked.json()["acked"], acked.json()["acked_by"]) == (True, "oncall")
    assert client.get("/api/alerts/a-billing").json()["ack_note"] == "rolling back"
    unknown = client.post("/api/alerts/a-nope/ack", json={"by": "oncall"}, headers=AUTH)
    assert unknown.status_code == 404 and "claimwatch alerts list" in unknown.json()["detail"]


def test_silence_lifecycle(client):
    made = client.post(
        "/api/silences",
        json={"matchers": ["route=hr-policy"], "by": "oncall", "comment": "rollout", "duration": "2h"},
        headers=AUTH,
    )
    assert made.status_code == 201
    sid = made.json()["silence_id"]
    active = {s["silence_id"]: s for s in client.get("/api/silences", params={"active": True}).json()}
    assert active[sid]["matchers"] == ["route=hr-policy"]
    ended = client.request("DELETE", f"/api/silences/{sid}", json={"by": "oncall"}, headers=AUTH)
    assert ended.status_code == 200
    assert sid not in {s["silence_id"] for s in client.get("/api/silences", params={"active": True}).json()}
    assert client.request("DELETE", "/api/silences/s-nope", json={"by": "oncall"}, headers=AUTH).status_code == 404


@pytest.mark.parametrize(
    "body, where",
    [
        ({"matchers": ["route=x"], "by": "me", "comment": "c"}, "give either ends_at or duration"),
        (
            {"matchers": ["route=x"], "by": "me", "comment": "c", "duration": "1h", "ends_at": "2027-01-01T00:00:00Z"},
            "not both",
        ),
        ({"matchers": ["not a matcher"], "by": "me", "comment": "c", "duration": "1h"}, "use label=value"),
        ({"matchers": ["route=~("], "by": "me", "comment": "c", "duration": "1h"}, "invalid regex"),
        (
            {"matchers": ["route=x"], "by": "me", "comment": "c", "duration": "9999999999d"},
            "longer than the limit of 366 days",
        ),
        (
            {"matchers": ["route=x"], "by": "me", "comment": "c", "ends_at": "9999-01-01T00:00:00Z"},
            "more than 366 days",
        ),
        ({"matchers": ["route=x"], "by": "me", "comment": "c", "ends_at": "2001-01-01T00:00:00Z"}, "in the past"),
        ({"matchers": ["route=~.*"], "by": "me", "comment": "c", "duration": "1h"}, "silence everything"),
    ],
)
def test_bad_silences_are_422_with_the_reason(client, body, where):
    response = client.post("/api/silences", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert where in str(response.json()["detail"])


@pytest.mark.parametrize(
    "body, detail, field",
    [
        (
            {},
            "by: is required with a token that has no name (one made with `claimwatch token new --name NAME` "
            "records its holder)",
            "body.by",
        ),
        ({"by": ""}, "by: must not be empty", "body.by"),
        ({"by": "   "}, "by: must not be blank", "body.by"),
        ({"by": "me", "surprise": 1}, "surprise: is not a field this endpoint takes", "body.surprise"),
        ({"by": 3}, "by: input should be a valid string", "body.by"),
    ],
)
def test_malformed_bodies_are_422_with_one_sentence_naming_the_field(client, body, detail, field):
    response = client.post("/api/alerts/a-billing/ack", json=body, headers=AUTH)
    assert response.status_code == 422
    assert response.json() == {"detail": detail, "field": field}  # never pydantic's list, which echoes the input


def test_a_body_that_is_not_json_is_422(client):
    response = client.post("/api/silences", content=b"{not json", headers={**AUTH, "Content-Type": "application/json"})
    assert response.status_code == 422 and response.json()["field"] == "body"
    assert "not valid JSON" in response.json()["detail"]


# -- auth, limits, headers --------------------------------------------------------
# Sign-in changes nothing on the server: it checks the token itself and sets a read-only cookie
# (tested in test_protected_reads_need_the_token_and_pages_sign_in_with_a_read_only_cookie).
NOT_MUTATIONS = {("POST", "/signin"), ("POST", "/api/silences/preview")}  # reads sent as POST


def mutating_routes(api) -> list[tuple[str, str]]:
    found = []
    for route in iter_route_contexts(api.routes):  # flattens the included routers
        if isinstance(route.original_route, APIRoute):
            for method in route.methods - {"GET", "HEAD", "OPTIONS"}:
                found.append((method, re.sub(r"\{[^}]+\}", "nope", route.path)))
    return sorted(set(found) - NOT_MUTATIONS)


def said(response) -> str:
    """A refusal's sentence: the API's ``detail``, or the OTLP intake's google.rpc.Status ``message``."""
    body = response.json()
    return body.get("detail") or body["message"]


@pytest.mark.slow
def test_every_mutating_endpoint_refuses_a_missing_a_wrong_and_an_unconfigured_token(world):
    services = world[0]
    client = client_for(services)
    routes = mutating_routes(client.app)
    assert ("POST", "/api/alerts/nope/ack") in routes and ("DELETE", "/api/silences/nope") in routes
    assert all(path.startswith(("/api/", "/v1/")) for _, path in routes)
    unconfigured = client_for(services, token_hashes=())
    before = services.store.query("SELECT count() AS n FROM silences")[0]["n"]
    for method, path in routes:
        body = {"by": "intruder", "matchers": ["route=x"], "comment": "c", "duration": "1h"}
        missing = client.request(method, path, json=body)
        assert missing.status_code == 401, (method, path, missing.text)
        assert "bearer token" in said(missing) and missing.headers["www-authenticate"] == "Bearer"
        wrong = client.request(method, path, json=body, headers={"Authorization": "Bearer cw_wrong"})
        assert wrong.status_code == 403, (method, path)
        assert "not one of the configured tokens" in said(wrong)
        not_bearer = client.request(method, path, json=body, headers={"Authorization": f"Basic {TOKEN}"})
        assert not_bearer.status_code == 401, (method, path)
        none = unconfigured.request(method, path, json=body, headers=AUTH)
        assert none.status_code == 403 and "claimwatch token new" in said(none), (method, path)
    assert services.store.query("SELECT count() AS n FROM silences")[0]["n"] == before  # nothing changed


def test_openapi_documents_tags_summaries_and_the_bearer_scheme(client):
    spec = client.get("/openapi.json").json()
    assert "bearerAuth" in spec["components"]["securitySchemes"]
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            assert op.get("tags") and op.get("summary"), (method, path)
            if method in ("post", "delete", "put", "patch") and (method.upper(), path) not in NOT_MUTATIONS:
                assert op["security"] == [{"bearerAuth": []}], (method, path)
                malformed = "400" if path.startswith("/v1/") else "422"  # OTLP/HTTP says 400 for a bad body
                assert {"401", "403", "413", malformed, "429"} <= set(op["responses"]), (method, path)
            else:
                assert "security" not in op, (method, path)  # reads are open by default
    assert client.get("/docs").status_code == 404  # no Swagger UI: it would load from a CDN


def test_oversize_bodies_are_refused_with_413_before_parsing(world):
    client = client_for(world[0], max_body_bytes=1024)
    big = {"by": "x" * 2000}
    declared = client.post("/api/alerts/a-billing/ack", json=big, headers=AUTH)
    assert declared.status_code == 413 and "api.max_body_bytes" in declared.json()["detail"]
    streamed = client.post(
        "/api/alerts/a-billing/ack",
        content=iter([b'{"by": "', b"x" * 4000, b'"}']),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413 and "1024 bytes" in streamed.json()["detail"]
    unauthenticated = client.post("/api/silences", content=b"x" * 5000, headers={"Content-Type": "application/json"})
    assert unauthenticated.status_code == 413


def test_mutations_are_rate_limited_per_token_and_per_address_without_one_with_retry_after(world):
    clock = [1000.0]
    policy = ApiPolicy(
        token_hashes=(TOKEN_HASH,), mutations_per_minute=6, mutation_burst=2, anonymous_mutations_per_minute=6
    )
    client = TestClient(create_api(world[0], policy, now=lambda: NOW, clock=lambda: clock[0]))
    statuses = [client.post("/api/alerts/a-nope/ack", json={"by": "x"}, headers=AUTH).status_code for _ in range(3)]
    assert statuses == [404, 404, 429]
    # Guessing tokens is throttled too, in the address's own bucket: the token's spent one does not decide it.
    guesses = [
        client.post("/api/alerts/a-nope/ack", json={"by": "x"}, headers={"Authorization": "Bearer cw_guess"})
        for _ in range(7)
    ]
    assert [g.status_code for g in guesses] == [403] * 6 + [429]
    assert guesses[-1].headers["retry-after"] == "10" and "retry in 10s" in guesses[-1].json()["detail"]
    assert client.get("/api/rates").status_code == 200  # reads have their own, larger limit
    clock[0] += 10
    assert client.post("/api/alerts/a-nope/ack", json={"by": "x"}, headers=AUTH).status_code == 404


@pytest.mark.slow
def test_protected_reads_need_the_token_and_pages_sign_in_with_a_read_only_cookie(world):
    client = client_for(world[0], protect_reads=True)
    assert client.get("/api/rates").status_code == 401
    assert client.get("/api/rates", headers={"Authorization": "Bearer cw_wrong"}).status_code == 403
    assert client.get("/metrics").status_code == 401
    assert client.get("/api/rates", headers=AUTH).status_code == 200
    assert client.get("/healthz").status_code == 200 and client.get("/readyz").status_code == 200
    page = client.get("/alerts", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/signin?next=/alerts"
    refused = client.post("/signin", data={"token": "cw_wrong", "next": "/alerts"}, follow_redirects=False)
    assert refused.status_code == 403 and "claimwatch_read" not in refused.cookies
    signed = client.post("/signin", data={"token": TOKEN, "next": "//evil.example/"}, follow_redirects=False)
    assert signed.status_code == 303 and signed.headers["location"] == "/"  # never off-site
    cookie = signed.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert TOKEN.lower() not in cookie  # a session, not the token
    assert client.get("/alerts").status_code == 200 and client.get("/api/rates").status_code == 200
    # The cookie reads; it never changes anything (no CSRF through a signed-in browser).
    assert client.post("/api/alerts/a-billing/ack", json={"by": "csrf"}).status_code == 401
    spec = client.get("/openapi.json").json()
    assert spec["paths"]["/api/rates"]["get"]["security"] == [{"bearerAuth": []}]


@pytest.mark.slow
def test_cors_is_off_by_default_and_on_only_for_configured_origins(world):
    preflight = {"Origin": "https://grafana.example", "Access-Control-Request-Method": "POST"}
    off = client_for(world[0])
    assert "access-control-allow-origin" not in off.get("/api/rates", headers={"Origin": "https://x.example"}).headers
    assert "access-control-allow-origin" not in off.options("/api/silences", headers=preflight).headers
    on = client_for(world[0], cors_origins=("https://grafana.example",))
    allowed = on.get("/api/rates", headers={"Origin": "https://grafana.example"})
    assert allowed.headers["access-control-allow-origin"] == "https://grafana.example"
    assert "access-control-allow-origin" not in on.get("/api/rates", headers={"Origin": "https://x.example"}).headers


@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES + ["/routes/" + quote(HTML_ROUTE, safe=""), "/signin"])
def test_pages_carry_a_csp_without_inline_scripts_and_load_nothing_from_elsewhere(client, path):
    response = client.get(path)
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    # Nothing leaks to other sites; the sign-in form sends its own origin so that /signin can check it.
    assert response.headers["referrer-policy"] == ("same-origin" if path == "/signin" else "no-referrer")
    html = response.text
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert scripts and all(re.search(r'\bsrc="/static/[\w.-]+\.js\?v=[0-9a-f]+"', s) for s in scripts), scripts
    assert not re.search(r"<script\b[^>]*>(?!</script>)\s*\S", html)  # no inline code
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handlers
    assert not re.search(r"<[^>]+\sstyle=", html)  # no inline styles either (style-src 'self')
    assert not re.search(r"""<(?:script|link|img|iframe)\b[^>]*(?:src|href)="(?:https?:)?//""", html)  # no CDN
    assert 'class="skip" href="#main"' in html and 'id="main"' in html


def test_plotly_is_served_from_the_plotly_package(client):
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and js.content == BUNDLE.read_bytes()
    css = client.get("/static/plotly-base.css")
    assert ".js-plotly-plot .plotly .modebar" in css.text and "outline:none" not in css.text
    page = client.get("/routes/billing-faq").text
    assert 'id="plotly.js-style-global" class="no-inline-styles"' in page


# -- pages ------------------------------------------------------------------------
def test_overview_lists_routes_worst_first_with_trend_interval_and_alert_badges(client):
    html = client.get("/", params={"window": "all"}).text
    api_order = [r["route"] for r in client.get("/api/rates", params={"window": "all", "sort": "priority"}).json()]
    positions = [html.index(f'href="/routes/{quote(r, safe="")}"') for r in api_order]
    assert positions == sorted(positions)
    row = html[html.index('href="/routes/billing-faq"') :]
    row = row[: row.index("</tr>")]
    assert "1 firing" in row and "<polyline points=" in row and "–" in row


def test_route_page_has_the_chart_source_verdicts_versions_and_alerts(client):
    html = client.get("/routes/billing-faq").text
    assert 'data-src="/api/routes/billing-faq?window=6h"' in html
    assert "gen-2026-11" in html and "contradicted" in html and "a-billing" in html
    assert client.get("/routes/no-such-route").status_code == 404


def test_alerts_page_has_ack_and_silence_forms_for_open_alerts(client):
    html = client.get("/alerts").text
    assert 'data-path="/api/alerts/a-html/ack"' in html
    assert 'data-path="/api/silences"' in html and 'name="duration"' in html


def test_sql_and_html_are_stored_verbatim_and_shown_inertly(client):
    client.post(
        "/api/silences",
        json={
            "matchers": ['route=<img src=x onerror="alert(1)">'],
            "by": "<b>me</b>",
            "comment": EVIL_TEXT,
            "duration": "1h",
        },
        headers=AUTH,
    )
    rates = {r["route"] for r in client.get("/api/rates", params={"window": "all"}).json()}
    assert {HTML_ROUTE, SQL_ROUTE, SQL_ROUTE_IN_CONTRACT} <= rates
    pages = [
        client.get("/", params={"window": "all"}).text,
        client.get("/alerts").text,
        client.get("/routes/" + quote(HTML_ROUTE, safe="")).text,
        client.get("/routes/" + quote(SQL_ROUTE_IN_CONTRACT, safe="")).text,
    ]
    for html in pages:
        assert "<script>alert" not in html and "<img src=x" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(&#34;route&#34;)&lt;/script&gt;" in pages[0]
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in pages[1] and "{{ 7*7 }}" in pages[1]
    assert "&lt;b&gt;m&lt;/b&gt;" in pages[3]  # a version value from a trace
    assert f'href="/routes/{quote(SQL_ROUTE, safe="")}"' in pages[0]


# -- issues ------------------------------------------------------------------------
@pytest.mark.slow
def test_issue_list_filters_and_sorts(client):
    listed = client.get("/api/issues").json()
    assert {i["issue_id"] for i in listed} == {"iss-numbers", "iss-evil"}
    numbers = next(i for i in listed if i["issue_id"] == "iss-numbers")
    assert numbers["count"] == 12 and numbers["routes"] == ["billing-faq"] and numbers["trend"] == [12]
    assert [i["issue_id"] for i in client.get("/api/issues", params={"route": "billing-faq"}).json()] == ["iss-numbers"]
    assert [i["issue_id"] for i in client.get("/api/issues", params={"q": "REFUND numbers"}).json()] == ["iss-numbers"]
    by_count = [i["count"] for i in client.get("/api/issues", params={"sort": "count"}).json()]
    assert by_count == sorted(by_count, reverse=True)
    assert all(i["state"] == "new" for i in client.get("/api/issues", params={"state": "new"}).json())
    bad = client.get("/api/issues", params={"sort": "chaos"})
    assert bad.status_code == 422 and bad.json()["field"] == "query.sort"


@pytest.mark.slow
def test_issue_detail_members_map_and_runbook(client):
    detail = client.get("/api/issues/iss-numbers").json()
    # Up to 5 distinct traces: the clustering's 3 exemplars first, then the most typical other members.
    assert len(detail["exemplars"]) == 5 and all(e["route"] == "billing-faq" for e in detail["exemplars"])
    assert len({e["trace_id"] for e in detail["exemplars"]}) == 5 and detail["exemplars_note"] == ""
    members = client.get("/api/issues/iss-numbers/members", params={"limit": 5}).json()
    assert len(members) == 5 and all(m["verdict"] in FAILED_VERDICTS and m["trace_id"] for m in members)
    points = client.get("/api/issues/iss-numbers/map").json()["points"]
    assert {(p["issue_id"], p["member"]) for p in points} == {("iss-numbers", True), ("iss-evil", False)}
    md = client.get("/api/issues/iss-numbers/runbook", params={"format": "md"})
    assert md.headers["content-type"].startswith("text/markdown") and "Invented refund numbers" in md.text
    html = client.get("/api/issues/iss-evil/runbook", params={"format": "html"})
    assert html.headers["content-type"].startswith("text/html")
    assert "<script>alert" not in html.text and "&lt;script&gt;" in html.text
    for path in ("/api/issues/nope", "/api/issues/nope/members", "/api/issues/nope/map", "/api/issues/nope/runbook"):
        response = client.get(path)
        assert response.status_code == 404 and "no issue 'nope'" in response.json()["detail"], path
    assert client.get("/api/issues/iss-numbers/runbook", params={"format": "pdf"}).status_code == 422


def test_issue_resolve_and_merge(world):
    client = client_for(world[0])
    resolved = client.post("/api/issues/iss-evil/resolve", json={"by": "oncall"}, headers=AUTH)
    assert resolved.status_code == 200 and resolved.json()["state"] == "resolved"
    assert [i["issue_id"] for i in client.get("/api/issues", params={"state": "resolved"}).json()] == ["iss-evil"]
    again = client.post("/api/issues/iss-evil/resolve", json={"by": "oncall"}, headers=AUTH)
    assert again.status_code == 409 and "already resolved" in again.json()["detail"]
    assert client.post("/api/issues/nope/resolve", json={"by": "x"}, headers=AUTH).status_code == 404
    into_self = client.post("/api/issues/iss-evil/merge", json={"into": "iss-evil", "by": "x"}, headers=AUTH)
    assert into_self.status_code == 422 and "itself" in into_self.json()["detail"]
    assert client.post("/api/issues/iss-evil/merge", json={"into": "nope", "by": "x"}, headers=AUTH).status_code == 404


@pytest.mark.slow
def test_a_merged_issues_page_leads_to_the_issue_it_joined(world, client):
    """A runbook or a page printed before a merge still leads on-call to where the claims are now."""
    services, _ = world
    survivor = services.issues.issues.get("iss-numbers")
    issue_repository(services.store).save(
        [replace(survivor, issue_id="iss-joined", name="Joined", state="resolved", merged_into="iss-numbers")]
    )
    notice = client.get("/issues/iss-joined").text.split('id="merged-into">')[1].split("</p>")[0]
    assert 'href="/issues/iss-numbers"' in notice and "continue there" in notice
    lead = client.get("/issues/iss-joined").text.split('<p class="lead">')[1].split("</p>")[0]
    assert '<span class="badge merged">merged</span>' in lead and "resolved" not in lead  # not a fixed issue
    assert 'id="merged-into"' not in client.get("/issues/iss-numbers").text
    joined, survivor = client.get("/issues/iss-joined").text, client.get("/issues/iss-numbers").text
    for action in ("/resolve", "/merge", "/assign", "/link"):  # it is worked on where it continues
        assert action not in joined and action in survivor, action
    assert 'id="activity"' in joined
    # the API says what the page says
    shown = client.get("/api/issues/iss-joined").json()
    assert (shown["state"], shown["merged_into"]) == ("merged", "iss-numbers")


@pytest.mark.slow
def test_issue_pages_show_the_list_the_runbook_the_map_and_promote_controls(client):
    listing = client.get("/issues").text
    assert 'href="/issues/iss-numbers"' in listing and "Invented refund numbers" in listing
    assert "<polyline points=" in listing
    page = client.get("/issues/iss-numbers").text
    assert 'data-src="/api/issues/iss-numbers/map"' in page and 'class="runbook-body"' in page
    assert 'data-path="/api/issues/iss-numbers/resolve"' in page
    assert client.get("/issues/nope").status_code == 404
    assert client.get("/issues", params={"sort": "chaos"}).status_code == 200  # a page falls back, never errors


def test_issue_names_and_claim_texts_are_inert_on_issue_pages(client):
    for html in (client.get("/issues").text, client.get("/issues/iss-evil").text):
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(&#34;issue&#34;)&lt;/script&gt; {{ 7*7 }}" in html
    assert "49" not in client.get("/issues/iss-evil").text.split("<h1>")[1].split("</h1>")[0]


# -- promotions and the eval set ----------------------------------------------------
@pytest.mark.slow
def test_promote_review_export_and_report(world):
    client = client_for(world[0])
    exemplars = client.get("/api/issues/iss-numbers").json()["exemplars"]
    traces = list(dict.fromkeys(e["trace_id"] for e in exemplars))[:2]
    assert len(traces) == 2
    made = client.post(
        "/api/promotions", json={"issue_id": "iss-numbers", "trace_ids": traces, "by": "oncall"}, headers=AUTH
    )
    assert made.status_code == 201, made.text
    items = made.json()
    assert sorted(i["origin_trace_id"] for i in items) == sorted(traces)
    assert all(i["state"] == "proposed" and i["origin_issue_id"] == "iss-numbers" for i in items)
    twice = client.post(
        "/api/promotions", json={"issue_id": "iss-numbers", "trace_ids": traces[:1], "by": "oncall"}, headers=AUTH
    )
    assert twice.status_code == 409 and "near duplicate" in twice.json()["detail"]
    queue = client.get("/api/promotions", params={"state": "proposed"}).json()
    assert {i["item_id"] for i in items} <= {i["item_id"] for i in queue}

    first, second = items[0]["item_id"], items[1]["item_id"]
    unnamed = client.post(f"/api/promotions/{first}/approve", json={"by": "reviewer"}, headers=AUTH)
    assert unnamed.status_code == 403, unnamed.text  # whoever holds an unnamed token can claim any name
    assert unnamed.json()["detail"].startswith("signing off needs a token with a name")
    approved = client.post(f"/api/promotions/{first}/approve", json={"reason": "clear case"}, headers=AS_REVIEWER)
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    assert approved.json()["reviewed_by"] == "reviewer"
    again = client.post(
        f"/api/promotions/{first}/reject", json={"by": "reviewer", "reason": "changed my mind"}, headers=AUTH
    )
    assert again.status_code == 409 and "already approved" in again.json()["detail"]
    no_reason = client.post(f"/api/promotions/{second}/reject", json={"by": "reviewer"}, headers=AUTH)
    assert no_reason.status_code == 422 and no_reason.json() == {
        "detail": "reason: is required",
        "field": "body.reason",
    }
    rejected = client.post(
        f"/api/promotions/{second}/reject", json={"by": "reviewer", "reason": "ambiguous"}, headers=AUTH
    )
    assert rejected.json()["state"] == "rejected"
    history = [h["action"] for h in client.get(f"/api/promotions/{first}").json()["history"]]
    assert history == ["proposed", "approved"]

    export = client.get("/api/promotions/export")
    assert export.headers["content-type"].startswith("application/x-ndjson")
    lines = [orjson.loads(line) for line in export.content.splitlines()]
    assert [line["item_id"] for line in lines] == [first]
    report = client.get("/api/eval/report").json()
    assert report["items"] >= 1 and "faithfulness" in report and "abstention" in report
    assert client.get("/api/eval/agreement").json() == {"pairs": 0, "message": NO_PAIRS}  # no human label yet
    verifier = world[0].store.query(
        "SELECT claim_idx, verdict FROM claim_labels WHERE item_id = {id:String} ORDER BY claim_idx", {"id": first}
    )
    add_human_labels(
        EvalRepository(world[0].store), first, {r["claim_idx"]: r["verdict"] for r in verifier}, by="reviewer", at=NOW
    )
    agreement = client.get("/api/eval/agreement").json()
    assert agreement["pairs"] == len(verifier) > 0 and agreement["observed"]["value"] == 1.0, agreement
    gate = client.get("/api/eval/gate", params={"min_faithfulness": 1.0}).json()
    assert set(gate) >= {"passed", "failures"}


@pytest.mark.parametrize(
    "method, path, body, status, fragment",
    [
        ("POST", "/api/promotions", {"issue_id": "nope", "by": "x"}, 404, "no issue 'nope'"),
        (
            "POST",
            "/api/promotions",
            {"issue_id": "iss-numbers", "trace_ids": ["tr-none"], "by": "x"},
            422,
            "unknown trace ids: tr-none",
        ),
        ("POST", "/api/promotions/e-nope/approve", {"by": "x"}, 404, "no eval item 'e-nope'"),
        ("POST", "/api/promotions/e-nope/reject", {"by": "x", "reason": "r"}, 404, "no eval item 'e-nope'"),
        ("GET", "/api/promotions/e-nope", None, 404, "no eval item 'e-nope'"),
        ("GET", "/api/eval/gate?slice_min=stakes:high", None, 422, "part 'stakes:high': write DIM=VALUE:MIN"),
        (
            "GET",
            "/api/eval/gate?min_faithfulness=2",
            None,
            422,
            "min_faithfulness: input should be less than or equal to 1",
        ),
    ],
)
def test_bad_eval_requests_are_4xx_with_a_message(client, method, path, body, status, fragment):
    response = client.request(method, path, json=body, headers=AUTH)
    assert response.status_code == status, response.text
    assert fragment in str(response.json()["detail"])


def test_eval_page_shows_the_queue_with_review_forms_and_the_figures(client):
    made = client.post(
        "/api/promotions", json={"issue_id": "iss-evil", "trace_ids": ["tr-evil-0"], "by": "oncall"}, headers=AUTH
    )
    assert made.status_code == 201, made.text
    html = client.get("/eval").text
    proposed = client.get("/api/promotions", params={"state": "proposed"}).json()
    assert proposed
    for item in proposed:
        assert f'data-path="/api/promotions/{item["item_id"]}/approve"' in html
        assert f'data-path="/api/promotions/{item["item_id"]}/reject"' in html
    assert "Faithfulness" in html and 'href="/api/promotions/export"' in html
    assert "<script>alert" not in html  # the hostile question is shown as text


# -- ops ----------------------------------------------------------------------------
def test_a_named_token_signs_as_its_holder(world):
    """Issue 23, H4: the approver is the token's holder, so a self-asserted `by` can't pass the four-eyes check."""
    alice, alice_hash = new_token()
    bob, bob_hash = new_token()
    client = client_for(world[0], token_hashes=(TOKEN_HASH, f"{alice_hash} alice", f"{bob_hash} Bob Smith"))
    as_alice, as_bob = {"Authorization": f"Bearer {alice}"}, {"Authorization": f"Bearer {bob}"}
    exemplars = client.get("/api/issues/iss-numbers").json()["exemplars"]
    trace = list(dict.fromkeys(e["trace_id"] for e in exemplars))[-1]
    made = client.post("/api/promotions", json={"issue_id": "iss-numbers", "trace_ids": [trace]}, headers=as_alice)
    assert made.status_code == 201, made.text
    item = made.json()[0]
    assert item["proposed_by"] == "alice"

    posing = client.post(f"/api/promotions/{item['item_id']}/approve", json={"by": "bob"}, headers=as_alice)
    assert posing.status_code == 403
    assert posing.json()["detail"].startswith(
        "this token is 'alice''s, so changes made with it are recorded as 'alice'"
    )
    own = client.post(f"/api/promotions/{item['item_id']}/approve", json={"by": "ALICE\u200b"}, headers=as_alice)
    assert own.status_code == 422 and "cannot approve it too" in own.json()["detail"]
    approved = client.post(f"/api/promotions/{item['item_id']}/approve", json={}, headers=as_bob)
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] == "approved"
    history = client.get(f"/api/promotions/{item['item_id']}").json()["history"]
    assert [(h["action"], h["by"]) for h in history] == [("proposed", "alice"), ("approved", "Bob Smith")]

    anonymous_name = client.post("/api/alerts/a-billing/ack", json={"note": "x"}, headers=AUTH)  # unnamed token
    assert anonymous_name.status_code == 422 and anonymous_name.json()["field"] == "body.by"
    acked = client.post("/api/alerts/a-billing/ack", json={"note": "mine"}, headers=as_bob)
    assert acked.status_code == 200 and acked.json()["acked_by"] == "Bob Smith"


def test_the_cli_sends_no_name_of_its_own_with_a_named_token(world, monkeypatch):
    """With a named token and no --by, the CLI sent the login name and the API answered "leave out by", though the
    user had left it out. Now a left-out --by goes as a default the API uses only for an unnamed token."""
    from click.testing import CliRunner

    from services.app.cli import main
    from tests.support.cli import answer_http_with

    carol, carol_hash = new_token()
    client = client_for(world[0], token_hashes=(TOKEN_HASH, f"{carol_hash} carol"))
    monkeypatch.setenv("CLAIMWATCH_IDENTITY__NAME", "oncall-laptop")

    def run(token: str, *args: str):
        api = answer_http_with(client, monkeypatch, token)
        return CliRunner().invoke(main, [*args, "--api", "http://testserver"], obj=api)

    def silenced_by(token: str, *by: str) -> dict:
        made = run(
            token, "alerts", "silence", "--match", "route=billing-faq", "--duration", "1m", "--comment", "c", *by
        )
        assert made.exit_code == 0, made.output
        silence_id = made.output.split()[1]
        assert run(token, "alerts", "unsilence", silence_id).exit_code == 0  # ended at once: the world stays as it was
        return next(x for x in client.get("/api/silences").json() if x["silence_id"] == silence_id)

    assert silenced_by(carol)["created_by"] == "carol"
    posing = run(carol, "alerts", "ack", "a-billing", "--note", "x", "--by", "dana")
    assert posing.exit_code == 1 and "recorded as 'carol'" in posing.output
    unnamed = silenced_by(TOKEN)
    assert unnamed["created_by"] == "oncall-laptop" and unnamed["ended_by"] == "oncall-laptop"


def test_the_cli_never_answers_for_another_stack_than_the_store_it_was_given(world, monkeypatch, tmp_path):
    """`claimwatch rates --clickhouse chdb:PATH` printed the routes of a demo listening on 8080, not the store it was
    given. The API says which store it serves (GET /api/about); the CLI reads the named store when they differ."""
    from click.testing import CliRunner

    from services.app.cli import main
    from services.store.backends import public_url
    from tests.support.cli import answer_http_with

    client = client_for(world[0])
    assert client.get("/api/about").json() == {"store": world[0].store.url}
    assert world[0].store.url == public_url(world[0].store.url) and world[0].store.url.startswith("chdb:/")
    api = answer_http_with(client, monkeypatch, TOKEN)
    run = lambda *args: CliRunner().invoke(main, [*args, "--api", "http://testserver"], obj=api)  # noqa: E731
    served = run("rates", "--window", "2h", "-o", "json")
    assert served.exit_code == 0 and "billing-faq" in served.output  # no store named: the API answers
    other = tmp_path / "other"
    named = run("rates", "--window", "2h", "--clickhouse", f"chdb:{other}")
    # (in this one process chDB cannot open a second store, so the read itself fails here; a CLI of its own reads it)
    said = " ".join(named.output.split())
    assert (
        f"the claimwatch API at http://testserver serves another store ({world[0].store.url}); "
        f"reading chdb:{other} directly" in said
    )
    assert "billing-faq" not in named.output
    same = run("rates", "--window", "2h", "-o", "json", "--clickhouse", world[0].store.url)
    assert same.exit_code == 0 and "billing-faq" in same.output and "another store" not in same.output


def test_readiness_names_a_broker_that_has_not_answered_a_worker_and_ignores_it_in_the_api_alone(client, world):
    services = world[0]
    assert services.health.broker is None  # built for the API alone: it uses no broker, so none is checked
    assert client.get("/readyz").json() == {"ready": True}
    assert "claimwatch_broker_up" not in client.get("/metrics").text
    services.health.broker = BrokerHealth()
    services.health.broker.asking(time.monotonic() - 60)
    services.health.broker.failed("KafkaConnectionError: Connection refused")
    try:
        down = client.get("/readyz")
        assert down.status_code == 503
        assert re.fullmatch(
            r"broker unreachable: no answer for 6\d s \(last error: KafkaConnectionError: "
            r"Connection refused\)",
            down.json()["reason"],
        ), down.json()
        services.health.broker.answered(time.monotonic())
        assert client.get("/readyz").json() == {"ready": True}
    finally:
        services.health.broker = None


def test_health_readiness_and_dlq(client, world):
    services = world[0]
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"ready": True}
    services.health.mark_failed("insert timed out", datetime.now(UTC))
    try:
        down = client.get("/readyz")
        assert down.status_code == 503 and "insert timed out" in down.json()["reason"]
    finally:
        services.health.mark_ok()
    dlq = client.get("/api/dlq", params={"samples": 1}).json()
    assert dlq == [
        {
            "reason": "not_json",
            "count": 1,
            "samples": [
                {"reason": ": not JSON", "source": "claimwatch.verdicts/0/7", "size": 5, "envelope_index": None}
            ],
        }
    ]


def test_metrics_carry_the_per_route_rate_of_the_30m_window(client):
    rates = {r["route"]: r for r in client.get("/api/rates", params={"window": "30m"}).json()}
    text = client.get("/metrics").text
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("claimwatch_route_hallucination_rate"):
                samples[(s.name, s.labels["route"], s.labels["window"])] = s.value
    for route, r in rates.items():
        assert samples[("claimwatch_route_hallucination_rate", route, "30m")] == pytest.approx(r["rate"])
        assert samples[("claimwatch_route_hallucination_rate_lower", route, "30m")] == pytest.approx(r["interval"][0])
        assert samples[("claimwatch_route_hallucination_rate_upper", route, "30m")] == pytest.approx(r["interval"][1])
    assert {k[1] for k in samples} == set(rates)
