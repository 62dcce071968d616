"""The caller's address comes from the socket unless the peer is in api.trusted_proxies (issue 51), whatever the
HTTP server's own defaults: uvicorn rewrites the client from X-Forwarded-For for loopback peers unless told not to,
which let every spoofed header a bucket of its own. Served by a real uvicorn, configured as `claimwatch api` and
`claimwatch up` configure theirs."""

from __future__ import annotations

import httpx

from services.api.app import create_api
from services.api.security import ApiPolicy
from tests.support.serving import serving
from tests.unit.api.test_api import NOW, TOKEN_HASH, world  # noqa: F401  (world is a fixture)

READS = 5  # anonymous reads a minute, and the burst


def reads_with_spoofed_addresses(services, **policy) -> list[int]:
    app = create_api(
        services,
        ApiPolicy(token_hashes=(TOKEN_HASH,), anonymous_reads_per_minute=READS, anonymous_read_burst=READS, **policy),
        now=lambda: NOW,
    )
    with serving(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        return [
            http.get("/api/alerts", headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code for i in range(4 * READS)
        ]


def test_spoofed_forwarded_for_from_loopback_is_throttled_as_one_address(world):  # noqa: F811
    codes = reads_with_spoofed_addresses(world[0])
    assert codes[:READS] == [200] * READS
    assert codes.count(429) >= 2 * READS, codes  # refills at 5 a minute: a few seconds let at most one more through


def test_a_trusted_proxys_forwarded_for_names_the_caller(world):  # noqa: F811
    assert reads_with_spoofed_addresses(world[0], trusted_proxies=("127.0.0.1",)) == [200] * (4 * READS)
