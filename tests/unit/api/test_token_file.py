"""New tokens work without a restart: the API re-reads its token file (api.token_file) when it
changes, so a token made by `claimwatch token new` after the API was built is accepted on the
next request, and one taken out of the file is refused again. The sign-in page says where a
token comes from."""

from __future__ import annotations

import html

import pytest
from click.testing import CliRunner

from services.api.auth import UNCONFIGURED, WRONG, TokenCheck, new_token
from services.app.cli import main
from tests.unit.api.test_api import AUTH, client_for, world  # noqa: F401  (world is a fixture)

ACK = "/api/alerts/a-nope/ack"  # 404 once the token is accepted, 401/403 before


def made_token(result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout.split("token:", 1)[1].split()[0]


@pytest.mark.slow
def test_a_token_made_after_the_api_started_is_accepted_on_the_next_request(world, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    hashes = tmp_path / "config" / "claimwatch" / "token-hashes"  # not there yet
    client = client_for(world[0], token_file=str(hashes))
    body = {"by": "oncall"}
    assert client.post(ACK, json=body, headers=AUTH).status_code == 404  # the configured token still works

    token = made_token(CliRunner().invoke(main, ["token", "new"]))
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.post(ACK, json=body, headers=bearer).status_code == 404

    later = made_token(CliRunner().invoke(main, ["token", "new"]))
    assert client.post(ACK, json=body, headers={"Authorization": f"Bearer {later}"}).status_code == 404
    assert client.post(ACK, json=body, headers=bearer).status_code == 404

    hashes.write_text("")  # revoked: refused from the next request
    assert client.post(ACK, json=body, headers=bearer).json()["detail"] == WRONG.detail


def test_with_no_configured_tokens_the_file_alone_opens_changes(world, tmp_path):  # noqa: F811
    hashes = tmp_path / "token-hashes"
    client = client_for(world[0], token_hashes=(), token_file=str(hashes))
    token, digest = new_token()
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.post(ACK, json={"by": "x"}, headers=bearer).json()["detail"] == UNCONFIGURED.detail
    hashes.write_text(digest + "\n")
    assert client.post(ACK, json={"by": "x"}, headers=bearer).status_code == 404
    hashes.unlink()
    assert client.post(ACK, json={"by": "x"}, headers=bearer).status_code == 403


def test_same_size_rewrites_are_noticed(tmp_path):
    path = tmp_path / "token-hashes"
    (one, h1), (two, h2) = new_token(), new_token()
    path.write_text(h1 + "\n")
    check = TokenCheck([], path)
    assert check.refusal(one) is None
    replacement = tmp_path / "new"
    replacement.write_text(h2 + "\n")
    replacement.replace(path)  # same size, new inode
    assert check.refusal(one) == WRONG and check.refusal(two) is None


def test_the_sign_in_page_says_where_a_token_comes_from(world):  # noqa: F811
    page = html.unescape(client_for(world[0], protect_reads=True).get("/signin").text)
    assert "claimwatch token show" in page and "claimwatch up" in page and "hosts.toml" in page
    assert "claimwatch token new" in page
    assert 'aria-describedby="signin-where"' in page


def test_a_named_token_made_by_the_cli_records_its_holder(world, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    client = client_for(world[0], token_file=str(tmp_path / "config" / "claimwatch" / "token-hashes"))
    result = CliRunner().invoke(main, ["token", "new", "--name", "  Dana   Oncall "])
    bearer = {"Authorization": f"Bearer {made_token(result)}"}
    assert "recorded as 'Dana Oncall'" in result.output
    acked = client.post("/api/alerts/a-billing/ack", json={"note": "on it"}, headers=bearer)
    assert acked.status_code == 200 and acked.json()["acked_by"] == "Dana Oncall"
    assert client.post(ACK, json={"by": "someone else"}, headers=bearer).status_code == 403
    refused = CliRunner().invoke(main, ["token", "new", "--name", "a # b"])
    assert refused.exit_code == 2 and "without '#'" in refused.output
