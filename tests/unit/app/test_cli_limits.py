"""CLI limits and unsilence on the store files (no API answers): huge numbers get a one-line error naming the
limit, not an OverflowError traceback; unsilence records who ended the silence."""

from __future__ import annotations

import os

import httpx
import orjson
import pytest
from click.testing import CliRunner

from services.app.cli import main
from services.app.cli.base import Api

NO_API = "http://127.0.0.1:9"


@pytest.fixture
def run(tmp_path):
    def run(*args: str):
        return CliRunner(env={"COLUMNS": "200"}).invoke(
            main, [*args, "--clickhouse", f"chdb:{tmp_path / 'clickhouse'}", "--api", NO_API]
        )

    return run


def said(result) -> list[str]:
    """What the command printed, but the one notice that it reads the store files (no API answers)."""
    return [line for line in result.output.splitlines() if line.strip() and not line.startswith("no claimwatch API at")]


def one_line_error(result) -> str:
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output  # no traceback
    lines = said(result)
    assert len(lines) == 1, result.output
    return lines[0]


def test_an_offline_silence_past_the_limit_is_a_one_line_error(run):
    line = one_line_error(
        run(
            "alerts",
            "silence",
            "--match",
            "route=billing-faq",
            "--duration",
            "99999999999d",
            "--by",
            "ana",
            "--comment",
            "c",
        )
    )
    assert "duration '99999999999d' is longer than the limit of 366 days" in line


@pytest.mark.parametrize("hours", ["1e11", "0", "nan", "inf"])
def test_repair_hours_outside_the_limit_is_a_one_line_error(run, hours):
    line = one_line_error(run("repair", "--hours", hours))
    assert "--hours must be more than 0 and at most 87600 (the limit, 3650 days)" in line


@pytest.mark.slow
def test_unsilence_records_who_ended_it_and_silences_lists_it(run):
    made = run("alerts", "silence", "--match", "route=billing-faq", "--duration", "1h", "--by", "ana", "--comment", "c")
    assert made.exit_code == 0, made.output
    silence_id = said(made)[0].split()[1]
    ended = run("alerts", "unsilence", silence_id, "--by", "bo")
    assert ended.exit_code == 0 and ended.output.rstrip().endswith("by bo"), ended.output
    listed = orjson.loads(run("alerts", "silences", "-o", "json").stdout)
    assert [(s["silence_id"], s["ended_by"]) for s in listed] == [(silence_id, "bo")]
    assert "ENDED BY" in run("alerts", "silences", "-o", "wide").output


@pytest.mark.slow
def test_an_offline_silence_until_a_date_past_the_limit_is_refused_as_the_api_refuses_it(run):
    """With no API running, `alerts silence --until` stored a five-year silence: the limit lived in the router."""
    line = one_line_error(
        run(
            "alerts",
            "silence",
            "--match",
            "route=billing-faq",
            "--until",
            "2031-12-01T00:00:00Z",
            "--by",
            "ana",
            "--comment",
            "c",
        )
    )
    assert "ends_at is more than 366 days away; silence for less and renew it" in line
    past = one_line_error(
        run(
            "alerts",
            "silence",
            "--match",
            "route=billing-faq",
            "--until",
            "2020-01-01T00:00:00Z",
            "--by",
            "ana",
            "--comment",
            "c",
        )
    )
    assert "ends_at is in the past" in past
    assert run("alerts", "silences", "-o", "json").stdout.strip() in ("[]", "")


@pytest.mark.slow
def test_offline_changes_pass_the_apis_token_checks(tmp_path):
    """The CLI with no API runs the API in-process: a wrong token is refused as the running API refuses it, and
    nothing is stored; the token `claimwatch up` would keep for the URL is accepted."""
    store = ["--clickhouse", f"chdb:{tmp_path / 'clickhouse'}", "--api", NO_API]
    silence = ["alerts", "silence", "--match", "route=billing-faq", "--duration", "1h", "--by", "ana", "--comment", "c"]
    wrong = CliRunner(env={"CLAIMWATCH_TOKEN": "cw_not-a-token"}).invoke(main, [*silence, *store])
    assert wrong.exit_code == 1 and "not one of the configured tokens" in wrong.output, wrong.output
    listed = CliRunner(env={"CLAIMWATCH_TOKEN": ""}).invoke(main, ["alerts", "silences", "-o", "json", *store])
    assert orjson.loads(listed.stdout) == []
    kept = CliRunner(env={"CLAIMWATCH_TOKEN": ""}).invoke(main, [*silence, *store])
    assert kept.exit_code == 0 and "silence " in kept.output, kept.output


class ToPort(httpx.HTTPTransport):
    """Every request to ``port`` on loopback, whatever port its URL names (the default 8080 may be anyone's here)."""

    def __init__(self, port: int):
        super().__init__()
        self.port = port

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(host="127.0.0.1", port=self.port)
        return super().handle_request(request)


@pytest.mark.slow
def test_a_folder_whose_stack_stopped_never_reads_another_stacks_api(tmp_path, monkeypatch):
    """After the demo stopped, `alerts list` in its folder printed "no alerts": the API on the default port was
    another stack's. With neither API nor store named and ./var/clickhouse here, the CLI asks which store that API
    serves and reads its own."""
    import subprocess
    import sys

    from services.app.broker import free_port
    from tests.support.waiting import wait_until

    port = free_port()
    other = subprocess.Popen(
        [sys.executable, "-m", "services.app.cli", "api", "--clickhouse", f"chdb:{tmp_path / 'other'}"],
        env={**os.environ, "CLAIMWATCH_API__PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: _answers(port), 60, "the other stack's API")
        (tmp_path / "here").mkdir()
        monkeypatch.chdir(tmp_path / "here")
        monkeypatch.delenv("CLAIMWATCH_TOKEN", raising=False)
        made = CliRunner().invoke(
            main,
            [
                "alerts",
                "silence",
                "--match",
                "route=here",
                "--duration",
                "1h",
                "--by",
                "ana",
                "--comment",
                "c",
                "--api",
                NO_API,
            ],
        )  # makes ./var/clickhouse
        assert made.exit_code == 0, made.output
        listed = CliRunner().invoke(
            main, ["alerts", "silences", "-o", "json"], obj=Api(httpx.Client(transport=ToPort(port)))
        )
    finally:
        other.terminate()
        other.wait(30)
    assert listed.exit_code == 0, listed.output
    assert (
        f"serves another store (chdb:{tmp_path / 'other'}); reading chdb:{tmp_path / 'here' / 'var' / 'clickhouse'}"
        in listed.stderr
    ), listed.stderr
    assert [s["matchers"] for s in orjson.loads(listed.stdout)] == [["route=here"]]


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def test_a_refusal_names_commands_as_they_run_here(tmp_path, monkeypatch):
    """The API's sentences say `claimwatch token new`; with claimwatch not on the PATH that does not run."""
    from services.core.command import cli_command

    monkeypatch.setenv("PATH", str(tmp_path))  # no claimwatch on it: the CLI's spelling is its path
    wrong = CliRunner(env={"CLAIMWATCH_TOKEN": "cw_not-a-token"}).invoke(
        main,
        [
            "alerts",
            "silence",
            "--match",
            "route=a",
            "--duration",
            "1h",
            "--by",
            "ana",
            "--comment",
            "c",
            "--clickhouse",
            f"chdb:{tmp_path / 'clickhouse'}",
            "--api",
            NO_API,
        ],
    )
    assert cli_command() != "claimwatch"
    assert f"`{cli_command()} token new`" in wrong.output and "`claimwatch token new`" not in wrong.output, wrong.output
