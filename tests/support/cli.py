"""Run `claimwatch` in-process with its HTTP calls answered by a client the test injects (no monkeypatching):
``CliRunner().invoke(main, args, obj=api)`` with an ``api`` from here."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from click.testing import CliRunner

from services.app.cli.base import Api


def answer_http_with(client: httpx.Client, monkeypatch, token: str) -> Api:
    """The CLI's API access through ``client`` (FastAPI's TestClient: the in-process API), sending ``token``."""
    monkeypatch.setenv("CLAIMWATCH_TOKEN", token)
    return Api(client)


def answer_http_by(handler: Callable[[httpx.Request], httpx.Response]) -> Api:
    """The CLI's API access answered by ``handler`` (httpx's MockTransport); it may raise httpx.ConnectError."""
    return Api(httpx.Client(transport=httpx.MockTransport(handler)))


def cli_at(client: httpx.Client, monkeypatch, token: str, width: int) -> Callable[..., str]:
    """``run(*args)``: `claimwatch ARGS` against the in-process API at ``width`` columns; its output,
    once it exits 0."""
    from services.app.cli import main

    api = answer_http_with(client, monkeypatch, token)

    def run(*args: str) -> str:
        result = CliRunner(env={"COLUMNS": str(width)}).invoke(main, [*args, "--api", "http://testserver"], obj=api)
        assert result.exit_code == 0, result.output
        return result.output

    return run
