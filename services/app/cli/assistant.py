"""`claimwatch mcp`: the MCP server for assistants (services/app/assistant.py)."""

from __future__ import annotations

import click

from services.app.cli.base import main, service_options
from services.app.settings import Settings


@main.command("mcp")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: started by the assistant (Claude Desktop, Claude Code, Cursor); http: streamable HTTP at /mcp.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="http: the address to listen on.")
@click.option("--port", default=8765, show_default=True, help="http: the port to listen on.")
@service_options
def mcp(settings: Settings, transport: str, host: str, port: int) -> None:
    """Serve claimwatch's tools to an assistant over MCP: alerts, issues, runbooks, rates, and (with a token that
    may change) ack, silence, assign, note and propose. Each is a request to the API at --api, with the user's
    token over stdio and the caller's bearer token over HTTP."""
    from services.app.assistant import build_server, gateway_for

    server = build_server(gateway_for(settings, user_token=transport == "stdio"))
    if transport == "stdio":
        server.run("stdio")
    else:
        click.echo(f"claimwatch MCP server at http://{host}:{port}/mcp (API {settings.api.url})", err=True)
        server.run("streamable-http", host=host, port=port)
