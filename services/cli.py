"""`claimwatch` command line. Thin: parse flags, build Settings once, call plain objects."""
from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

import click
import httpx
import orjson
from rich.console import Console
from rich.table import Table

from services.settings import Settings, SettingsError, load_settings

console = Console(stderr=True)
out = Console()


class Abort(click.ClickException):
    """A user-facing error: printed without a traceback, exit code 1."""


def service_options(fn: Callable) -> Callable:
    """The flags every command that touches a service takes."""

    @click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                  envvar="CLAIMWATCH_CONFIG", help="TOML settings file (lowest precedence).")
    @click.option("--kafka", default=None, help="Kafka bootstrap list HOST:PORT[,...]. Unset: the embedded broker.")
    @click.option("--clickhouse", default=None, help="chdb:PATH (default chdb:./var/clickhouse) or http(s)://user:pass@host:port/db.")
    @click.option("--topic-prefix", default=None, help="Topic name prefix (default claimwatch).")
    @click.option("--api", "api_url", default=None, help="URL of a running claimwatch API (default http://127.0.0.1:8080).")
    @functools.wraps(fn)
    def wrapper(config_file, kafka, clickhouse, topic_prefix, api_url, **kwargs):
        flags: dict[str, Any] = {"kafka": kafka, "clickhouse": clickhouse, "topic_prefix": topic_prefix}
        if api_url:
            flags["api"] = {"url": api_url}
        try:
            settings = load_settings(config_file, os.environ, flags)
        except SettingsError as exc:
            raise Abort(str(exc)) from None
        return fn(settings, **kwargs)

    return wrapper


def reach(settings: Settings, path: str, params: dict, local: Callable[[Any], Any]) -> Any:
    """Ask the running service; if none answers, open the store files directly."""
    try:
        response = httpx.get(settings.api.url.rstrip("/") + path, params=params, timeout=30)
    except httpx.TransportError:
        from services.store.backends import StoreError, open_store
        from services.store.migrate import migrate

        try:
            store = open_store(settings.clickhouse)
        except StoreError as exc:
            raise Abort(f"no claimwatch API answers at {settings.api.url}, and {exc}") from None
        try:
            migrate(store)
            return local(store)
        finally:
            store.close()
    if response.status_code >= 400:
        raise Abort(f"{settings.api.url}{path}: HTTP {response.status_code}: {response.json().get('detail', response.text)}")
    return response.json()


def print_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log more.")
def main(verbose: bool) -> None:
    """claimwatch: claim-level hallucination monitoring for RAG and LLM products."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command()
@service_options
def up(settings: Settings) -> None:
    """Start the embedded stack in the foreground: broker, worker, store, evaluator, API. Ctrl-C stops it."""
    from services.runtime import run_worker
    from streams.broker import BrokerError, EmbeddedBroker

    broker = None
    if settings.kafka is None:
        host, port = settings.embedded_broker.rsplit(":", 1)
        try:
            broker = EmbeddedBroker(host, int(port), log_path=None).start()
        except BrokerError as exc:
            raise Abort(f"could not start the embedded broker on {settings.embedded_broker}: {exc}. "
                        "Is another `claimwatch up` running? Set embedded_broker or pass --kafka.") from None
        settings = settings.model_copy(update={"kafka": broker.bootstrap})
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
    from services.runtime import run_worker

    settings = settings.model_copy(update={"kafka": settings.bootstrap})
    run_worker(settings, serve_api=serve_api)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@service_options
def produce(settings: Settings, file: Path) -> None:
    """Send a JSONL file of verdict events to the verdicts topic, line by line, as they are.

    Invalid lines are sent too: the worker routes them to the dead-letter topic with a reason.
    """
    from services.produce import send_lines

    sent = send_lines(settings.bootstrap, settings.verdicts_topic, file, console)
    console.print(f"sent {sent} messages to {settings.verdicts_topic} on {settings.bootstrap}")


@main.command()
@click.option("--window", default="30m", show_default=True, help="5m, 30m, 90m, 24h, … or all.")
@click.option("--slices", "show_slices", is_flag=True, help="Also show slices by query type, stakes and versions.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array (stable shape for scripts).")
@service_options
def rates(settings: Settings, window: str, show_slices: bool, as_json: bool) -> None:
    """Per-route claim-level hallucination rate with intervals and the verdict breakdown, worst first."""
    from services.rates.query import RateQueries, WindowError, parse_window
    from services.rates.report import route_rates, slice_rates

    try:
        w = parse_window(window)
    except WindowError as exc:
        raise Abort(str(exc)) from None
    data = reach(settings, "/api/rates", {"window": window}, lambda store: route_rates(RateQueries(store).totals("", w)))
    slices = {}
    if show_slices:
        slices = reach(settings, "/api/slices", {"window": window},
                       lambda store: {d: slice_rates(RateQueries(store).totals(d, w), d) for d in RateQueries(store).dims()})
    if as_json:
        print_json(data if not show_slices else {"routes": data, "slices": slices})
        return
    if not data:
        console.print("no events stored yet: send some with `claimwatch produce` or `claimwatch simulate`")
        return
    table = Table(title=f"Claim-level hallucination rate, window {window} (worst first)")
    for col in ("route", "rate", "95% CI", "failed/claims", "events", "contradicted", "unsupported", "overreach",
                "stale", "no_source", "unsafe serve", "correct abst. | over-refusal"):
        table.add_column(col, justify="left" if col == "route" else "right")
    for r in data:
        ci = r["interval"]
        pair = r["abstention_pair"]
        table.add_row(
            r["route"], pct(r["rate"]), f"{pct(ci[0])}–{pct(ci[1])}" if ci else "—", f"{r['failed']}/{r['claims']}",
            str(r["events"]), *(str(r["verdicts"][v]) for v in ("contradicted", "unsupported", "overreach", "stale", "no_source")),
            pct(r["unsafe_serve"]["rate"]),
            f"{pct(pair['correct_abstention']['rate'])} | {pct(pair['over_refusal']['rate'])}",
        )
    out.print(table)
    for dim, entries in slices.items():
        t = Table(title=f"by {dim} (worst first)")
        for col in ("route", dim, "rate", "95% CI", "claims", "events"):
            t.add_column(col)
        for e in entries:
            ci = e["interval"]
            t.add_row(e["route"], e["value"] or "(none)", pct(e["rate"]), f"{pct(ci[0])}–{pct(ci[1])}" if ci else "—",
                      str(e["claims"]), str(e["events"]))
        out.print(t)


@main.command()
@click.option("--samples", default=1, show_default=True, help="Samples to show per reason.")
@click.option("--json", "as_json", is_flag=True)
@service_options
def dlq(settings: Settings, samples: int, as_json: bool) -> None:
    """Dead-letter counts per reason, with a sample of each."""
    from services.store.dlq import dlq_summary

    data = reach(settings, "/api/dlq", {"samples": samples}, lambda store: dlq_summary(store, samples))
    if as_json:
        print_json(data)
        return
    table = Table(title="Dead-lettered messages by reason")
    for col in ("reason", "count", "sample"):
        table.add_column(col)
    for r in data:
        sample = r["samples"][0] if r["samples"] else {}
        table.add_row(r["reason"], str(r["count"]), f"{sample.get('reason', '')} [{sample.get('source', '')}]")
    out.print(table if data else "no dead-lettered messages")


if __name__ == "__main__":
    main()
