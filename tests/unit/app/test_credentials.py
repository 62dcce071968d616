"""The CLI finds the token of a stack the same user started, from any directory: $CLAIMWATCH_TOKEN,
then hosts.toml under $XDG_CONFIG_HOME/claimwatch (0600, keyed by API URL)."""

from __future__ import annotations

import stat

import httpx
import pytest
from click.testing import CliRunner

from services.api.auth import hash_token, read_hashes_file
from services.app.cli import main
from services.app.cli.stack import _local_token
from services.app.credentials import (
    add_token_hash,
    find_token,
    hashes_path,
    holder_token,
    hosts_path,
    save_token,
    stored_token,
)
from services.app.settings import Settings
from tests.support.cli import answer_http_by

URL = "http://127.0.0.1:8080"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private config home, a different working directory, no token in the environment."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CLAIMWATCH_TOKEN", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return tmp_path


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_up_keeps_its_token_in_a_0600_file_found_from_another_directory(home, monkeypatch, capsys):
    started = home / "repo"
    started.mkdir()
    monkeypatch.chdir(started)
    settings = _local_token(Settings())
    path = hosts_path()
    assert path == home / "config" / "claimwatch" / "hosts.toml"
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    token = stored_token(URL)
    assert token.startswith("cw_") and settings.api.token_hashes == (hash_token(token),)
    assert settings.api.token_file == str(hashes_path())  # the stack watches the file `token new` adds to
    said = capsys.readouterr().err
    assert str(path) in said and "claimwatch token show" in said and "export CLAIMWATCH_TOKEN" in said
    assert not (started / "var" / "api-token").exists()

    monkeypatch.chdir(home / "elsewhere")
    assert find_token(URL) == (token, f"{path} [{URL}]")
    assert find_token(URL + "/")[0] == token  # the same API
    assert find_token("http://127.0.0.1:9090") is None  # another stack's token is not sent here
    assert _local_token(Settings()).api.token_hashes == (hash_token(token),)  # a restart keeps the token
    shown = CliRunner().invoke(main, ["token", "show"])
    assert shown.exit_code == 0 and shown.stdout.strip() == token


def test_entries_for_other_urls_survive_and_the_file_stays_0600(home):
    save_token("http://a:1", "cw_a")
    save_token("http://b:2/", 'cw_b"quoted\\')
    save_token("http://a:1", "cw_a2")
    assert (stored_token("http://a:1"), stored_token("http://b:2")) == ("cw_a2", 'cw_b"quoted\\')
    assert mode(hosts_path()) == 0o600


def test_environment_first_then_credentials(home):
    assert find_token(URL) is None
    save_token(URL, "cw_stored")
    assert find_token(URL)[0] == "cw_stored"
    assert find_token(URL, {"CLAIMWATCH_TOKEN": "cw_env", "XDG_CONFIG_HOME": str(home / "config")}) == (
        "cw_env",
        "$CLAIMWATCH_TOKEN",
    )


def test_the_cli_sends_the_stored_token_and_the_environment_overrides_it(home, monkeypatch):
    save_token(URL, "cw_stored")
    sent = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers.get("Authorization"))
        return httpx.Response(200, json=[])

    api = answer_http_by(answer)
    assert CliRunner().invoke(main, ["alerts", "list"], obj=api).exit_code == 0
    assert CliRunner(env={"CLAIMWATCH_TOKEN": "cw_env"}).invoke(main, ["alerts", "list"], obj=api).exit_code == 0
    assert sent == ["Bearer cw_stored", "Bearer cw_env"]


def test_token_show_says_how_to_get_one_when_there_is_none(home):
    result = CliRunner().invoke(main, ["token", "show"])
    assert result.exit_code == 1 and "claimwatch up" in result.output and "CLAIMWATCH_TOKEN" in result.output


def test_token_new_adds_its_hash_to_the_watched_file(home):
    result = CliRunner().invoke(main, ["token", "new"])
    assert result.exit_code == 0, result.output
    token = result.stdout.split("token:", 1)[1].split()[0]
    assert read_hashes_file(hashes_path()) == [(hash_token(token).encode(), None)]
    assert mode(hashes_path()) == 0o600 and str(hashes_path()) in result.stderr
    again = CliRunner().invoke(main, ["token", "new", "--save", "--api", "http://127.0.0.1:8181"])
    second = again.stdout.split("token:", 1)[1].split()[0]
    assert len(read_hashes_file(hashes_path())) == 2 and stored_token("http://127.0.0.1:8181") == second
    assert CliRunner().invoke(main, ["token", "new", "--no-register"]).exit_code == 0
    assert len(read_hashes_file(hashes_path())) == 2


def test_the_demos_reviewer_keeps_one_named_token_while_it_is_registered(home):
    kept = home / "var" / "reviewer-token"
    kept.parent.mkdir()
    first = holder_token(kept, "reviewer", hashes_path())
    assert kept.read_text().strip() == first and mode(kept) == 0o600
    assert read_hashes_file(hashes_path()) == [(hash_token(first).encode(), "reviewer")]
    assert holder_token(kept, "reviewer", hashes_path()) == first  # a second demo reuses it
    hashes_path().write_text("")  # the operator revoked it: a new one, registered
    second = holder_token(kept, "reviewer", hashes_path())
    assert second != first and read_hashes_file(hashes_path()) == [(hash_token(second).encode(), "reviewer")]


def test_a_hashes_file_skips_lines_that_are_not_hashes(tmp_path):
    path = add_token_hash("ab" * 32, tmp_path / "d" / "token-hashes", note="first\nsecond")
    add_token_hash("ef" * 32, path, note="named", name="Dana Oncall")
    with path.open("a") as f:
        f.write("# a comment\nnot-a-hash\n\n" + "CD" * 32 + "  # upper case\n")
    assert read_hashes_file(path) == [
        (("ab" * 32).encode(), None),
        (("ef" * 32).encode(), "Dana Oncall"),
        (("cd" * 32).encode(), None),
    ]
