"""`claimwatch issues` triage commands on the store files (no API answers): assign, note, link, archive,
unarchive, the filters of `issues list` and what `issues show` prints; refusals say what to do instead."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from services.app.broker import free_port
from services.app.cli import main
from services.core.command import cli_command
from tests.support.triage_world import an_issue, triage_world


@pytest.fixture()
def claimwatch(tmp_path, store_templates):
    with triage_world(tmp_path, store_templates) as (components, _):
        an_issue(components, "iss-a")
        an_issue(components, "iss-gone", merged_into="iss-a")  # a re-cluster merged it after a page named it
    nothing_listens = f"http://127.0.0.1:{free_port()}"
    flags = ["--clickhouse", f"chdb:{tmp_path / 'ch'}", "--api", nothing_listens]

    def run(*args: str):
        result = CliRunner(env={"COLUMNS": "120", "CLAIMWATCH_TOKEN": ""}).invoke(main, ["issues", *args, *flags])
        # what it says, but the notice that no API answers and it reads the store files
        result.said = "\n".join(line for line in result.output.splitlines() if not line.startswith("no claimwatch API"))
        return result

    return run


@pytest.mark.slow
def test_triage_from_the_command_line_shows_in_issues_show(claimwatch):
    steps = [
        ("assign", "iss-a", "sam", "--by", "lee"),
        ("note", "iss-a", "rolled back gen-2", "--by", "sam"),
        ("link", "iss-a", "https://tickets.example/PAY-7", "--by", "sam"),
        ("archive", "iss-a", "--for", "2h"),
    ]
    said = [claimwatch(*step) for step in steps]
    assert all(r.exit_code == 0 for r in said), [r.output for r in said]
    assert said[0].said.strip() == "iss-a is assigned to sam (team on-call)"
    assert "archived until" in said[3].output and "--state archived" in said[3].output
    listed = lambda *f: [i["issue_id"] for i in json.loads(claimwatch("list", "-o", "json", *f).stdout)]  # noqa: E731
    assert listed() == [] and listed("--state", "archived") == ["iss-a"]
    assert listed("--state", "archived", "--assignee", "sam") == ["iss-a"]
    assert listed("--state", "archived", "--owner", "nobody") == []
    shown = claimwatch("show", "iss-a").output
    for expected in (
        "sam (team on-call)",
        "https://tickets.example/PAY-7",
        'sam: note "rolled back gen-2"',
        "lee: assigned (assignee sam)",
        "archived",
    ):
        assert expected in shown, expected
    assert claimwatch("unarchive", "iss-a").said.strip() == "iss-a is new again"


@pytest.mark.slow
def test_triaging_a_merged_issue_changes_the_issue_it_joined_and_says_so(claimwatch):
    """make demo printed `issues assign iss-… alice` for the alert's issue; by the time it was pasted, a re-cluster
    had merged that issue into the one holding the bulk of its claims, and the command was refused."""
    assigned = claimwatch("assign", "iss-gone", "alice", "--by", "lee")
    linked = claimwatch("link", "iss-gone", "https://tickets.example.com/CW-12", "--by", "lee")
    assert assigned.exit_code == 0 and linked.exit_code == 0, (assigned.output, linked.output)
    assert assigned.said.splitlines() == ["iss-gone was merged into iss-a", "iss-a is assigned to alice (team on-call)"]
    shown = json.loads(claimwatch("show", "iss-a", "-o", "json").stdout)
    assert shown["assignee"] == "alice" and shown["ticket_url"] == "https://tickets.example.com/CW-12"
    assert json.loads(claimwatch("show", "iss-gone", "-o", "json").stdout)["assignee"] == ""
    shown_merged = claimwatch("show", "iss-gone").output.splitlines()
    at = next(n for n, line in enumerate(shown_merged) if line.startswith("merged into"))
    assert shown_merged[at].split() == ["merged", "into", "iss-a,", "where", "its", "claims", "are", "now:"]
    assert shown_merged[at + 1].strip() == f"{cli_command()} issues show iss-a"  # one line: it pastes whole


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, says",
    [
        (("archive", "iss-a", "--for", "2h", "--until-claims", "5"), "give --for or --until-claims, not both"),
        (("archive", "iss-a", "--for", "soon"), "--for 'soon': use a number followed by s, m, h or d"),
        (("unassign", "iss-a"), "issue iss-a is not assigned"),
        (("link", "iss-a", "tickets/PAY-7"), "the ticket link must be an http(s) URL"),
        (
            ("resolve", "iss-a", "--in-next-version"),
            "no corpus, model, prompt version is stored on route 'billing-faq'",
        ),
    ],
)
def test_refusals_say_what_to_do(claimwatch, args, says):
    result = claimwatch(*args)
    assert result.exit_code == 1 and says in result.output, result.output
