"""Run `claimwatch` in-process with its HTTP calls answered by a client the test injects (no monkeypatching):
``CliRunner().invoke(main, args, obj=api)`` with an ``api`` from here."""
from __future__ import annotations

from typing import Callable

import httpx

from services.app.cli.base import Api


def answer_http_with(client: httpx.Client, monkeypatch, token: str) -> Api:
    """The CLI's API access through ``client`` (FastAPI's TestClient: the in-process API), sending ``token``."""
    monkeypatch.setenv("CLAIMWATCH_TOKEN", token)
    return Api(client)


def answer_http_by(handler: Callable[[httpx.Request], httpx.Response]) -> Api:
    """The CLI's API access answered by ``handler`` (httpx's MockTransport); it may raise httpx.ConnectError."""
    return Api(httpx.Client(transport=httpx.MockTransport(handler)))
