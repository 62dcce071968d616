"""`claimwatch` commands. Run the service: up, worker, api, demo, repair, token."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import click

from services.app.cli.base import STACK_RECORD, Abort, console, main, out, service_options
from services.app.settings import Settings
from services.core.clock import utcnow
from services.core.command import cli_command


def refuse_taken_ports(settings: Settings) -> None:
    """Before anything starts or moves: the API's port, and the embedded broker's when it is the broker, are free."""
    from services.app.broker import listener_of, port_free

    wanted = [("CLAIMWATCH_API__PORT", settings.api.host, settings.api.port)]
    if settings.kafka is None:
        broker_host, broker_port = settings.embedded_broker.rsplit(":", 1)
        wanted.append(("CLAIMWATCH_EMBEDDED_BROKER (host:port)", broker_host, int(broker_port)))
    for setting, host, port in wanted:
        if not port_free(host, port):
            holder = listener_of(port)
            raise Abort(
                f"port {port} is in use{f' by {holder}' if holder else ''}; set {setting} to a free port, "
                "or stop that process"
            )


@main.command()
@service_options
def up(settings: Settings) -> None:
    """Start the embedded stack in the foreground: broker, worker, store, evaluator, API. Ctrl-C stops it."""
    from services.app.broker import BrokerError, EmbeddedBroker
    from services.app.processes import WorkerStopped, run_worker

    stop_on_sigterm()
    refuse_taken_ports(settings)
    broker = None
    if settings.kafka is None:
        host, port = settings.embedded_broker.rsplit(":", 1)
        try:
            broker = EmbeddedBroker(host, int(port), log_path=None).start()
        except BrokerError as exc:
            raise Abort(
                f"could not start the embedded broker on {settings.embedded_broker}: {exc}. Stop that process "
                f"(another `{cli_command()} up`, or a broker one left behind), or set embedded_broker or pass "
                "--kafka."
            ) from None
        settings = settings.model_copy(update={"kafka": broker.bootstrap})
    settings = _local_token(settings)
    console.print(
        f"[bold]claimwatch up[/bold]  broker [cyan]{settings.kafka}[/cyan]"
        f"{' (embedded Tansu, in-memory)' if broker else ''}  store [cyan]{settings.clickhouse}[/cyan]"
    )

    def ready(_services) -> None:
        STACK_RECORD.write(os.getpid(), url=settings.api.url)  # the CLI run from this folder reaches it first
        console.print(
            f"API and dashboard: [cyan]http://{settings.api.host}:{settings.api.port}/[/cyan]   Ctrl-C to stop"
        )

    try:
        run_worker(settings, serve_api=True, on_ready=ready)
    except WorkerStopped as exc:
        raise Abort(str(exc)) from None
    finally:
        STACK_RECORD.forget(os.getpid())
        if broker:
            broker.stop()
        console.print("claimwatch stopped")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """Until the worker takes the signals over, SIGTERM unwinds like Ctrl-C, so `finally` stops the broker
    (a `claimwatch demo` that dies sends it) instead of leaving it orphaned on its port."""
    signal.signal(signal.SIGTERM, _interrupt)


def _local_token(settings: Settings) -> Settings:
    """The token rules of an API served from here (services/app/credentials.py: with_serving_tokens), and where
    its token is kept, said once."""
    from services.app.credentials import CredentialsError, with_serving_tokens

    try:
        settings, where = with_serving_tokens(settings)
    except (CredentialsError, OSError) as exc:
        raise Abort(f"cannot keep the API token: {exc}") from None
    if where is not None:
        console.print(token_hint(settings.api.url, where), soft_wrap=True, markup=False, highlight=False)
    return settings


def token_hint(url: str, where) -> str:
    """Where the token is and how to use it, for `up` and the demo."""
    cli = cli_command()
    return (
        f"API token for {url}: kept in {where} (mode 0600).\n"
        f"  The claimwatch CLI finds it there from any directory. For scripts and curl:\n"
        f"    export CLAIMWATCH_TOKEN=$({cli} token show)\n"
        f"  For changes in the dashboard (ack, silence, promote): paste the output of\n"
        f"  `{cli} token show` into its API token field."
    )


@main.command()
@click.option(
    "--serve-api/--no-serve-api", "serve_api", default=False, help="Also serve the HTTP API from this worker."
)
@service_options
def worker(settings: Settings, serve_api: bool) -> None:
    """Run the Faust worker alone (ingest, evaluator and clustering timers) against --kafka."""
    from services.app.processes import WorkerStopped, run_worker

    settings = settings.model_copy(update={"kafka": settings.bootstrap})
    try:
        run_worker(settings, serve_api=serve_api)
    except WorkerStopped as exc:
        raise Abort(str(exc)) from None


@main.command()
@click.option("--exit", "exit_at_end", is_flag=True, help="Stop the stack at the end instead of leaving it up.")
@service_options
def demo(settings: Settings, exit_at_end: bool) -> None:
    """Bring the embedded stack up, send accelerated simulated traffic, show rates, alerts, issues and a runbook."""
    from services.app.credentials import DEMO_REVIEWER, hashes_path, holder_token, hosts_path
    from services.client.demo import DemoError, run_demo

    refuse_taken_ports(settings)
    hints = [] if settings.api.token_hashes else [token_hint(settings.api.url, hosts_path())]
    if not settings.api.token_hashes:  # sign-off needs a second, named person: the demo keeps a token for one
        name, kept = DEMO_REVIEWER
        kept.parent.mkdir(exist_ok=True)
        holder_token(kept, name, Path(settings.api.token_file or hashes_path()).expanduser())
        hints.append(
            f"Approving an eval item needs a second person's named token; {name}'s is in {kept}:\n"
            f"    CLAIMWATCH_TOKEN=$(cat {kept}) {cli_command()} promote approve ITEM_ID"
        )
    try:
        run_demo(
            settings, console, keep_running=not exit_at_end, cli=cli_command(), token_hint="\n".join(hints) or None
        )
    except DemoError as exc:
        raise Abort(str(exc)) from None


@main.command()
@click.option("--hours", default=24.0, show_default=True, help="How far back (by ingestion time) to check.")
@click.option(
    "--damaged",
    is_flag=True,
    help="After damage (a worker refused to start and said so): make keys, "
    "claim rows and minute aggregates agree with the answers the store still holds, drop the broken parts, "
    "and print the span to replay.",
)
@service_options
def repair(settings: Settings, hours: float, damaged: bool) -> None:
    """Re-derive answer keys, claim rows and minute aggregates from stored answers after a crash (workers stopped)."""
    from datetime import timedelta

    from services.app.compose import open_migrated
    from services.core.errors import StoreError
    from services.store.repair import MAX_REPAIR_HORIZON, repair_recent

    limit = MAX_REPAIR_HORIZON / timedelta(hours=1)
    if not 0 < hours <= limit:  # also refuses nan; checked before timedelta(), which overflows on huge values
        raise Abort(
            f"--hours must be more than 0 and at most {limit:g} (the limit, {MAX_REPAIR_HORIZON.days} days); "
            f"got {hours:g}"
        )

    try:
        store = open_migrated(settings)
    except StoreError as exc:
        raise Abort(str(exc)) from None
    try:
        if damaged:
            _rebuild_damaged(store)
            return
        report = repair_recent(store, utcnow(), timedelta(hours=hours))
    except StoreError as exc:
        raise Abort(str(exc)) from None
    finally:
        store.close()
    console.print(
        f"answer keys restored: {report.keys_rows}; claim rows restored: {report.claims_rows}; "
        f"minute buckets corrected: {report.buckets_corrected}"
    )


def _rebuild_damaged(store) -> None:
    from services.store.damage import find_damage, rebuild

    damage = find_damage(store)
    if not damage:
        console.print("no damaged parts found: nothing to rebuild")
        return
    for part in damage:
        console.print(f"damaged: {part}", markup=False, highlight=False)
    report = rebuild(store, utcnow(), damage)
    console.print(
        f"rebuilt from the answers stored since {report.kept_from} UTC: {report.keys_removed:,} answer keys "
        f"and {report.claims_removed:,} claim rows of lost answers removed; {report.keys_restored:,} keys and "
        f"{report.claims_restored:,} claim rows restored; {report.buckets_lowered:,} minute buckets lowered "
        f"and {report.buckets_raised:,} raised. Dropped: {', '.join(report.parts_dropped)}.",
        markup=False,
        highlight=False,
    )
    if report.answers_lost:
        console.print(
            f"{report.answers_lost:,} answers were lost, observed {report.lost_from} to {report.lost_until} "
            f"UTC on {', '.join(report.lost_routes)}. Replay the source for that span (for a file: "
            f"`{cli_command()} produce FILE`): the writer stores exactly what is missing.",
            markup=False,
            highlight=False,
        )


@main.group()
def token() -> None:
    """API bearer tokens: show the CLI's, make new ones (accepted by a running `claimwatch up` at once)."""


@token.command("show")
@service_options
def token_show(settings: Settings) -> None:
    """Print the token the CLI sends to --api ($CLAIMWATCH_TOKEN, else the one `claimwatch up` stored)."""
    from services.app.credentials import find_token

    found = find_token(settings.api.url)
    if found is None:
        raise Abort(
            f"no API token for {settings.api.url}: start the stack with `{cli_command()} up` (it stores one), "
            "or set CLAIMWATCH_TOKEN"
        )
    click.echo(found[0])
    console.print(f"from {found[1]}", style="dim", soft_wrap=True, markup=False)


@token.command("new")
@click.option(
    "--register/--no-register",
    default=True,
    show_default=True,
    help="Add the sha256 to api.token_file (default ~/.config/claimwatch/token-hashes), which a running "
    f"`{cli_command()} up` re-reads: the token works from its next request.",
)
@click.option("--save", is_flag=True, help="Also store the token for --api in hosts.toml, so this CLI sends it.")
@click.option(
    "--name",
    default=None,
    metavar="NAME",
    callback=lambda ctx, param, v: token_name(v),
    help="Who holds the token: every change made with it is recorded as NAME, and sign-off's four-eyes "
    "check compares it. Unnamed tokens record the --by their caller gives.",
)
@service_options
def token_new(settings: Settings, register: bool, save: bool, name: str | None) -> None:
    """Print a new token and its sha256 (the token is shown once; only the hash is kept)."""

    from services.api.auth import new_token
    from services.app.credentials import add_token_hash, hashes_path, save_token

    value, digest = new_token()
    out.print(f"token:  {value}\nsha256: {digest}", soft_wrap=True)
    if register:
        path = add_token_hash(
            digest,
            Path(settings.api.token_file or hashes_path()).expanduser(),
            note=f"claimwatch token new, {utcnow():%Y-%m-%d %H:%M}Z",
            name=name,
        )
        console.print(
            f"added to {path}: a running `{cli_command()} up` accepts it from the next request",
            soft_wrap=True,
            markup=False,
        )
    if save:
        console.print(
            f"stored for {settings.api.url} in {save_token(settings.api.url, value)}", soft_wrap=True, markup=False
        )
    entry = f"{digest} {name}" if name else digest
    console.print(
        f"elsewhere: CLAIMWATCH_API__TOKEN_HASHES='[\"{entry}\"]'; clients send Authorization: Bearer "
        "<token> (the CLI reads CLAIMWATCH_TOKEN)",
        soft_wrap=True,
        markup=False,
    )
    if name:
        console.print(
            f"changes made with it are recorded as {name!r}, and it can sign off (approve, adjudicate) "
            "what someone else proposed",
            soft_wrap=True,
            markup=False,
        )


def token_name(value: str | None) -> str | None:
    """A token's holder name: what a token-hashes line can carry after the hash (no '#', one line)."""
    if value is None:
        return None
    name = " ".join(value.split())
    if not name or "#" in name or len(name) > 200:
        raise click.BadParameter("give 1-200 characters without '#'")
    return name


@main.command("api")
@service_options
def api_command(settings: Settings) -> None:
    """Serve the HTTP API and dashboard alone (for a ClickHouse server deployment)."""
    from services.app.processes import run_api

    run_api(settings)
