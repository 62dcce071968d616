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
from rich import box
from rich.console import Console
from rich.table import Table

from services.settings import Settings, SettingsError, load_settings

console = Console(stderr=True)
out = Console()


LOCAL_TOKEN = Path("var/api-token")  # written by `claimwatch up` when no token is configured


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


def on_store(settings: Settings, local: Callable[[Any], Any]) -> Any:
    """Run `local(store)` on the store files directly (no service answers)."""
    from services.store.backends import StoreError, open_store
    from services.store.migrate import migrate

    try:
        store = open_store(settings.clickhouse)
    except StoreError as exc:
        raise Abort(f"no claimwatch API answers at {settings.api.url}, and {exc}") from None
    try:
        migrate(store)
        return local(store)
    except LookupError as exc:
        raise Abort(str(exc).strip('"')) from None
    except ValueError as exc:
        raise Abort(str(exc)) from None
    finally:
        store.close()


def reach(settings: Settings, path: str, params: dict, local: Callable[[Any], Any],
          method: str = "GET", body: dict | None = None) -> Any:
    """Ask the running service; if none answers, open the store files directly."""
    token = os.environ.get("CLAIMWATCH_TOKEN") or (LOCAL_TOKEN.read_text().strip() if LOCAL_TOKEN.is_file() else "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.request(method, settings.api.url.rstrip("/") + path, params=params, json=body,
                                 headers=headers, timeout=30)
    except httpx.TransportError:
        return on_store(settings, local)
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        raise Abort(f"{settings.api.url}{path}: HTTP {response.status_code}: {detail}")
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    return response.text


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
    if not verbose:  # the Kafka clients narrate transient reconnects at WARNING
        for name in ("kafka", "aiokafka"):
            logging.getLogger(name).setLevel(logging.ERROR)


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
    from services.runtime import run_worker

    settings = settings.model_copy(update={"kafka": settings.bootstrap})
    run_worker(settings, serve_api=serve_api)


@main.command()
@click.option("--exit", "exit_at_end", is_flag=True, help="Stop the stack at the end instead of leaving it up.")
@service_options
def demo(settings: Settings, exit_at_end: bool) -> None:
    """Bring the embedded stack up, send accelerated simulated traffic, show rates, alerts, issues and a runbook."""
    from services.demo import DemoError, run_demo

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
        report = repair_recent(store, _utcnow(), timedelta(hours=hours))
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
    from services.runtime import run_api

    run_api(settings)


FORMAT_CHOICES = ["judge-card", "pipeline", "monitor-record", "fever", "faithfulness", "otel"]


def conversion_options(fn: Callable) -> Callable:
    fn = click.option("--format-field", default=None, help="Read each line's format from this field (mixed files).")(fn)
    fn = click.option("--keep-good", is_flag=True, help="Write the good lines even when some fail.")(fn)
    fn = click.option("--route", default=None, help="Route for records that don't name one.")(fn)
    return fn


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from", "from_", type=click.Choice(FORMAT_CHOICES), default=None,
              help="Convert from a verifier's own output shape first (validated before sending).")
@conversion_options
@service_options
def produce(settings: Settings, file: Path, from_: str | None, route: str | None, keep_good: bool,
            format_field: str | None) -> None:
    """Send a JSONL file to the verdicts topic.

    Without --from, lines are sent as they are (replay): the worker routes invalid ones to the
    dead-letter topic with a reason. With --from, records are converted and validated first.
    """
    if from_ is None:
        from services.produce import send_lines

        sent = send_lines(settings.bootstrap, settings.verdicts_topic, file, console)
        console.print(f"sent {sent} messages to {settings.verdicts_topic} on {settings.bootstrap}")
        return
    from services.adapters.convert import ConversionError, load_events
    from services.producer import VerdictProducer

    try:
        events, report = load_events(from_, file, route=route, keep_good=keep_good, format_field=format_field, now=_utcnow())
    except ConversionError as exc:
        raise Abort(str(exc)) from None
    console.print(report.summary())
    if report.written:
        with VerdictProducer(settings.bootstrap, settings.verdicts_topic) as producer:
            result = producer.send_many(events)
        console.print(f"sent {result.sent} events to {settings.verdicts_topic} on {settings.bootstrap}")
    if not report.ok:
        sys.exit(1)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from", "from_", type=click.Choice(FORMAT_CHOICES), required=True, help="The source shape.")
@conversion_options
def convert(file: Path, from_: str, route: str | None, keep_good: bool, format_field: str | None) -> None:
    """Convert a verifier's output (JSONL) to verdict events on stdout. Nothing is half-written."""
    from services.adapters.convert import ConversionError, convert_file

    try:
        report = convert_file(from_, file, sys.stdout, route=route, keep_good=keep_good, format_field=format_field,
                              now=_utcnow())
    except ConversionError as exc:
        raise Abort(str(exc)) from None
    console.print(report.summary())
    if not report.ok:
        sys.exit(1)


@main.command()
@click.option("--minutes", default=120, show_default=True, help="Simulated minutes of traffic.")
@click.option("--seed", default=7, show_default=True, help="Same seed, same bytes.")
@click.option("--start", default=None, help="Event time of the first minute (RFC 3339). Default: MINUTES before now.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write JSONL here instead of producing to Kafka.")
@click.option("--speed", default=60.0, show_default=True,
              help="Simulated minutes per real minute when producing (0: as fast as possible).")
@click.option("--regression-at", default=60, show_default=True, help="Minute a new model raises billing-faq's rate.")
@click.option("--corpus-change-at", default="120", show_default=True,
              help="Minute a corpus update raises parcel-status's stale rate, or 'none'.")
@click.option("--bad-fraction", default=0.05, show_default=True, help="Share of messages that break the contract.")
@click.option("--scale", default=1.0, show_default=True, help="Multiply every route's volume.")
@service_options
def simulate(settings: Settings, minutes: int, seed: int, start: str | None, out: Path | None, speed: float,
             regression_at: int, corpus_change_at: str, bad_fraction: float, scale: float) -> None:
    """Realistic verdict traffic (routes, diurnal volume, failure families, regressions, bad events)."""
    from services.simulate_run import SimulationRequest, run_simulation

    try:
        request = SimulationRequest.build(minutes, seed, start, regression_at, corpus_change_at, bad_fraction, scale)
    except ValueError as exc:
        raise Abort(str(exc)) from None
    run_simulation(request, settings, out, speed, console)


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
    table = Table(title=f"Claim-level hallucination rate, {window} window, worst first", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for col, justify in (("route", "left"), ("rate", "right"), ("95% CI", "right"), ("failed/claims", "right"),
                         ("ctr/uns/ovr/stl/nos", "right"), ("unsafe", "right"), ("abstain ok|over", "right")):
        table.add_column(col, justify=justify, overflow="fold")
    for r in data:
        ci = r["interval"]
        pair = r["abstention_pair"]
        v = r["verdicts"]
        table.add_row(
            r["route"], pct(r["rate"]), f"{100 * ci[0]:.1f}–{100 * ci[1]:.1f}" if ci else "—",
            f"{r['failed']}/{r['claims']}",
            "/".join(str(v[k]) for k in ("contradicted", "unsupported", "overreach", "stale", "no_source")),
            pct(r["unsafe_serve"]["rate"]),
            f"{pct(pair['correct_abstention']['rate'])}|{pct(pair['over_refusal']['rate'])}",
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


def _utcnow():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def _alerts_local(store):
    from services.alerts.service import AlertsService
    from services.alerts.store import AlertStore

    return AlertsService(AlertStore(store))


@main.group()
def alerts() -> None:
    """Drift alerts: list, show, ack, silence and unsilence."""


@alerts.command("list")
@click.option("--route", default=None)
@click.option("--state", type=click.Choice(["pending", "firing", "resolved"]), default=None)
@click.option("--json", "as_json", is_flag=True)
@service_options
def alerts_list(settings: Settings, route: str | None, state: str | None, as_json: bool) -> None:
    """Alerts, newest first."""
    params = {k: v for k, v in {"route": route, "state": state}.items() if v}
    data = reach(settings, "/api/alerts", params, lambda store: _alerts_local(store).list(_utcnow(), route, state))
    if as_json:
        print_json(data)
        return
    table = Table(title="Alerts")
    for col in ("alert_id", "route", "state", "severity", "rate", "baseline", "delta", "since", "ack", "silenced"):
        table.add_column(col)
    for a in data:
        table.add_row(a["alert_id"], a["route"], a["state"], a["severity"], pct(a["rate"]), pct(a["baseline"]),
                      f"+{100 * (a['delta'] or 0):.1f} pts", a["starts_at"] or a["pending_since"],
                      a["acked_by"] or "", ",".join(a["silenced_by"]))
    out.print(table if data else "no alerts")


@alerts.command("show")
@click.argument("alert_id")
@service_options
def alerts_show(settings: Settings, alert_id: str) -> None:
    """One alert with its intervals, suspect changes and transitions (JSON)."""
    print_json(reach(settings, f"/api/alerts/{alert_id}", {}, lambda store: _alerts_local(store).show(alert_id, _utcnow())))


@alerts.command("ack")
@click.argument("alert_id")
@click.option("--by", required=True, help="Who acknowledges.")
@click.option("--note", default="", help="What you are doing about it.")
@service_options
def alerts_ack(settings: Settings, alert_id: str, by: str, note: str) -> None:
    """Acknowledge an alert (an unknown id is an error)."""
    data = reach(settings, f"/api/alerts/{alert_id}/ack", {}, lambda store: _alerts_local(store).ack(alert_id, by, note, _utcnow()),
                 method="POST", body={"by": by, "note": note})
    console.print(f"acked {data['alert_id']} ({data['route']}, {data['state']}) by {data['acked_by']}")


@alerts.command("silence")
@click.option("--match", "matchers", multiple=True, required=True, help="label=value, label!=value, label=~regex, label!~regex")
@click.option("--duration", default=None, help="e.g. 2h (or use --until)")
@click.option("--until", "until", default=None, help="RFC 3339 end time")
@click.option("--by", required=True)
@click.option("--comment", required=True, help="Why.")
@service_options
def alerts_silence(settings: Settings, matchers: tuple[str, ...], duration: str | None, until: str | None,
                   by: str, comment: str) -> None:
    """Silence alerts matching labels (route, kind, severity) until a time."""
    from services.contract.model import parse_timestamp

    try:
        ends_at = parse_timestamp(until) if until else None
    except Exception:
        raise Abort(f"--until must be an RFC 3339 timestamp with offset, got {until!r}") from None
    if duration is None and until is None:
        raise Abort("give --duration (e.g. 2h) or --until")
    body = {"matchers": list(matchers), "by": by, "comment": comment, "duration": duration,
            "ends_at": ends_at.isoformat() if ends_at else None}
    data = reach(settings, "/api/silences", {}, lambda store: _alerts_local(store).silence(
        list(matchers), by, comment, _utcnow(), duration=duration, ends_at=ends_at), method="POST", body=body)
    console.print(f"silence {data['silence_id']} until {data['ends_at']}: {', '.join(data['matchers'])}")


@alerts.command("unsilence")
@click.argument("silence_id")
@service_options
def alerts_unsilence(settings: Settings, silence_id: str) -> None:
    """End a silence now."""
    data = reach(settings, f"/api/silences/{silence_id}", {}, lambda store: _alerts_local(store).unsilence(silence_id, _utcnow()),
                 method="DELETE")
    console.print(f"silence {data['silence_id']} ended at {data['ends_at']}")


@alerts.command("silences")
@click.option("--active", is_flag=True)
@service_options
def alerts_silences(settings: Settings, active: bool) -> None:
    """List silences (JSON)."""
    print_json(reach(settings, "/api/silences", {"active": active}, lambda store: _alerts_local(store).silences(_utcnow(), active)))


@main.command()
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--alerts-out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None, help="TOML settings (drift section).")
def backtest(events: Path, alerts_out: Path, config_file: str | None) -> None:
    """Replay a JSONL file through the live rate and detector code in event time; write alert transitions."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from services.alerts.backtest import run_backtest

    try:
        settings = load_settings(config_file, os.environ, {})
    except SettingsError as exc:
        raise Abort(str(exc)) from None
    if not alerts_out.parent.exists():
        raise Abort(f"--alerts-out: directory {alerts_out.parent} does not exist")
    size = events.stat().st_size
    with Progress(TextColumn("backtest"), BarColumn(), TextColumn("{task.completed:,} events"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("events", total=None)
        summary = run_backtest(events, alerts_out, settings, progress=lambda n: progress.advance(task, n))
    console.print(f"{summary.events:,} events ({summary.rejected:,} invalid skipped), {summary.minutes:,} minutes evaluated, "
                  f"{summary.transitions} alert transitions -> {alerts_out}  [{size / 1e6:.0f} MB]")


@main.command()
@click.argument("input_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Offline mode: assignments JSONL.")
@click.option("--issues-out", type=click.Path(dir_okay=False, path_type=Path), help="Offline mode: issues JSONL.")
@click.option("--schedule", is_flag=True, help="Re-cluster the store every clustering.interval_minutes (server deployments).")
@service_options
def cluster(settings: Settings, input_file: Path | None, out: Path | None, issues_out: Path | None, schedule: bool) -> None:
    """Cluster failing claims into named issues: a file (offline), the store once, or on a schedule."""
    from clustering.config import config_from_settings
    from clustering.progress import RichStageProgress

    config = config_from_settings(settings.clustering.model, settings.clustering.fields)
    if input_file is not None:
        from clustering.offline import OfflineInputError, cluster_file

        if out is None or issues_out is None:
            raise Abort("offline mode needs --out ASSIGNMENTS.jsonl and --issues-out ISSUES.jsonl")
        try:
            with RichStageProgress(console) as progress:
                summary = cluster_file(input_file, out, issues_out, config, progress)
        except (OfflineInputError, ValueError, RuntimeError) as exc:
            raise Abort(str(exc)) from None
        console.print(f"{summary.get('claims', 0)} failing claims -> {summary.get('issues', 0)} issues "
                      f"({summary.get('noise', 0)} noise) -> {out}, {issues_out}")
        for note in summary.get("notes", []):
            console.print(f"note: {note}")
        return
    import time as _time

    from services.issues.jobs import IssueJobs
    from services.issues.store import IssueStore
    from services.store.backends import StoreError, open_store
    from services.store.migrate import migrate

    try:
        store = open_store(settings.clickhouse)
    except StoreError as exc:
        raise Abort(f"{exc} (a running `claimwatch up` re-clusters on its own schedule)") from None
    try:
        migrate(store)
        jobs = IssueJobs.from_settings(settings, IssueStore(store))
        while True:
            with RichStageProgress(console) as progress:
                jobs.embedder = jobs.embedder  # the model loads once, on the first run
                report = IssueJobs(config, jobs.embedder, jobs.issues, jobs.lookback).recluster(_utcnow(), progress)
            console.print(f"{report.claims} failing claims -> {report.issues} issues ({report.noise} noise)")
            if not schedule:
                break
            _time.sleep(settings.clustering.interval_minutes * 60)
    finally:
        store.close()


def _issues_local(store):
    from services.issues.service import IssuesService

    return IssuesService(store)


@main.group()
def issues() -> None:
    """Named issues: list, show, resolve, merge."""


@issues.command("list")
@click.option("--state", type=click.Choice(["new", "ongoing", "regressed", "resolved"]), default=None)
@click.option("--route", default=None)
@click.option("--sort", type=click.Choice(["last_seen", "first_seen", "count", "name"]), default="count", show_default=True)
@click.option("--limit", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@service_options
def issues_list(settings: Settings, state: str | None, route: str | None, sort: str, limit: int, as_json: bool) -> None:
    """Issues, largest first by default."""
    params = {k: v for k, v in {"state": state, "route": route, "sort": sort, "limit": limit}.items() if v}
    data = reach(settings, "/api/issues", params,
                 lambda store: _issues_local(store).list(state=state, route=route, sort=sort, limit=limit))
    if as_json:
        print_json(data)
        return
    table = Table(title="Issues", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for col in ("issue", "name", "count", "state", "routes", "last seen"):
        table.add_column(col, overflow="fold")
    for i in data:
        table.add_row(i["issue_id"], i["name"], str(i["count"]), i["state"], ",".join(i["routes"][:3]), i["last_seen"][:16])
    out.print(table if data else "no issues yet: they appear after the first clustering run")


@issues.command("show")
@click.argument("issue_id")
@service_options
def issues_show(settings: Settings, issue_id: str) -> None:
    """One issue with its exemplars and history (JSON)."""
    print_json(reach(settings, f"/api/issues/{issue_id}", {}, lambda store: _issues_local(store).show(issue_id)))


@issues.command("resolve")
@click.argument("issue_id")
@click.option("--by", required=True)
@service_options
def issues_resolve(settings: Settings, issue_id: str, by: str) -> None:
    """Mark an issue resolved (it comes back as 'regressed' if it recurs)."""
    data = reach(settings, f"/api/issues/{issue_id}/resolve", {}, lambda store: _issues_local(store).resolve(issue_id, by),
                 method="POST", body={"by": by})
    console.print(f"{data['issue_id']} is {data['state']}")


@issues.command("merge")
@click.argument("issue_id")
@click.option("--into", required=True)
@click.option("--by", required=True)
@service_options
def issues_merge(settings: Settings, issue_id: str, into: str, by: str) -> None:
    """Merge one issue into another; both keep the record."""
    data = reach(settings, f"/api/issues/{issue_id}/merge", {}, lambda store: _issues_local(store).merge(issue_id, into, by),
                 method="POST", body={"into": into, "by": by})
    console.print(f"merged {issue_id} into {data['issue_id']}")


@main.command()
@click.argument("issue_id")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), default="md", show_default=True)
@service_options
def runbook(settings: Settings, issue_id: str, fmt: str) -> None:
    """Render the runbook of one issue."""
    text = reach(settings, f"/api/issues/{issue_id}/runbook", {"format": fmt},
                 lambda store: {"runbook": _issues_local(store).runbook(issue_id, fmt)})
    sys.stdout.write((text["runbook"] if isinstance(text, dict) else text) + "\n")


def _eval_local(store, settings: Settings):
    from services.evalset.service import EvalService, lazy_embedder

    return EvalService(store, lazy_embedder(settings, store))


def _promotion_errors(fn):
    """Promotion refusals (approve twice, self-approval, near duplicate, ...) are user errors: exit 1 with the reason."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from services.evalset.promotion import PromotionError

        try:
            return fn(*args, **kwargs)
        except PromotionError as exc:
            raise Abort(str(exc)) from None
    return wrapper


@main.group()
def promote() -> None:
    """Promote representative traces into the eval set, with a reviewer's sign-off."""


@promote.command("propose")
@click.argument("issue_id")
@click.option("--traces", default=None, help="Comma-separated trace ids (default: the issue's representative traces).")
@click.option("--by", required=True, help="Who proposes.")
@service_options
@_promotion_errors
def promote_propose(settings: Settings, issue_id: str, traces: str | None, by: str) -> None:
    """Propose traces of an issue as eval items (their verifier labels are copied in)."""
    ids = [t.strip() for t in traces.split(",") if t.strip()] if traces else None
    data = reach(settings, "/api/promotions", {}, lambda store: _eval_local(store, settings).propose(issue_id, ids, by),
                 method="POST", body={"issue_id": issue_id, "trace_ids": ids, "by": by})
    for item in data:
        console.print(f"proposed {item['item_id']} from trace {item['origin_trace_id']}")
    if data:
        console.print(f"a reviewer signs off with: claimwatch promote approve {data[0]['item_id']} --by NAME --reason '...'")


@promote.command("approve")
@click.argument("item_id")
@click.option("--by", required=True, help="Reviewer.")
@click.option("--reason", default="", help="Why it belongs in the eval set.")
@service_options
@_promotion_errors
def promote_approve(settings: Settings, item_id: str, by: str, reason: str) -> None:
    """Approve a proposed item (the sign-off)."""
    data = reach(settings, f"/api/promotions/{item_id}/approve", {},
                 lambda store: _eval_local(store, settings).approve(item_id, by, reason),
                 method="POST", body={"by": by, "reason": reason})
    console.print(f"{data['item_id']} {data['state']} by {data['reviewed_by']}")


@promote.command("reject")
@click.argument("item_id")
@click.option("--by", required=True, help="Reviewer.")
@click.option("--reason", required=True, help="Why not.")
@service_options
@_promotion_errors
def promote_reject(settings: Settings, item_id: str, by: str, reason: str) -> None:
    """Reject a proposed item, with a reason."""
    data = reach(settings, f"/api/promotions/{item_id}/reject", {},
                 lambda store: _eval_local(store, settings).reject(item_id, by, reason),
                 method="POST", body={"by": by, "reason": reason})
    console.print(f"{data['item_id']} {data['state']} by {data['reviewed_by']}")


@main.group()
def evalset() -> None:
    """The eval (golden) set: items and export."""


@evalset.command("items")
@click.option("--state", type=click.Choice(["proposed", "approved", "rejected"]), default=None)
@service_options
def evalset_items(settings: Settings, state: str | None) -> None:
    """Eval items (JSON)."""
    params = {"state": state} if state else {}
    print_json(reach(settings, "/api/promotions", params, lambda store: _eval_local(store, settings).items(state)))


@evalset.command("export")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--by", default="", help="Who exports (recorded).")
@service_options
@_promotion_errors
def evalset_export(settings: Settings, out: Path, by: str) -> None:
    """Write approved items with their spans and labels, one item per line."""
    try:
        response = httpx.get(settings.api.url.rstrip("/") + "/api/promotions/export", timeout=60)
        if response.status_code != 200:
            raise Abort(f"export failed: HTTP {response.status_code}: {response.text[:300]}")
        tmp = out.with_name(out.name + ".tmp")
        try:
            tmp.write_bytes(response.content)
            tmp.replace(out)
        except OSError as exc:
            raise Abort(f"cannot write {out}: {exc.strerror}; choose a writable path") from None
        count = response.content.count(b"\n")
    except httpx.TransportError:
        count = on_store(settings, lambda store: _eval_local(store, settings).export(out, by))
    console.print(f"exported {count} approved items to {out}")


@main.group("eval")
def eval_group() -> None:
    """Eval-set metrics with intervals, agreement with human labels, and the CI gate."""


def _figure(f: dict) -> str:
    if f.get("value") is None:
        return "—"
    return f"{100 * f['value']:.1f}% [{100 * f['lo']:.1f}–{100 * f['hi']:.1f}] (n={f['items']})"


@eval_group.command("report")
@click.option("--json", "as_json", is_flag=True)
@service_options
def eval_report_cmd(settings: Settings, as_json: bool) -> None:
    """Faithfulness by query type and stakes (worst slice first) and the abstention pair, with 95% intervals."""
    data = reach(settings, "/api/eval/report", {}, lambda store: _eval_local(store, settings).report())
    if as_json:
        print_json(data)
        return
    agreement = data.get("agreement")
    kappa = f"verifier-human kappa {agreement['kappa']['value']:.2f}" if agreement and agreement["kappa"]["value"] is not None \
        else "no human labels yet: the automated figures below are unchecked"
    out.print(f"eval set: {data['items']} items; {kappa}")
    out.print(f"faithfulness (supported / checkable claims): {_figure(data['faithfulness'])}")
    for s in data["slices"]:
        out.print(f"  {s['dim']}={s['value']:<14} {_figure(s['faithfulness'])}")
    pair = data["abstention"]
    out.print(f"abstention pair: correct abstention {_figure(pair['correct_abstention'])} | "
              f"over-refusal {_figure(pair['over_refusal'])}")


@eval_group.command("agreement")
@service_options
def eval_agreement_cmd(settings: Settings) -> None:
    """Verifier labels beside human labels on the same claims: kappa, confusion matrix, worst slices (JSON)."""
    print_json(reach(settings, "/api/eval/agreement", {}, lambda store: _eval_local(store, settings).agreement()))


@eval_group.command("gate")
@click.option("--min-faithfulness", type=float, default=None)
@click.option("--max-over-refusal", type=float, default=None)
@click.option("--slice-min", default=None, help="e.g. 0.8, or stakes=high:0.9,query_type=lookup:0.85")
@service_options
def eval_gate_cmd(settings: Settings, min_faithfulness: float | None, max_over_refusal: float | None,
                  slice_min: str | None) -> None:
    """Exit non-zero, naming the failing slice, when the eval set misses a threshold (for CI)."""
    if min_faithfulness is None and max_over_refusal is None and slice_min is None:
        raise Abort("give at least one of --min-faithfulness, --max-over-refusal, --slice-min")
    params = {k: v for k, v in {"min_faithfulness": min_faithfulness, "max_over_refusal": max_over_refusal,
                                "slice_min": slice_min}.items() if v is not None}
    data = reach(settings, "/api/eval/gate", params,
                 lambda store: _eval_local(store, settings).gate(min_faithfulness, max_over_refusal, slice_min))
    if data["passed"]:
        console.print("eval gate passed")
        return
    for failure in data["failures"]:
        console.print(f"[red]FAIL[/red] {failure['slice']}: {failure['message']}")
    sys.exit(1)


if __name__ == "__main__":
    main()
