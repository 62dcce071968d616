"""Issue 23, H1 and H2: what producers choose (version keys and values, claims per answer) can't make one read
cost the whole store. The store here holds what an event from before the shape bounds could leave: 4,000 slice
dimensions, a version key with 2,000 values on one route, and one answer with 3,000 claims."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import orjson
import pytest
from fastapi.testclient import TestClient

from services.api.app import create_api
from services.app.compose import open_components
from services.app.settings import Settings
from services.contract.decode import Decoder
from services.contract.model import MAX_VERSION_KEYS, Claim, VerdictEvent
from services.issues.traces import CLAIMS_PER_PAGE
from services.rates.report import MAX_SLICE_DIMS, MAX_SLICE_VALUES
from services.store.writer import EventWriter

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
KEYED_EVENTS = 250  # x 16 version keys each: 4,000 dimensions
VALUES = 2_000  # values of version.model on one route
BIG_CLAIMS = 3_000


def event(i: int, versions: dict[str, str], route: str = "wide") -> VerdictEvent:
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": f"{route}-{i}",
                "trace_id": f"tr-{route}-{i}",
                "observed_at": (START + timedelta(seconds=i)).isoformat(),
                "route": route,
                "versions": versions,
                "claims": [{"verdict": "supported"}, {"verdict": "contradicted" if i % 3 else "supported"}],
            }
        )
    )


def big_answer() -> VerdictEvent:
    """An answer with more claims than the contract now allows, as one stored before the bound would be."""
    claims = [Claim(verdict="unsupported" if k % 4 == 0 else "supported", text=f"claim {k}") for k in range(BIG_CLAIMS)]
    return msgspec.structs.replace(event(0, {}, "big"), claims=claims)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    settings = Settings(
        clickhouse=f"chdb:{tmp_path_factory.mktemp('shapes') / 'ch'}",
        retention={"raw_days": 3650, "aggregate_days": 3650},
        api={"anonymous_reads_per_minute": 100_000},
    )
    components = open_components(settings, starting=True)
    keyed = [event(i, {f"k{i}-{j}": "v" for j in range(MAX_VERSION_KEYS)}) for i in range(KEYED_EVENTS)]
    valued = [event(i, {"model": f"m-{i}"}, "many-models") for i in range(VALUES)]
    EventWriter(components.store).write([*keyed, *valued, big_answer()], [])
    with TestClient(create_api(components)) as c:
        yield c
    components.close()


def test_slices_answer_a_bounded_number_of_dimensions_and_values(client):
    response = client.get("/api/slices", params={"window": "all"})
    assert response.status_code == 200
    body = response.json()
    assert 0 < len(body) <= MAX_SLICE_DIMS
    assert {"query_type", "stakes", "mix", "version.model"} <= set(body)  # the most-used dimensions come first
    assert all(len(entries) <= MAX_SLICE_VALUES for entries in body.values())
    assert len(response.content) < 200_000


def test_slices_values_worst_first_up_to_the_limit_asked(client):
    body = client.get("/api/slices", params={"window": "all", "dim": "version.model", "limit": 5}).json()
    rates = [e["rate"] for e in body["version.model"]]
    assert len(rates) == 5 and rates == sorted(rates, reverse=True) and rates[0] == 0.5


def test_an_unknown_dimension_is_named_without_listing_every_stored_one(client):
    response = client.get("/api/slices", params={"window": "all", "dim": ["nope", "version.k3-1"]})
    assert response.status_code == 422
    assert "unknown slice dimension(s) 'nope'" in response.json()["detail"]
    assert len(response.content) < 1_000


def test_too_many_dimensions_at_once_name_the_limit(client):
    dims = [f"version.k{i}-0" for i in range(MAX_SLICE_DIMS + 1)]
    response = client.get("/api/slices", params={"window": "all", "dim": dims})
    assert response.status_code == 422
    assert (
        response.json()["detail"] == f"{MAX_SLICE_DIMS + 1} slice dimensions asked for; the limit is {MAX_SLICE_DIMS}"
    )


def test_the_route_page_lists_the_newest_versions_and_says_how_many_there_are(client):
    detail = client.get("/api/routes/many-models", params={"window": "6h"}).json()
    assert detail["versions_seen"] == VALUES
    assert [v["value"] for v in detail["versions"]] == [f"m-{i}" for i in range(VALUES - 50, VALUES)]
    page = client.get("/routes/many-models", params={"window": "6h"})
    assert page.status_code == 200 and len(page.content) < 300_000
    assert "The 50 first seen last of 2,000 version values in this range." in page.text


def test_a_trace_pages_its_claims(client):
    first = client.get("/api/traces/tr-big-0").json()
    assert (first["claim_count"], first["failed_claims"]) == (BIG_CLAIMS, BIG_CLAIMS // 4)
    assert [c["index"] for c in first["claims"]] == list(range(CLAIMS_PER_PAGE))
    assert (first["claims_page"], first["claims_pages"]) == (1, BIG_CLAIMS // CLAIMS_PER_PAGE)
    third = client.get("/api/traces/tr-big-0", params={"claims_page": 3}).json()
    assert [c["claim_key"] for c in third["claims"]][:2] == ["big-0:200", "big-0:201"]
    assert third["claims"][0]["text"] == "claim 200"
    page = client.get("/traces/tr-big-0", params={"claims_page": 2})
    assert page.status_code == 200 and len(page.content) < 400_000
    assert "3,000 claims, 750 failed: 101–200 shown" in page.text and "page 2 of 30" in page.text
    assert 'href="?claims_page=3"' in page.text and 'href="?claims_page=1"' in page.text


def test_a_claims_page_past_the_last_is_a_plain_422(client):
    response = client.get("/api/traces/tr-big-0", params={"claims_page": 31})
    assert response.status_code == 422
    assert response.json()["detail"] == "claims page 31 is past the last: this trace has 30 pages of 100 claims"
