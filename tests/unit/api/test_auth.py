import hashlib

import pytest

from services.api.auth import MISSING, UNCONFIGURED, WRONG, TokenBucket, TokenCheck, bearer_of, hash_token, new_token
from services.app.settings import Settings


def test_new_token_is_random_and_only_its_sha256_is_configured():
    token, digest = new_token()
    other, other_digest = new_token()
    assert token != other and digest != other_digest
    assert token.startswith("cw_") and len(token) >= 40
    assert digest == hashlib.sha256(token.encode()).hexdigest() == hash_token(token)
    assert token not in digest


def test_token_check_accepts_any_configured_token_and_says_why_it_refuses():
    tokens = [new_token() for _ in range(5)]
    check = TokenCheck([h for _, h in tokens])
    assert all(check.refusal(t) is None for t, _ in tokens)  # the last hash matches as well as the first
    assert check.refusal(None) == MISSING and MISSING.status == 401
    assert check.refusal("cw_guess") == WRONG and WRONG.status == 403
    assert check.refusal(tokens[0][1]) == WRONG  # the hash itself is not a token


def test_uppercase_hashes_are_accepted():
    token, digest = new_token()
    assert TokenCheck([digest.upper()]).refusal(token) is None


def test_no_configured_token_refuses_every_change_and_says_how_to_configure_one():
    check = TokenCheck([])
    assert not check.configured
    assert check.refusal("anything") == UNCONFIGURED
    assert UNCONFIGURED.status == 403
    assert "claimwatch token new" in UNCONFIGURED.detail and "token_hashes" in UNCONFIGURED.detail


@pytest.mark.parametrize("bad", ["", "abc", "g" * 64, "a" * 63, "a" * 65])
def test_a_malformed_configured_hash_is_an_error_naming_its_position(bad):
    _, good = new_token()
    with pytest.raises(ValueError, match=r"api\.token_hashes\[1\]: expected 64 hex digits"):
        TokenCheck([good, bad])


@pytest.mark.parametrize(
    "header, token",
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER  abc ", "abc"),
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic abc", None),
        ("abc", None),
    ],
)
def test_bearer_header_parsing(header, token):
    assert bearer_of(header) == token


def test_token_bucket_allows_a_burst_then_says_how_long_to_wait():
    bucket = TokenBucket(rate=0.5, burst=3)  # one call per 2 s after the burst
    assert [bucket.take("a", 100.0) for _ in range(3)] == [0, 0, 0]
    assert bucket.take("a", 100.0) == pytest.approx(2.0)
    assert bucket.take("b", 100.0) == 0  # clients are independent
    assert bucket.take("a", 101.0) == pytest.approx(1.0)  # half refilled
    assert bucket.take("a", 102.0) == 0
    assert bucket.take("a", 102.0) > 0


def test_token_bucket_never_holds_more_than_the_burst():
    bucket = TokenBucket(rate=10, burst=2)
    bucket.take("a", 0.0)
    assert [bucket.take("a", 1000.0) == 0 for _ in range(3)] == [True, True, False]


def test_token_bucket_forgets_the_least_recent_clients_beyond_its_bound():
    bucket = TokenBucket(rate=0.001, burst=1, max_clients=2)
    bucket.take("a", 0.0)
    bucket.take("b", 0.0)
    bucket.take("c", 0.0)  # evicts a
    assert bucket.take("a", 0.0) == 0
    assert bucket.take("c", 0.0) > 0


@pytest.mark.parametrize("rate, burst", [(0, 1), (-1, 1), (1, 0)])
def test_token_bucket_refuses_nonsense_limits(rate, burst):
    with pytest.raises(ValueError, match="rate limit needs"):
        TokenBucket(rate, burst)


def test_policy_from_settings_keeps_safe_defaults():
    _, digest = new_token()
    policy = Settings(api={"token_hashes": [digest], "protect_reads": True}).api
    assert policy.token_hashes == (digest,) and policy.protect_reads
    assert policy.cors_origins == ()  # CORS off unless configured
    assert policy.max_body_bytes == 64 * 1024 and policy.mutations_per_minute > 0 and policy.mutation_burst >= 1
