"""Run `claimwatch` in-process with its HTTP calls answered by an in-process API (FastAPI's TestClient)."""
from __future__ import annotations

import httpx


def answer_http_with(client, monkeypatch, token: str) -> None:
    """Route the CLI's `httpx.request` to ``client`` and give it ``token``."""
    def request(method, url, params=None, json=None, headers=None, timeout=None):
        return client.request(method, url, params=params, json=json, headers=headers)

    monkeypatch.setattr(httpx, "request", request)
    monkeypatch.setenv("CLAIMWATCH_TOKEN", token)
