"""The CLI reaches the API through the `Api` in its click context: tests inject one (``invoke(..., obj=api)``)
instead of monkeypatching httpx, and the check below keeps it that way."""

from __future__ import annotations

import ast

import httpx
from click.testing import CliRunner

from services.app.cli import main
from services.app.cli.base import Api
from tests.support.cli import answer_http_by
from tests.support.paths import ROOT


def httpx_patches(tree: ast.AST) -> list[int]:
    """Lines that replace something of httpx: ``setattr(httpx, ...)``, ``monkeypatch.setattr(httpx.X, ...)`` or
    ``monkeypatch.setattr("httpx.X", ...)``."""

    def names_httpx(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.split(".")[0] == "httpx"
        return ast.unparse(node).split(".")[0] == "httpx"

    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and node.args
        and ast.unparse(node.func).split(".")[-1] == "setattr"
        and names_httpx(node.args[0])
    ]


def test_no_test_monkeypatches_httpx():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line in httpx_patches(ast.parse(path.read_text(), str(path)))
    ]
    assert not found, "inject an Api (tests/support/cli.py) instead of patching httpx:\n" + "\n".join(found)


def test_the_scan_finds_patches_where_they_are():
    planted = ast.parse(
        'monkeypatch.setattr(httpx, "request", f)\nsetattr(httpx.Client, "send", f)\n'
        'monkeypatch.setattr("httpx.get", f)\nmonkeypatch.setattr(compose, "x", f)\n'
    )
    assert httpx_patches(planted) == [1, 2, 3]


def test_the_cli_sends_its_requests_through_the_injected_api(monkeypatch):
    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), request.headers.get("Authorization")))
        return httpx.Response(200, json=[])

    monkeypatch.setenv("CLAIMWATCH_TOKEN", "cw_test")
    result = CliRunner().invoke(
        main, ["alerts", "list", "--api", "http://api.example:8080"], obj=answer_http_by(answer)
    )
    assert result.exit_code == 0, result.output
    assert seen == [("GET", "http://api.example:8080/api/alerts", "Bearer cw_test")]


def test_the_api_leaves_a_given_client_open():
    given = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(204)))
    api = Api(given)
    assert api.request("GET", "http://x/").status_code == 204
    api.close()  # the test's client: reused across invocations, so the CLI must not close it
    assert not given.is_closed
