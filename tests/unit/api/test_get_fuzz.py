"""Hypothesis over every query and path parameter of every GET endpoint and page (issue 23), over the API test's
store (simulated traffic, alerts, named issues and hostile rows), through the real app.

No input gets a 5xx; a refusal from the API is one short plain sentence (``{"detail": "..."}``), never pydantic's
list; a page answers HTML; a redirect stays on the site. The routes come from the app itself, so a new endpoint is
fuzzed without editing this file; a parameter this file cannot generate values for fails the test, as does a route
that never answers anything but a refusal (its strategies would only be testing the validation).
"""

from __future__ import annotations

import re
import time
import types
import typing
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import quote, urlsplit

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AwareDatetime
from starlette.routing import Mount, Route

from services.alerts.detection.expectations import SORTS
from services.api.pages import API_PREFIXES, ISSUE_SORTS, WINDOWS
from services.app.compose import build
from services.app.sections import SloSettings
from services.store.evalset import EvalRepository
from tests.support.eval_runs import Answer, record_run
from tests.unit.api.test_api import AUTH, HTML_ROUTE, SQL_ROUTE, client_for, world  # noqa: F401  (world is a fixture)

EXAMPLES = 30  # per route, and 5 more per query parameter up to 40: about 40 routes in about 40 s on two cores
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
MAX_ERROR_BYTES = 4096
MAX_QUERY = 40_000  # encoded characters; httpx refuses a URL over 64 KB before sending it
FUZZ_RUNS_AT = datetime(2026, 11, 21, 9, tzinfo=UTC)
NO_ROWS = {"item_id"}  # the store holds no eval item (proposing one loads the embedding model): only refusals

# Text an outsider would try: empty, numbers past every limit, non-numbers, NUL, invisible and right-to-left
# characters, injection, traversal, and long strings.
HOSTILE_TEXT = (
    "",
    " ",
    "0",
    "-1",
    "-0",
    "1.5",
    "1e309",
    "-1e309",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    str(2**63),
    str(-(2**63) - 1),
    "9" * 40,
    "0x10",
    "1_000",
    "true",
    "null",
    "[]",
    "{}",
    "\x00",
    "a\x00b",
    "\u200b",
    "alice\u200b",
    "\u202eevil",
    "\ufeff",
    "\u2028",
    "\U0001d518",
    "é",
    ".",
    "..",
    "../..",
    "..%2F..",
    "%00",
    "%2e%2e",
    "' OR '1'='1' --",
    "<script>x</script>",
    "{{ 7*7 }}",
    "\\",
    "//evil.example",
    "https://evil.example/",
    "javascript:alert(1)",
    "*",
    "%",
    "_",
)
LONG = st.builds(
    lambda piece, n: piece * (n // len(quote(piece))),  # up to 10,000 characters once encoded
    st.sampled_from(["x", "9", "é", "\u200b", "\x00", "../", "%2F"]),
    st.integers(1_000, 10_000),
)
TEXT = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=30), LONG)
TRAVERSAL = (
    "..",
    ".",
    "%2e%2e",
    "%2E",
    "..%2F..%2F..%2Fetc%2Fpasswd",
    "%2F",
    "a%2Fb",
    "%252e%252e%252f",
    "%00",
    "%c0%ae%c0%ae",
    "%ff",
    "%5C..%5C",
    "....//",
    "..;/",
    "%2e%2e/%2e%2e/app.py",
    "~root",
    "%20",
    "%",
)


def datetimes() -> st.SearchStrategy[str]:
    zones = st.sampled_from(
        [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-23, minutes=-59)), None]
    )  # None: a naive time
    stamps = st.builds(lambda at, zone: at.replace(tzinfo=zone).isoformat(), st.datetimes(), zones)
    stored = st.datetimes(datetime(2026, 11, 21, 7), datetime(2026, 11, 22), timezones=st.just(UTC))
    edges = st.sampled_from(
        [
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59+14:00",
            "1970-01-01T00:00:00Z",
            "2106-02-07T06:28:16Z",
            "2026-11-21T08:30:00Z",
            "2026-11-21T08:30:00",
            "2026-13-40T25:61Z",
            "1e20",
            "-62135596800",
            "253402300800",
            "1763712000",
        ]
    )  # numbers: Unix times
    return st.one_of(stamps, edges, stored.map(datetime.isoformat))


def numbers(integer: bool, metadata) -> st.SearchStrategy[str]:
    """Inside the declared bounds, just past them, and far past them (NaN and infinities for floats)."""
    low = next((m.ge for m in metadata if hasattr(m, "ge")), None)
    high = next((m.le for m in metadata if hasattr(m, "le")), None)
    near = [v for bound in (low, high) if bound is not None for v in (bound - 1, bound, bound + 1)] or [0]
    if integer:
        inside = st.integers(int(low) if low is not None else -1000, int(high) if high is not None else 1000)
        values = st.one_of(inside, st.sampled_from([int(v) for v in near]), st.integers(-(2**70), 2**70))
    else:
        inside = st.floats(low if low is not None else -1e6, high if high is not None else 1e6)
        values = st.one_of(inside, st.sampled_from(near), st.floats(allow_nan=True, allow_infinity=True))
    return values.map(str)


def declared(annotation) -> tuple[object, bool]:
    """The one non-None type of a parameter's annotation (Optional[X] -> X), and whether it is a list."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0], True
    return annotation, False


def typed_values(field, samples: dict[str, list[str]]) -> st.SearchStrategy[str]:
    """Values of the parameter's declared type, on the wire (text), edges included; known names get samples."""
    kind, _ = declared(field.field_info.annotation)
    metadata = field.field_info.metadata
    choices = [st.sampled_from(samples[field.alias])] if field.alias in samples else []
    if typing.get_origin(kind) is typing.Literal:
        choices.append(st.sampled_from([str(v) for v in typing.get_args(kind)]))
    elif kind is bool:
        choices.append(st.sampled_from(["true", "false", "1", "0", "yes", "off", "TRUE", "2", "maybe"]))
    elif kind in (int, float):
        choices.append(numbers(kind is int, metadata))
    elif kind in (datetime, AwareDatetime):
        choices.append(datetimes())
    elif kind is str:
        pattern = next((m.pattern for m in metadata if getattr(m, "pattern", None)), None)
        choices.append(st.from_regex(pattern, fullmatch=True) if pattern else TEXT)
    else:
        pytest.fail(f"no strategy for query parameter {field.alias!r} of type {kind!r}; add one to typed_values")
    return st.one_of(*choices)


@st.composite
def requests(draw, template: str, fields, real) -> tuple[str, list[tuple[str, str]]]:
    """(path, query pairs). Half are well formed (real ids, values of each parameter's type) so that they reach the
    handlers; the rest mix in hostile text and traversal. Parameters are left out, repeated, and joined by unknown
    ones; the query stays under MAX_QUERY."""
    well_formed = draw(st.booleans())
    path = PARAM.sub(lambda m: draw(path_values(real["path"][m[1]], well_formed)), template)
    pairs = []
    for field in fields:
        values = typed_values(field, real["query"])
        values = values if well_formed else st.one_of(values, TEXT)
        many = st.integers(0, 60) if declared(field.field_info.annotation)[1] else st.sampled_from([0, 1, 1, 1, 2, 3])
        pairs += [(field.alias, draw(values)) for _ in range(draw(many))]
    names = st.one_of(
        st.sampled_from(["limit", "offset", "__proto__", "", "window[]"]), st.text(min_size=1, max_size=20)
    )
    pairs += [(draw(names), draw(TEXT)) for _ in range(draw(st.integers(0, 2)))]
    kept, size = [], 0
    for name, value in draw(st.permutations(pairs)):
        size += len(quote(name)) + len(quote(value)) + 2
        if size <= MAX_QUERY:
            kept.append((name, value))
    return path, kept


def path_values(real: list[str], well_formed: bool) -> st.SearchStrategy[str]:
    """One path parameter, percent-encoded: a real id; or hostile text encoded in several ways (all of it, all but
    slashes, twice), and traversal sequences as written."""
    ids = st.sampled_from(real).map(lambda v: quote(v, safe=""))
    if well_formed:
        return ids
    text = st.one_of(st.sampled_from(real), TEXT)
    return st.one_of(
        ids,
        LONG.map(lambda v: quote(v, safe="")),
        st.builds(lambda v, safe: quote(v, safe=safe), text, st.sampled_from(["", "/"])),
        text.map(lambda v: quote(quote(v, safe=""), safe="")),
        st.sampled_from(TRAVERSAL),
        st.builds(lambda a, b: f"{a}/{b}", st.sampled_from(TRAVERSAL), st.sampled_from(real)),
    )


PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


def get_routes(api) -> list[tuple[str, list]]:
    """(path template, query parameter fields) of every GET route and mount; a route of another kind fails."""
    found = []
    for context in iter_route_contexts(api.routes):
        route = context.original_route
        if isinstance(route, Mount):
            found.append((context.path + "/{file:path}", []))
        elif isinstance(route, APIRoute):
            if "GET" in context.methods:
                found.append((context.path, [f for d in dependants(context.dependant) for f in d.query_params]))
        elif isinstance(route, Route):
            if "GET" in (context.methods or ()):
                found.append((context.path, []))
        else:
            pytest.fail(f"no strategy for a {type(route).__name__} at {context.path}; teach get_routes about it")
    return found


def dependants(dependant):
    yield dependant
    for sub in dependant.dependencies:
        yield from dependants(sub)


@pytest.fixture(scope="module")
def real(world):  # noqa: F811
    """Real values for each path parameter and some query parameters, so generated requests reach past lookups."""
    services, events = world
    routes = sorted({e.route for e in events})
    for hour, model in enumerate(("gen-2026-10", "gen-2026-11")):  # two runs to compare, the second the newest
        answers = {"ei-0": Answer(("supported",))}
        at = FUZZ_RUNS_AT + timedelta(hours=hour)
        record_run(EvalRepository(services.store), f"r-{model}", {"model": model}, answers, at)
    return {
        "path": {
            "route": [*routes, HTML_ROUTE, SQL_ROUTE],
            "alert_id": ["a-billing", "a-html"],
            "issue_id": ["iss-numbers", "iss-evil"],
            "trace_id": [e.trace_id for e in events[::97]],
            "item_id": ["ei-0000000000000000"],
            "file": ["app.css", "app.js", "favicon.svg"],
            "name": [SLO["name"]],
        },
        "query": {
            "window": [*WINDOWS, "31d", "32d", "0m", "1h30m", "999999999d", "1e9m"],
            "route": routes,
            "dim": ["query_type", "stakes", "mix", "version.model", "version.nope"],
            "sort": [*SORTS, *ISSUE_SORTS],
            "q": ["refund", "days"],
            "next": ["/", "/alerts", "//evil.example"],
            "slice_min": ["0.8", "stakes=high:0.9,query_type=lookup:0.85", "x=:", ":", "nan", "2", "=0.5"],
            "baseline": ["r-gen-2026-10", "model=gen-2026-10", "model="],
            "candidate": ["r-gen-2026-11", "model=gen-2026-11", "r-nope"],
        },
    }


SLO = {"name": "billing-faithfulness", "routes": "billing-*", "objective": 0.95}  # /api/slos/{name} finds one


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    services = build(world[0].settings.model_copy(update={"slo": [SloSettings(**SLO)]}), world[0].store)
    return client_for(services)  # anonymous reads limited to 60,000 a minute: throttling must not mask answers


def check(response) -> None:
    status, url = response.status_code, str(response.request.url)
    where = f"GET {url[:300]!r} -> {status}: {response.text[:300]!r}"
    assert status < 500, where
    if 300 <= status < 400:  # within the site (Starlette's slash redirect names the host the client asked for)
        location = response.headers["location"]
        assert urlsplit(location).netloc in ("", response.request.url.netloc.decode()), where
        assert not location.startswith(("//", "/\\")), where
    elif not response.request.url.path.startswith(API_PREFIXES):  # (httpx resolves /api/x/.. to /api, a page)
        assert response.headers["content-type"].startswith("text/html"), where
    elif status >= 400:
        assert response.headers["content-type"].startswith("application/json"), where
        body = response.json()
        assert isinstance(body, dict) and isinstance(body.get("detail"), str), where
        assert len(response.content) < MAX_ERROR_BYTES, where


@pytest.mark.slow
def test_no_get_answers_a_5xx_or_a_raw_refusal(client, real):
    routes = get_routes(client.app)
    assert {"/api/routes/{route:path}", "/issues/{issue_id}", "/static/{file:path}"} <= {t for t, _ in routes}
    statuses: dict[str, Counter] = {}
    failed = {}
    for template, fields in routes:
        missing = [n for n in PARAM.findall(template) if n not in real["path"]]
        assert not missing, f"{template}: no real values for path parameter(s) {missing}; add some to real()"

        @settings(FUZZ, max_examples=min(40, EXAMPLES + 5 * len(fields)))
        @given(request=requests(template, fields, real))
        def one(template, request):  # template passed in: a closure would see the loop's later values
            path, query = request
            response = client.get(path, params=query, follow_redirects=False)
            check(response)
            statuses.setdefault(template, Counter())[response.status_code] += 1

        started = time.monotonic()
        try:
            one(template)
        except Exception as exc:  # every route runs; the failures are reported together
            failed[template] = exc
        print(f"{template}: {sorted(statuses.get(template, {}).items())} in {time.monotonic() - started:.1f} s")
    assert not failed, "\n".join(f"{t}: {e!r}"[:2000] for t, e in failed.items())
    only_refused = [t for t, _ in routes if not set(PARAM.findall(t)) & NO_ROWS and min(statuses[t]) >= 400]
    assert not only_refused, f"never answered anything but a refusal: {only_refused}"


@pytest.mark.parametrize(
    "path, limit",
    [
        ("/api/alerts/{}", 200),
        ("/api/issues/{}", 200),
        ("/api/issues/{}/members", 200),
        ("/api/issues/{}/map", 200),
        ("/api/issues/{}/runbook", 200),
        ("/api/promotions/{}", 200),
        ("/api/traces/{}", 200),
        ("/api/routes/{}", 256),
    ],
)
def test_an_overlong_id_in_an_api_path_is_refused_naming_the_limit(client, path, limit):
    """Found by the fuzz above: a 10,000-character id came back whole inside a 10 KB 404."""
    assert client.get(path.format("x" * limit)).status_code == 404
    response = client.get(path.format("x" * (limit + 1)))
    assert response.status_code == 422
    assert response.json()["detail"].endswith(f"should have at most {limit} characters")
    assert len(response.content) < 200


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/api/alerts/{}/ack", {"by": "x"}),
        ("DELETE", "/api/silences/{}", {"by": "x"}),
        ("POST", "/api/issues/{}/resolve", {"by": "x"}),
        ("POST", "/api/issues/{}/merge", {"by": "x", "into": "y"}),
        ("POST", "/api/promotions/{}/approve", {"by": "x"}),
        ("POST", "/api/promotions/{}/reject", {"by": "x", "reason": "r"}),
        ("POST", "/api/review/{}/label", {"reviewer": "x", "label": "supported"}),
        ("POST", "/api/review/claims/{}/adjudicate", {"adjudicator": "x", "label": "supported"}),
    ],
)
def test_an_overlong_id_in_a_change_is_refused_naming_the_limit(client, method, path, body):
    response = client.request(method, path.format("x" * 201), json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].endswith("should have at most 200 characters") and len(response.content) < 200
