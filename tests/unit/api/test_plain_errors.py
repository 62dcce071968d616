"""A refusal reaches the user as one plain sentence, from the API and through `claimwatch`, never pydantic's error
list; and `--by` may be left out: the change is recorded under the configured name, else the login name. Over the API
test's store (simulated traffic, two issues with members), through the real app."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner

from services.app.cli import main
from services.core.command import cli_command
from services.issues.records import issue_repository
from tests.support.cli import answer_http_with
from tests.unit.api.test_api import AUTH, TOKEN, client_for, world  # noqa: F401  (world is a fixture)

DUMP = ("string_too_short", "string_too_long", "'loc'", '"loc"', "'input'", '"input"', "'type'", "{", "[")


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    return client_for(world[0])


@pytest.fixture
def cli(client, monkeypatch):
    """`claimwatch` whose HTTP calls reach the in-process API; no configured name unless a test sets one."""
    api = answer_http_with(client, monkeypatch, TOKEN)
    monkeypatch.delenv("CLAIMWATCH_IDENTITY__NAME", raising=False)
    return lambda *args: CliRunner().invoke(main, [*args, "--api", "http://testserver"], obj=api)


def a_trace_of(client, issue_id: str) -> str:
    return client.get(f"/api/issues/{issue_id}").json()["exemplars"][0]["trace_id"]


def one_sentence(text: str) -> None:
    assert len(text.strip().splitlines()) == 1, text
    assert not any(piece in text for piece in DUMP), text


def test_the_api_answers_an_empty_by_with_one_sentence(client):
    response = client.post("/api/promotions", json={"issue_id": "iss-numbers", "by": ""}, headers=AUTH)
    assert response.status_code == 422
    assert response.json() == {"detail": "by: must not be empty", "field": "body.by"}
    one_sentence(response.json()["detail"])


def test_the_cli_refuses_an_empty_by_with_one_sentence(cli):
    result = cli("promote", "propose", "iss-numbers", "--by", "")
    assert result.exit_code == 1
    assert result.output.startswith(
        "Error: by: must not be empty; pass --by NAME, or leave --by out to be recorded as "
    )
    one_sentence(result.output)


def test_a_422_from_the_api_reaches_the_cli_as_one_sentence(cli):
    result = cli("promote", "approve", "ev-nope", "--by", "reviewer", "--reason", "x" * 2001)
    assert result.exit_code == 1
    assert result.output == "Error: reason: string should have at most 2000 characters (HTTP 422)\n"


def test_a_404_from_the_api_reaches_the_cli_as_one_sentence(cli):
    result = cli("issues", "resolve", "iss-nope", "--by", "oncall")
    assert result.exit_code == 1
    assert result.output == f"Error: no issue 'iss-nope'; list issues with `{cli_command()} issues list` (HTTP 404)\n"


def test_left_out_by_is_the_configured_name(cli, client, monkeypatch):
    monkeypatch.setenv("CLAIMWATCH_IDENTITY__NAME", "alice")
    result = cli("promote", "propose", "iss-numbers", "--traces", a_trace_of(client, "iss-numbers"))
    assert result.exit_code == 0, result.output
    item = result.output.split()[1]
    assert client.get(f"/api/promotions/{item}").json()["proposed_by"] == "alice"
    # the reviewer's next step, as pasteable from here as the proposer's was
    assert "someone other than alice signs off, with a token that names them" in result.output
    assert f"\n  CLAIMWATCH_TOKEN=THEIR_TOKEN {cli_command()} promote approve {item} --reason '...'\n" in result.output


def test_left_out_by_without_a_configured_name_is_the_login_name(cli, client, monkeypatch):
    monkeypatch.setenv("LOGNAME", "bob")  # what getpass reads first
    result = cli("promote", "propose", "iss-evil", "--traces", a_trace_of(client, "iss-evil"))
    assert result.exit_code == 0, result.output
    item = result.output.split()[1]
    assert client.get(f"/api/promotions/{item}").json()["proposed_by"] == "bob"


def test_proposing_from_a_merged_issue_proposes_for_the_issue_it_joined_and_says_so(cli, client, world):  # noqa: F811
    """make demo printed `promote propose iss-…` for the alert's issue; a re-cluster merged that issue within the
    minute, and the pasted command answered "has no traces to propose yet; wait for its next clustering run"."""
    survivor = world[0].issues.issues.get("iss-numbers")
    issue_repository(world[0].store).save([replace(survivor, issue_id="iss-gone", merged_into="iss-numbers")])
    trace = client.get("/api/issues/iss-numbers").json()["exemplars"][1]["trace_id"]
    result = cli("promote", "propose", "iss-gone", "--traces", trace, "--by", "oncall")
    assert result.exit_code == 0, result.output
    said = result.output.splitlines()
    assert said[0] == "iss-gone was merged into iss-numbers" and said[1].startswith("proposed ")
    item = client.get(f"/api/promotions/{said[1].split()[1]}").json()
    assert (item["origin_issue_id"], item["origin_trace_id"]) == ("iss-numbers", trace)


def test_proposing_an_issue_whose_representatives_are_all_proposed_says_which_items_hold_them(cli, client):
    """README step 7 after the demo's own proposals answered "has no traces to propose yet; wait for its next
    clustering run", and the issue page said "No exemplars stored." for an issue with thousands of claims."""
    proposed = []
    for _ in range(10):  # each round proposes what is left; near duplicates of a proposal drop out
        result = cli("promote", "propose", "iss-numbers", "--by", "oncall")
        if result.exit_code:
            break
        proposed += [line.split()[1] for line in result.output.splitlines() if line.startswith("proposed ")]
    assert proposed and result.exit_code == 1
    message = " ".join(result.output.split())
    assert "every representative trace of issue iss-numbers is already in the eval set" in message, message
    assert proposed[0] in message and "(proposed, trace " in message and "evalset items" in message
    exemplars = client.get("/api/issues/iss-numbers").json()["exemplars"]
    assert exemplars and all(e["eval_item"] for e in exemplars)
    page = client.get("/issues/iss-numbers").text
    assert "No exemplars stored." not in page and f"in the eval set as {exemplars[0]['eval_item']}" in page
    runbook = client.get("/api/issues/iss-numbers/runbook", params={"format": "md"}).text
    assert "promote propose iss-numbers --traces" not in runbook and "already in the eval set" in runbook
