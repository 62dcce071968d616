"""A sign-in session lasts only as long as the token it was made with (issue 51): revoking the token (taking its
hash out of api.token_file) ends the session from the next request, not 12 hours later."""

from __future__ import annotations

from services.api.auth import new_token
from tests.unit.api.test_api import client_for, world  # noqa: F401  (world is a fixture)

SAME_ORIGIN = {"Origin": "http://testserver"}


def test_a_session_ends_when_its_token_is_revoked_and_not_before(world, tmp_path):  # noqa: F811
    (token, digest), (kept, kept_digest) = new_token(), new_token()
    hashes = tmp_path / "token-hashes"
    hashes.write_text(f"{digest}\n{kept_digest}\n")
    client = client_for(world[0], token_hashes=(), token_file=str(hashes), protect_reads=True)
    signed = client.post("/signin", data={"token": token}, headers=SAME_ORIGIN, follow_redirects=False)
    assert signed.status_code == 303
    assert client.get("/api/alerts").status_code == 200  # the session reads

    hashes.write_text(f"{kept_digest}\n")  # the session's token revoked; another stays
    assert client.get("/api/alerts").status_code == 401
    page = client.get("/alerts", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/signin")  # sign in again

    again = client.post("/signin", data={"token": kept}, headers=SAME_ORIGIN, follow_redirects=False)
    assert again.status_code == 303 and client.get("/api/alerts").status_code == 200
