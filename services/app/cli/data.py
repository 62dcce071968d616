"""`claimwatch` commands. Traffic in and out: produce, convert, simulate, rates, dlq."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import click
from rich.text import Text

from services.alerts.detection.expectations import PRIORITY, SORTS
from services.alerts.explain.figures import expected_text, figure
from services.api.routeview import MAX_ROUTES_PER_PAGE, ROUTES_PER_PAGE
from services.app.cli.base import (
    Abort,
    command_line,
    console,
    main,
    out,
    print_json,
    reach,
    reach_page,
    service_options,
)
from services.app.cli.tables import Column, output_option, paging_options, print_table
from services.app.settings import Settings
from services.contract.model import FAILED_VERDICT_ORDER
from services.core.clock import utcnow
from services.core.command import cli_command
from services.core.numbers import interval_text, pct, thousands

FORMAT_CHOICES = ["judge-card", "pipeline", "monitor-record", "fever", "faithfulness", "otel"]


def _observed_at(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    from services.contract.model import parse_timestamp

    try:
        return None if value is None else parse_timestamp(value)
    except ValueError as exc:  # the contract's Fault carries the reason
        raise click.BadParameter(f"{exc}; use RFC 3339 with an offset, e.g. 2026-11-21T09:00:00Z") from None


def conversion_options(fn: Callable) -> Callable:
    fn = click.option(
        "--observed-at",
        default=None,
        callback=_observed_at,
        metavar="RFC3339",
        help="Time for records that carry none (default: now, with a warning).",
    )(fn)
    fn = click.option("--format-field", default=None, help="Read each line's format from this field (mixed files).")(fn)
    fn = click.option("--keep-good", is_flag=True, help="Write the good lines even when some fail.")(fn)
    fn = click.option("--route", default=None, help="Route for records that don't name one.")(fn)
    return fn


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--from",
    "from_",
    type=click.Choice(FORMAT_CHOICES),
    default=None,
    help="Convert from a verifier's own output shape first (validated before sending).",
)
@click.option(
    "--no-batch",
    is_flag=True,
    help="One event per Kafka message, instead of batch envelopes of up to 1000 events per route.",
)
@conversion_options
@service_options
def produce(
    settings: Settings,
    file: Path,
    from_: str | None,
    no_batch: bool,
    route: str | None,
    keep_good: bool,
    format_field: str | None,
    observed_at: datetime | None,
) -> None:
    """Send a JSONL file to the verdicts topic.

    Without --from, lines are sent as they are (replay): the worker routes invalid ones to the
    dead-letter topic with a reason. With --from, records are converted and validated first.
    Events of one route travel in batch envelopes unless --no-batch is given.
    """
    if from_ is None:
        from services.client.produce import send_lines

        lines, messages = send_lines(settings.bootstrap, settings.verdicts_topic, file, console, batch=not no_batch)
        console.print(f"sent {lines} lines in {messages} messages to {settings.verdicts_topic} on {settings.bootstrap}")
        return
    from services.client.adapters.convert import ConversionError, load_events
    from services.client.producer import VerdictProducer

    try:
        events, report = load_events(
            from_, file, route=route, keep_good=keep_good, format_field=format_field, now=observed_at or utcnow()
        )
    except ConversionError as exc:
        raise Abort(str(exc)) from None
    console.print(report.summary())
    warn_if_stamped(report, observed_at)
    if report.written:
        with VerdictProducer(settings.bootstrap, settings.verdicts_topic, envelopes=not no_batch) as producer:
            result = producer.send_many(events)
        console.print(f"sent {result.sent} events to {settings.verdicts_topic} on {settings.bootstrap}")
    if not report.ok:
        sys.exit(1)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--from", "from_", type=click.Choice(FORMAT_CHOICES), required=True, help="The source shape.")
@conversion_options
def convert(
    file: Path, from_: str, route: str | None, keep_good: bool, format_field: str | None, observed_at: datetime | None
) -> None:
    """Convert a verifier's output (JSONL) to verdict events on stdout. Nothing is half-written."""
    from services.client.adapters.convert import ConversionError, convert_file

    try:
        report = convert_file(
            from_,
            file,
            sys.stdout,
            route=route,
            keep_good=keep_good,
            format_field=format_field,
            now=observed_at or utcnow(),
        )
    except ConversionError as exc:
        raise Abort(str(exc)) from None
    console.print(report.summary())
    warn_if_stamped(report, observed_at)
    if not report.ok:
        sys.exit(1)


def warn_if_stamped(report, observed_at: datetime | None) -> None:
    """Records without a time got the wall clock: say so, and how to pin it."""
    if report.stamped and observed_at is None:
        console.print(
            f"warning: {report.stamped} records carry no time; their events got the conversion time "
            f"{report.stamped_at}. Pass --observed-at {report.stamped_at} (or the time they were judged) "
            "to pin it, so a re-run gives identical events.",
            style="yellow",
        )


@main.command()
@click.option("--minutes", default=120, show_default=True, help="Simulated minutes of traffic.")
@click.option("--seed", default=7, show_default=True, help="Same seed, same bytes.")
@click.option("--start", default=None, help="Event time of the first minute (RFC 3339). Default: MINUTES before now.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write JSONL here instead of producing to Kafka.",
)
@click.option(
    "--speed",
    default=60.0,
    show_default=True,
    help="Simulated minutes per real minute when producing (0: as fast as possible).",
)
@click.option("--regression-at", default=60, show_default=True, help="Minute a new model raises billing-faq's rate.")
@click.option(
    "--corpus-change-at",
    default="120",
    show_default=True,
    help="Minute a corpus update raises parcel-status's stale rate, or 'none'.",
)
@click.option("--bad-fraction", default=0.05, show_default=True, help="Share of messages that break the contract.")
@click.option("--scale", default=1.0, show_default=True, help="Multiply every route's volume.")
@click.option(
    "--control",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read stopped and broken routes from this file each minute (see `claimwatch demo-traffic`).",
)
@service_options
def simulate(
    settings: Settings,
    minutes: int,
    seed: int,
    start: str | None,
    out: Path | None,
    speed: float,
    regression_at: int,
    corpus_change_at: str,
    bad_fraction: float,
    scale: float,
    control: Path | None,
) -> None:
    """Realistic verdict traffic (routes, diurnal volume, failure families, regressions, bad events)."""
    from services.client.simulate_run import SimulationRequest, TrafficControl, run_simulation

    try:
        request = SimulationRequest.build(minutes, seed, start, regression_at, corpus_change_at, bad_fraction, scale)
    except ValueError as exc:
        raise Abort(str(exc)) from None
    run_simulation(request, settings, out, speed, console, None if control is None else TrafficControl(control))


@main.command("demo-traffic")
@click.argument("action", type=click.Choice(["stop", "break", "resume"]))
@click.argument("route")
def demo_traffic(action: str, route: str) -> None:
    """Change the running demo's live traffic: stop a route (a verifier outage: route_silent pages), break it (its
    events under a contract version nobody reads: events_rejected pages) or resume it."""
    from services.client.demo import DemoError, running_demo
    from services.client.simulate_run import TrafficControl

    try:
        path, routes = running_demo()
    except DemoError as exc:
        raise Abort(str(exc)) from None
    if route not in routes:
        raise Abort(f"the demo has no route {route!r}; its routes are {', '.join(routes)}")
    control = TrafficControl(path)
    control.change(route, action)
    console.print(
        f"{route}: {'stopped' if action == 'stop' else 'broken' if action == 'break' else 'resumed'} "
        f"(stopped: {', '.join(sorted(control.stopped)) or 'none'}; broken: "
        f"{', '.join(sorted(control.broken)) or 'none'})."
    )
    if action != "resume":
        console.print(f"The page reaches `{cli_command()} alerts list` within about ten minutes.")


VERDICT_SHORT = {"unsupported": "UNS", "contradicted": "CTR", "overreach": "OVR", "stale": "STL", "no_source": "NOS"}
RATE_COLUMNS = [
    Column("ROUTE", lambda r: r["route"], kind="key"),
    Column("RATE", lambda r: pct(r["rate"]), kind="num"),
    Column(
        "EXPECTED",
        expected_text,
        kind="num",
        note="the drift detector's time-of-day expectation, as alerts carry it (learning, N h: under a day "
        "of history, the route's recent level; —: not evaluated yet)",
    ),
    Column(
        "DELTA",
        lambda r: figure(r["delta"], change=True),
        kind="num",
        note="rate minus expected; the order ranks the 95% interval's lower end minus expected (the rise the "
        "data is sure of)",
    ),
    Column("ALERT", lambda r: "firing" if r["firing_alerts"] else "", 1),
    Column("95% CI", lambda r: interval_text(*(r["interval"] or (None, None))), 2, "num"),
    Column("FAILED/CLAIMS", lambda r: f"{thousands(r['failed'])}/{thousands(r['claims'])}", 3, "num"),
    Column(
        "UNSAFE",
        lambda r: pct(r["unsafe_serve"]["rate"]),
        4,
        "num",
        note="unsafe serves: answers served with at least one failing claim, of the answers served",
    ),
    Column(
        "ABSTAIN OK|OVER",
        lambda r: (
            f"{pct(r['abstention_pair']['correct_abstention']['rate'])}|"
            f"{pct(r['abstention_pair']['over_refusal']['rate'])}"
        ),
        5,
        "num",
        note="the abstention pair: correct abstention (abstained, of the unanswerable questions) | over-refusal "
        "(abstained, of the answerable ones)",
    ),
    Column(
        "/".join(VERDICT_SHORT[v] for v in FAILED_VERDICT_ORDER),
        lambda r: "/".join(str(r["verdicts"][v]) for v in FAILED_VERDICT_ORDER),
        6,
        "num",
        note="failing claims by verdict: " + "/".join(FAILED_VERDICT_ORDER),
    ),
]


def slice_columns(dim: str) -> list[Column]:
    return [
        Column("ROUTE", lambda e: e["route"], kind="key"),
        Column(dim.upper(), lambda e: e["value"] or "(none)", kind="key"),
        Column("RATE", lambda e: pct(e["rate"]), kind="num"),
        Column("95% CI", lambda e: interval_text(*(e["interval"] or (None, None))), 1, "num"),
        Column("CLAIMS", lambda e: thousands(e["claims"]), 2, "num"),
        Column("EVENTS", lambda e: thousands(e["events"]), 3, "num"),
    ]


ESTIMATOR_NAMES = {"ppi": "PPI", "rogan_gladen": "Rogan–Gladen"}  # review.calibration_estimator
CALIBRATED_AT = [c.header for c in RATE_COLUMNS].index("95% CI") + 1  # the calibrated columns follow it
CALIBRATED_COLUMNS = [
    Column("CALIBRATED", lambda r: pct(r["calibrated"]["rate"]) if r.get("calibrated") else "—", kind="num"),
    Column(
        "CAL 95% CI",
        lambda r: (lambda c: interval_text(*c["interval"]) if c and c["interval"] else "—")(r.get("calibrated")),
        1,
        "num",
    ),
    Column(
        "SE/SP",
        lambda r: (
            lambda c: f"{c['sensitivity']:.2f}/{c['specificity']:.2f}" if c and c["sensitivity"] is not None else "—"
        )(r.get("calibrated")),
        2,
        "num",
    ),
    Column(
        "CALIBRATION",
        lambda r: (
            lambda c: (
                "no answers"
                if not c
                else "; ".join(
                    ([c["status"].upper()] if c["stale"] else [])
                    + [f"{c['labels']} labels, {ESTIMATOR_NAMES[c['estimator']]}"]
                    + ([f"pooled over {', '.join(c['label_routes'])}"] if c["pooled"] else [])
                    + ([c["estimator_note"]] if c["estimator_note"] and not c["pooled"] else [])
                    + c["reasons"]
                )
            )
        )(r.get("calibrated")),
        1,
        "name",
        min_width=24,
    ),
]


@main.command()
@click.option("--window", default="30m", show_default=True, help="5m, 30m, 90m, 24h, … or all.")
@click.option(
    "--sort",
    type=click.Choice(SORTS),
    default="priority",
    show_default=True,
    help=f"priority: {PRIORITY}; rate: highest rate first.",
)
@click.option(
    "--route",
    "matching",
    default=None,
    metavar="PATTERN",
    help="Only routes matching a glob (billing-*, */faq; * any run, ? one character), or without * or ? "
    "containing the text; without case.",
)
@paging_options("routes", ROUTES_PER_PAGE, MAX_ROUTES_PER_PAGE)
@click.option("--slices", "show_slices", is_flag=True, help="Also show slices by query type, stakes and versions.")
@click.option(
    "--calibrated",
    is_flag=True,
    help="Also the rate corrected for the verifier's errors against human "
    f"labels (`{cli_command()} review`), with its interval, and why it is stale if it is.",
)
@output_option
@service_options
def rates(
    settings: Settings,
    window: str,
    sort: str,
    matching: str | None,
    limit: int,
    offset: int,
    show_slices: bool,
    calibrated: bool,
    output: str,
) -> None:
    """Per-route claim-level hallucination rate beside its expected rate, with intervals and the verdict
    breakdown, worst (furthest above expected) first, a page at a time.

    EXPECTED is the drift detector's time-of-day expectation for the route and DELTA the rate minus it.
    UNSAFE: answers served with a failing claim, of those served. ABSTAIN OK|OVER: correct abstention
    (of unanswerable questions) | over-refusal (of answerable ones). -o json (or --json) prints a JSON
    array, the page (stable shape for scripts; --calibrated adds a `calibrated` field to each entry); -o wide
    every column. After the page, a line says how many routes follow and the command for the next page.
    """
    params = {
        "window": window,
        "sort": sort,
        "limit": limit,
        "offset": offset,
        **({"route": matching} if matching else {}),
        **({"calibrated": "true"} if calibrated else {}),
    }
    data, total = reach_page(settings, "/api/rates", params)
    slices = {}
    if show_slices:
        slices = reach(settings, "/api/slices", {"window": window})
    more = page_note(data, total, offset, limit, matching)
    if output == "json":
        print_json(data if not show_slices else {"routes": data, "slices": slices})
        if more:
            console.print(Text(more), soft_wrap=True)
        return
    if not data:
        console.print(
            more or f"no events stored yet: send some with `{cli_command()} produce` or `{cli_command()} simulate`"
        )
        return
    order = "firing first, then furthest above expected" if sort == "priority" else "highest first"
    print_table(
        RATE_COLUMNS[:CALIBRATED_AT] + CALIBRATED_COLUMNS + RATE_COLUMNS[CALIBRATED_AT:]
        if calibrated
        else RATE_COLUMNS,
        data,
        output,
        title=f"Claim-level hallucination rate, {window}: {order}",
    )
    for line in sampling_notes(data):
        out.print(Text(line, style="dim"), soft_wrap=True)
    if more:
        out.print(Text(more), soft_wrap=True)
    for dim, entries in slices.items():
        out.print()
        print_table(slice_columns(dim), entries, output, title=f"by {dim} (worst first)")


def page_note(
    shown: list, total: int | None, offset: int, limit: int, matching: str | None, noun: str = "route"
) -> str | None:
    """Where the page lies in the list (of routes, or ``noun``s) and the command for the next one; None when the page
    is the whole list (or the API does not say how long it is)."""
    if total is None or (offset == 0 and len(shown) == total):
        return None
    routes = f"{total:,} {noun}{'s' * (total != 1)}" + (f" matching {matching!r}" if matching else "")
    if not shown:
        return f"no {noun}s from {offset + 1:,} on: the list holds {routes}"
    after = total - offset - len(shown)
    where = f"{noun}s {offset + 1:,}–{offset + len(shown):,} of {routes}"
    if after <= 0:
        return where
    return f"{where}; {after:,} more, the next {min(after, limit):,}: {command_line(offset=offset + limit)}"


def sampling_notes(entries: list[dict]) -> list[str]:
    """A line for each route whose answers were verified on a sample: its rate is weighted."""
    return [
        f"{e['route']}: {e['sampled_events']:,} of {e['events']:,} answers verified on a sample"
        f"{' (mixed with fully verified ones)' if e['sampling'] == 'mixed' else ''}; RATE weighs each by "
        f"1 / its sampling.rate and stands for {e['weighted']['events']:,.0f} answers"
        for e in entries
        if e.get("sampling", "none") != "none"
    ]


DLQ_COLUMNS = [
    Column("REASON", lambda r: r["reason"], kind="key"),
    Column("COUNT", lambda r: str(r["count"]), kind="num"),
    Column(
        "SAMPLE",
        lambda r: (lambda s: f"{s.get('reason', '')} [{s.get('source', '')}]" if s else "")(
            r["samples"][0] if r["samples"] else {}
        ),
        1,
        "name",
    ),
]


@main.command()
@click.option("--samples", default=1, show_default=True, help="Samples to show per reason.")
@click.option(
    "--route", default=None, help="Only dead letters of this route (their message key, else their route field)."
)
@output_option
@service_options
def dlq(settings: Settings, samples: int, route: str | None, output: str) -> None:
    """Dead-letter counts per reason, with a sample of each."""

    params = {"samples": samples} if route is None else {"samples": samples, "route": route}
    data = reach(settings, "/api/dlq", params)
    if output == "json":
        print_json(data)
        return
    on = "" if route is None else f" on route {route}"
    print_table(
        DLQ_COLUMNS, data, output, title=f"Dead-lettered messages{on} by reason", empty=f"no dead-lettered messages{on}"
    )
