"""`claimwatch` commands. Run the service: up, worker, api, demo, repair, token."""
from __future__ import annotations

import click

from services.app.cli.base import Abort, LOCAL_TOKEN, console, main, out, service_options
from services.core.clock import utcnow
from services.app.settings import Settings


@main.command()
@service_options
def up(settings: Settings) -> None:
    """Start the embedded stack in the foreground: broker, worker, store, evaluator, API. Ctrl-C stops it."""
    from services.app.compose import run_worker
    from services.app.broker import BrokerError, EmbeddedBroker

    broker = None
    if settings.kafka is None:
        host, port = settings.embedded_broker.rsplit(":", 1)
        try:
            broker = EmbeddedBroker(host, int(port), log_path=None).start()
        except BrokerError as exc:
            raise Abort(f"could not start the embedded broker on {settings.embedded_broker}: {exc}. "
                        "Is another `claimwatch up` running? Set embedded_broker or pass --kafka.") from None
        settings = settings.model_copy(update={"kafka": broker.bootstrap})
    if not settings.api.token_hashes:  # a local token so the CLI and the dashboard can act (ack, promote, ...)
        from services.api.auth import new_token

        token, digest = new_token()
        LOCAL_TOKEN.parent.mkdir(parents=True, exist_ok=True)
        LOCAL_TOKEN.write_text(token + "\n")
        LOCAL_TOKEN.chmod(0o600)
        settings = settings.model_copy(update={"api": settings.api.model_copy(update={"token_hashes": [digest]})})
        console.print(f"API token for this run in {LOCAL_TOKEN} (the CLI uses it; paste it into the dashboard to act)")
    console.print(f"[bold]claimwatch up[/bold]  broker [cyan]{settings.kafka}[/cyan]"
                  f"{' (embedded Tansu, in-memory)' if broker else ''}  store [cyan]{settings.clickhouse}[/cyan]")

    def ready(_services) -> None:
        console.print(f"API and dashboard: [cyan]http://{settings.api.host}:{settings.api.port}/[/cyan]   Ctrl-C to stop")

    try:
        run_worker(settings, serve_api=True, on_ready=ready)
    finally:
        if broker:
            broker.stop()
        console.print("claimwatch stopped")


@main.command()
@click.option("--serve-api/--no-serve-api", "serve_api", default=False, help="Also serve the HTTP API from this worker.")
@service_options
def worker(settings: Settings, serve_api: bool) -> None:
    """Run the Faust worker alone (ingest, evaluator and clustering timers) against --kafka."""
    from services.app.compose import run_worker

    settings = settings.model_copy(update={"kafka": settings.bootstrap})
    run_worker(settings, serve_api=serve_api)


@main.command()
@click.option("--exit", "exit_at_end", is_flag=True, help="Stop the stack at the end instead of leaving it up.")
@service_options
def demo(settings: Settings, exit_at_end: bool) -> None:
    """Bring the embedded stack up, send accelerated simulated traffic, show rates, alerts, issues and a runbook."""
    from services.client.demo import DemoError, run_demo

    try:
        run_demo(settings, console, keep_running=not exit_at_end)
    except DemoError as exc:
        raise Abort(str(exc)) from None


@main.command()
@click.option("--hours", default=24.0, show_default=True, help="How far back (by ingestion time) to check.")
@service_options
def repair(settings: Settings, hours: float) -> None:
    """Re-derive claim rows and minute aggregates from stored answers after a crash (workers stopped)."""
    from datetime import timedelta

    from services.store.backends import StoreError, open_store
    from services.store.migrate import migrate
    from services.store.repair import repair_recent

    try:
        store = open_store(settings.clickhouse)
    except StoreError as exc:
        raise Abort(str(exc)) from None
    try:
        migrate(store)
        report = repair_recent(store, utcnow(), timedelta(hours=hours))
    finally:
        store.close()
    console.print(f"claim rows restored: {report.claims_rows}; minute buckets corrected: {report.buckets_corrected}")


@main.group()
def token() -> None:
    """API bearer tokens (configured hashed in api.token_hashes)."""


@token.command("new")
def token_new() -> None:
    """Print a new token and the sha256 to put in CLAIMWATCH_API__TOKEN_HASHES (the token is shown once)."""
    from services.api.auth import new_token

    value, digest = new_token()
    out.print(f"token:  {value}\nsha256: {digest}")
    console.print(f"configure: CLAIMWATCH_API__TOKEN_HASHES='[\"{digest}\"]'; clients send Authorization: Bearer <token> "
                  "(the CLI reads CLAIMWATCH_TOKEN)")


@main.command("api")
@service_options
def api_command(settings: Settings) -> None:
    """Serve the HTTP API and dashboard alone (for a ClickHouse server deployment)."""
    from services.app.compose import run_api

    run_api(settings)

