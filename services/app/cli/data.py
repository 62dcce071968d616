"""`claimwatch` commands. Traffic in and out: produce, convert, simulate, rates, dlq."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import click
from rich import box
from rich.table import Table

from services.app.cli.base import Abort, console, main, out, pct, print_json, reach, service_options
from services.core.clock import utcnow
from services.app.settings import Settings


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
        from services.client.produce import send_lines

        sent = send_lines(settings.bootstrap, settings.verdicts_topic, file, console)
        console.print(f"sent {sent} messages to {settings.verdicts_topic} on {settings.bootstrap}")
        return
    from services.client.adapters.convert import ConversionError, load_events
    from services.client.producer import VerdictProducer

    try:
        events, report = load_events(from_, file, route=route, keep_good=keep_good, format_field=format_field, now=utcnow())
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
    from services.client.adapters.convert import ConversionError, convert_file

    try:
        report = convert_file(from_, file, sys.stdout, route=route, keep_good=keep_good, format_field=format_field,
                              now=utcnow())
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
    from services.client.simulate_run import SimulationRequest, run_simulation

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
    from services.rates.report import route_rates, slice_rates
    from services.rates.window import WindowError, parse_window

    try:
        w = parse_window(window)
    except WindowError as exc:
        raise Abort(str(exc)) from None
    data = reach(settings, "/api/rates", {"window": window}, lambda c: route_rates(c.repos.rates.totals("", w)))
    slices = {}
    if show_slices:
        slices = reach(settings, "/api/slices", {"window": window},
                       lambda c: {d: slice_rates(c.repos.rates.totals(d, w), d) for d in c.repos.rates.dims()})
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

    data = reach(settings, "/api/dlq", {"samples": samples}, lambda c: dlq_summary(c.store, samples))
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
