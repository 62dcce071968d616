"""Nobody without a token can block on-call, and a read session is not a write token (issue 23).

Rate limits are kept apart: a valid token spends its own bucket, so a flood of anonymous,
wrong-token and sign-in requests never delays it; sign-in gives a signed, read-only session
that is refused as a bearer token; X-Forwarded-For counts only from a trusted proxy.
All over the real app and a real chDB store, with the rate-limit clock frozen.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi.testclient import TestClient

from services.api.app import create_api
from services.api.auth import READ_COOKIE, ClientAddress, ReadSession, TokenCheck, same_origin
from services.api.middleware import AnonymousReadLimit
from services.api.security import ApiPolicy, Gate
from tests.unit.api.test_api import AUTH, NOW, TOKEN, TOKEN_HASH

ACK = "/api/alerts/a-billing/ack"
SAME_ORIGIN = {"Origin": "http://testserver"}


def limited_client(services, client=("testclient", 50000), **policy) -> TestClient:
    """Small buckets and a clock that never moves, so nothing refills during a test."""
    fields = {
        "token_hashes": (TOKEN_HASH,),
        "mutations_per_minute": 60,
        "mutation_burst": 50,
        "anonymous_mutations_per_minute": 5,
        "signins_per_minute": 5,
        "anonymous_reads_per_minute": 20,
        **policy,
    }
    return TestClient(create_api(services, ApiPolicy(**fields), now=lambda: NOW, clock=lambda: 1000.0), client=client)


@pytest.mark.slow
def test_a_flood_without_a_valid_token_never_delays_a_token_holder(world):
    client = limited_client(world[0])
    flood = [
        lambda: client.post(ACK, json={"by": "anon"}),
        lambda: client.post(ACK, json={"by": "guess"}, headers={"Authorization": "Bearer cw_guess"}),
        lambda: client.post("/signin", data={"token": "cw_guess"}, headers=SAME_ORIGIN, follow_redirects=False),
        lambda: client.get("/api/alerts"),
    ]
    flooded, held = [], []
    for n in range(300):
        flooded.append(flood[n % len(flood)]().status_code)
        if n % 10 == 0:  # 30 acks, under the token's own burst of 50 but far over what the flood spends
            held.append(client.post(ACK, json={"by": "oncall"}, headers=AUTH).status_code)
    assert held == [200] * 30
    assert flooded.count(429) == 300 - (5 + 5 + 20)  # each anonymous bucket let its burst through, then refused


def test_anonymous_and_wrong_tokens_share_a_small_bucket_per_address(world):
    client = limited_client(world[0], anonymous_mutations_per_minute=3)
    assert [client.post(ACK, json={"by": "x"}).status_code for _ in range(3)] == [401] * 3
    guess = client.post(ACK, json={"by": "x"}, headers={"Authorization": "Bearer cw_guess"})
    assert guess.status_code == 429 and int(guess.headers["retry-after"]) > 0
    assert "api.anonymous_mutations_per_minute" in guess.json()["detail"]
    assert client.post(ACK, json={"by": "x"}, headers=AUTH).status_code == 200


@pytest.mark.slow
def test_anonymous_reads_are_limited_per_address_but_token_and_session_reads_are_not(world):
    client = limited_client(world[0], anonymous_reads_per_minute=3)
    assert [client.get("/api/rates").status_code for _ in range(3)] == [200] * 3
    limited = client.get("/api/rates")
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) > 0
    detail = limited.json()["detail"]
    assert detail.endswith(".") and detail.count(". ") == 0  # one plain sentence
    assert client.get("/").status_code == 429  # pages count too
    assert all(client.get("/api/rates", headers=AUTH).status_code == 200 for _ in range(5))
    signed = client.post("/signin", data={"token": TOKEN}, headers=SAME_ORIGIN, follow_redirects=False)
    assert signed.status_code == 303
    assert all(client.get("/api/rates").status_code == 200 for _ in range(5))  # the session cookie is sent
    assert client.get("/healthz").status_code == 200  # probes are never refused for someone else's flood


def test_sign_in_gives_a_session_that_reads_but_never_writes(world):
    client = limited_client(world[0], protect_reads=True, anonymous_reads_per_minute=1000)
    cross = client.post(
        "/signin", data={"token": TOKEN}, headers={"Origin": "https://evil.example"}, follow_redirects=False
    )
    assert cross.status_code == 403 and READ_COOKIE not in cross.cookies
    assert "own sign-in page" in cross.text
    assert (
        client.post("/signin", data={"token": TOKEN}, headers={"Origin": "null"}, follow_redirects=False).status_code
        == 403
    )
    assert (
        client.post(
            "/signin", data={"token": TOKEN}, headers={"Referer": "https://evil.example/signin"}, follow_redirects=False
        ).status_code
        == 403
    )
    signed = client.post(
        "/signin", data={"token": TOKEN, "next": "/alerts"}, headers=SAME_ORIGIN, follow_redirects=False
    )
    assert signed.status_code == 303 and signed.headers["location"] == "/alerts"
    session = signed.cookies[READ_COOKIE]
    assert TOKEN not in session
    assert client.get("/alerts").status_code == 200 and client.get("/api/rates").status_code == 200
    as_bearer = client.post(ACK, json={"by": "stolen"}, headers={"Authorization": f"Bearer {session}"})
    assert as_bearer.status_code == 401 and "only reads" in as_bearer.json()["detail"]
    assert client.post(ACK, json={"by": "csrf"}).status_code == 401  # the cookie alone does not write either
    forged = TestClient(client.app, cookies={READ_COOKIE: session[:-2] + "xx"})
    assert forged.get("/alerts", follow_redirects=False).status_code == 303  # back to sign-in
    assert client.post(ACK, json={"by": "oncall"}, headers=AUTH).status_code == 200


def test_sign_in_attempts_have_their_own_bucket(world):
    client = limited_client(world[0], signins_per_minute=2)
    tries = [
        client.post("/signin", data={"token": "cw_guess"}, headers=SAME_ORIGIN, follow_redirects=False)
        for _ in range(3)
    ]
    assert [t.status_code for t in tries] == [403, 403, 429]
    assert client.post(ACK, json={"by": "x"}).status_code == 401  # anonymous mutations are not spent by sign-ins


def test_forwarded_for_is_ignored_from_an_untrusted_peer_and_honoured_from_a_trusted_proxy(world):
    def ack_from(client, forwarded_for):
        return client.post(ACK, json={"by": "x"}, headers={"X-Forwarded-For": forwarded_for}).status_code

    direct = limited_client(
        world[0], anonymous_mutations_per_minute=1, client=("203.0.113.9", 1234), trusted_proxies=("10.0.0.0/8",)
    )
    assert [ack_from(direct, "198.51.100.1"), ack_from(direct, "198.51.100.2")] == [401, 429]  # one caller: the peer

    proxied = limited_client(
        world[0], anonymous_mutations_per_minute=1, client=("10.0.0.5", 1234), trusted_proxies=("10.0.0.0/8",)
    )
    assert [ack_from(proxied, "198.51.100.1"), ack_from(proxied, "198.51.100.2")] == [401, 401]  # two callers
    assert ack_from(proxied, "198.51.100.3, 198.51.100.1") == 429  # what a client prepends does not count


def test_client_address_reads_forwarded_for_right_to_left_past_trusted_hops():
    addresses = ClientAddress(["10.0.0.1", "192.168.0.0/16"])
    assert addresses.of("10.0.0.1", "1.2.3.4, 5.6.7.8, 192.168.1.1") == "5.6.7.8"
    assert addresses.of("10.0.0.2", "1.2.3.4") == "10.0.0.2"
    assert addresses.of("10.0.0.1", None) == "10.0.0.1"
    assert ClientAddress().of("10.0.0.1", "1.2.3.4") == "10.0.0.1"  # none trusted by default


def test_same_origin_and_sessions_signed_by_another_key():
    assert same_origin("cw.example:8080", "https://cw.example:8080", None)  # behind a TLS-terminating proxy
    assert not same_origin("cw.example", "https://evil.example", "https://cw.example/signin")  # Origin decides
    assert not same_origin("cw.example", "null", None)
    assert same_origin("cw.example", None, None)  # not a browser form
    mine, other, tokens = ReadSession(60), ReadSession(60), TokenCheck([TOKEN_HASH])
    assert mine.valid(mine.issue(TOKEN), tokens) and not mine.valid(other.issue(TOKEN), tokens)
    assert not mine.valid("garbage", tokens) and not mine.valid(mine.issue("cw_revoked"), tokens)


def test_anonymous_reads_beyond_the_concurrency_queue_and_never_hold_up_a_token_holder():
    """H3: a crowd (each caller within its own rate) is served a few at a time, so the threads and the CPU it
    can take are bounded; a token holder skips the queue; a caller that waits too long gets 503."""
    gate = Gate(ApiPolicy(token_hashes=(TOKEN_HASH,), anonymous_concurrency=2, anonymous_reads_per_minute=600))
    release, entered = asyncio.Event(), []

    async def slow_page(scope, receive, send):  # anonymous readers hold their slot until released
        entered.append(dict(scope["headers"]).get(b"authorization"))
        if entered[-1] is None:
            await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    limit = AnonymousReadLimit(slow_page, gate)

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=limit), base_url="http://t") as client:
            crowd = [asyncio.create_task(client.get("/")) for _ in range(3)]
            while len(entered) < 2:
                await asyncio.sleep(0.01)
            holder = await asyncio.wait_for(client.get("/", headers=AUTH), 5)
            assert holder.status_code == 200 and entered.count(None) == 2  # the third anonymous reader waits
            release.set()
            assert [r.status_code for r in await asyncio.gather(*crowd)] == [200, 200, 200]

            release.clear()
            limit.QUEUE_SECONDS = 0.2
            held = [asyncio.create_task(client.get("/")) for _ in range(2)]
            while entered.count(None) < 5:
                await asyncio.sleep(0.01)
            late = await client.get("/")
            assert late.status_code == 503 and late.headers["Retry-After"] == "5"
            release.set()
            await asyncio.gather(*held)

    asyncio.run(scenario())
