"""`claimwatch` commands. Alerts: list, show, ack, silence, and the backtest (the rules: cli/rules.py)."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import click

from services.alerts.explain.figures import (
    REFUSED_REMEDY,
    counted,
    dlq_command,
    figure,
    hallucination_sentence,
    other_sources,
    refused_sentence,
    served_sentence,
)
from services.alerts.lifecycle.inhibition import inhibitor_text
from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    AGREEMENT_KIND,
    CARDINALITY_KIND,
    DRIFT_KIND,
    MIX_KIND,
    MONITOR_KINDS,
    REJECTED_KIND,
    SILENT_KIND,
    SLO_KIND,
)
from services.alerts.oncall.filters import STATE_FILTERS, AlertFilter
from services.alerts.oncall.rules import RULE_KINDS
from services.app.cli.base import (
    Abort,
    by_option,
    console,
    main,
    out,
    print_json,
    reach,
    service_options,
    text_or_json,
    who,
)
from services.app.cli.tables import (
    Column,
    Command,
    ago,
    labelled,
    output_option,
    print_labelled,
    print_markdown,
    print_table,
    terminal_width,
)
from services.app.cli.tables import (
    at as _at,
)
from services.app.settings import Settings, SettingsError, load_settings
from services.core.clock import utcnow
from services.core.command import cli_command
from services.core.numbers import interval_text, pct, pts


@main.group()
def alerts() -> None:
    """Alerts: list, show, ack, silence and unsilence, and the rules they follow."""


KINDS = {
    DRIFT_KIND: "regression",
    MIX_KIND: "mix shift",
    AGREEMENT_KIND: "verifier agreement",
    SILENT_KIND: "route silent",
    REJECTED_KIND: "events rejected",
    ABSTENTION_KIND: "abstention rise",
    CARDINALITY_KIND: "route cardinality",
    SLO_KIND: "SLO burn",
}
KIND_TEXT = {
    DRIFT_KIND: "regression",
    MIX_KIND: "mix shift — a change in the mix of questions; warning, does not page",
    AGREEMENT_KIND: "verifier agreement — the verifier agrees with human labels less than it did; warning",
    SILENT_KIND: "route silent — its events fell far below what its time of day predicts; pages",
    REJECTED_KIND: "events rejected — more of its events are dead-lettered (broke the contract); pages",
    ABSTENTION_KIND: "abstention rise — it abstains on more answers while serving fewer; a warning "
    "unless configured critical",
    CARDINALITY_KIND: "route cardinality — events of new routes are refused over routes.max_active; pages",
    SLO_KIND: "SLO burn — an SLO's error budget burns faster than its window can afford; page or ticket",
}
# Kinds measured against an expectation of their own (a rule's threshold, the route's traffic), with no baseline.
OWN_EXPECTATION = (*MONITOR_KINDS, SLO_KIND)
SUSPECTS = 3


def kind_of(a: dict) -> str:
    kind = a.get("kind") or ""
    return KINDS.get(kind, kind)


def expected_of(a: dict) -> float | None:
    """What the rise is measured from: the expectation (None while the route has too little history for one)."""
    expected: float | None = a.get("expected")
    return expected


def fig(a: dict, x: float | None, change: bool = False) -> str:
    """One of the alert's figures in its unit: ``12.5%``/``+2.0 pts`` or ``41.0/min``/``-38.2/min``."""
    return figure(x, a.get("unit"), change)


def alert_columns(now) -> list[Column]:
    return [
        Column("ALERT", lambda a: a["alert_id"], kind="id"),
        Column("ROUTE", lambda a: a["route"], kind="key"),
        Column("STATE", lambda a: a.get("state_text") or a["state"]),  # firing·acked, cleared: never dropped
        Column("KIND", kind_of, 1),
        Column(
            "RATE",
            lambda a: fig(a, a["rate"]),
            2,
            "num",
            note="over the alert's own window at its latest evaluation, not over `rates --window`; "
            "`alerts show ID` gives the window",
        ),
        Column("EXPECTED", lambda a: fig(a, expected_of(a)), 2, "num"),  # dropped before RATE, RATE before DELTA
        Column("DELTA", lambda a: fig(a, a["delta"], change=True), 1, "num"),
        Column("SINCE", lambda a: ago(a["starts_at"] or a["pending_since"], now), 3, "num"),
        Column("SEVERITY", lambda a: a["severity"], 3),
        Column("ACKED BY", lambda a: a["acked_by"] or "", 4, "name", lines=1, min_width=8),
        Column("SILENCED BY", lambda a: " ".join(a["silenced_by"]), 5, "id"),
        Column("INHIBITED BY", lambda a: " ".join(a.get("inhibited_by") or ()), 5, "id"),
        Column("TEAM", lambda a: a.get("team") or "", 7, "name", lines=1, min_width=6),
        Column("BASELINE", lambda a: fig(a, a["baseline"]), 6, "num"),
    ]


@alerts.command("list")
@click.option("--state", type=click.Choice(STATE_FILTERS), default=None, help="active: pending or firing.")
@click.option("--kind", type=click.Choice(RULE_KINDS), default=None, help="The rule's kind (`alerts rules`).")
@click.option("--team", default=None, help="The owning team ([[owners]] rules; the TEAM column of -o wide).")
@click.option("--route", default=None)
@output_option
@service_options
def alerts_list(
    settings: Settings, state: str | None, kind: str | None, team: str | None, route: str | None, output: str
) -> None:
    """Alerts: firing, then pending, then resolved, newest first; filtered by state, kind, team and route
    (-o wide: every column; -o json: the API's JSON)."""
    params = {k: v for k, v in {"state": state, "kind": kind, "team": team, "route": route}.items() if v}
    data = reach(settings, "/api/alerts", params)
    if output == "json":
        print_json(data)
        return
    filtered = AlertFilter(**params).described()
    print_table(alert_columns(utcnow()), data, output, empty="no alerts" + (f" match {filtered}" if params else ""))


@alerts.command("show")
@click.argument("alert_id")
@text_or_json
@service_options
def alerts_show(settings: Settings, alert_id: str, output: str, as_json: bool) -> None:
    """One alert: its rate against the expectation, the rise split into mix and rate, suspects, transitions."""
    data = reach(settings, f"/api/alerts/{alert_id}", {})
    if output == "json" or as_json:
        print_json(data)
        return
    width = terminal_width()
    print_labelled(alert_text(data, utcnow(), width))
    if data.get("runbook"):  # input-health kinds: what to check first, with the exact commands
        out.print()
        print_markdown(data["runbook"], width)


# -- alerts show: label, value --------------------------------------------------
def _interval(i: list | None) -> str:
    return "" if not i else f" (95% interval {interval_text(*i)})"


def _state(a: dict, now: datetime) -> str:
    if a["state"] == "resolved" and not a["starts_at"]:
        return f"cleared at {_at(a['ends_at'], now)}: it ended pending and never fired"
    if a["state"] == "resolved":
        return f"resolved at {_at(a['ends_at'], now)}, fired at {_at(a['starts_at'], now)}"
    if a["state"] == "firing":
        return f"firing since {_at(a['starts_at'], now)}"
    return f"pending since {_at(a['pending_since'], now)}"


def _rise(a: dict) -> str:
    if a["kind"] == SLO_KIND:
        return f"{fig(a, a['delta'], change=True)} above the rule's threshold"
    if a["kind"] in MONITOR_KINDS:
        return f"{fig(a, a['delta'], change=True)} against the expectation"
    mix, rate = a.get("mix_effect"), a.get("rate_effect")
    if mix is None or rate is None:
        return f"{pts(a['delta'])} over the expectation"
    return (
        f"{pts(a['delta'])} over the expectation = mix effect {pts(mix)} / rate effect {pts(rate)} (mix: more "
        "of the questions that fail more often; rate: worse on the same questions)"
    )


def _calibrated(a: dict) -> str:
    """Whether the rise also holds on the rate corrected for the verifier's errors (alerts show only)."""
    c = a.get("calibrated")
    if not c:
        return ""
    if c["holds"] is None:
        if c.get("status") == "no labels yet":
            return f"unknown: no human labels yet on {a['route']}"
        return f"unknown: the calibration is stale ({'; '.join(c['reasons'])})"
    figures = (
        f"{pct(c['rate'])} vs {pct(c['expected'])} expected ({pts(c['delta'])}; Se {c['sensitivity']:.2f}, "
        f"Sp {c['specificity']:.2f} from {c['labels']} labels)"
    )
    if c["holds"]:
        return f"holds: {figures}"
    return (
        f"does not hold: {figures}; the rise is within the verifier's false-positive floor "
        f"{pct(c['false_positive_floor'])}"
    )


def _suspects(a: dict) -> list[str]:
    found = a.get("suspect_changes") or []

    def rates(s: dict) -> str:
        if s.get("rate_before") is None and s.get("rate_after") is None:
            return ""
        return f", rate {pct(s.get('rate_before'))} -> {pct(s.get('rate_after'))}"

    def shares(s: dict) -> str:
        if s.get("share_before") is None or s.get("share_after") is None:
            return ""
        return f", share of answers {pct(s['share_before'], 0)} -> {pct(s['share_after'], 0)}"

    lines = [
        f"{n}. {s.get('key')}={s.get('value')} ({s.get('kind')} change{shares(s)}){rates(s)}"
        + (f"; {s['note']}" if s.get("note") else "")
        for n, s in enumerate(found[:SUSPECTS], 1)
    ]
    return lines + [f"+{len(found) - SUSPECTS} more (-o json)"] * (len(found) > SUSPECTS)


def _issues(e: dict | None) -> list[str]:
    """What accounts for the failing claims above the expectation, as on the alert's page: each part's excess
    claims first, then its share of the route's excess (shares add up to 100%; a part can be negative)."""
    if not e:
        return []
    status = [f"still filling in: {e['status']}"] if e.get("status") else []  # the window is being clustered
    if (e.get("excess") or 0) <= 0:
        return status
    parts = [
        *(e.get("issues") or []),
        *([e["other_issues"]] if e.get("other_issues") else []),
        e.get("unclustered") or {},
    ]
    ids = lambda p: f" ({p['issue_id']})" if p.get("issue_id") else ""  # noqa: E731
    why = (
        f"{e['failed']:,} failing claims, {e['expected']:,.0f} expected: {e['excess']:,.0f} excess. Each part: "
        "its failing claims, those beyond its part of the expected, and its share of the excess (negative: fewer "
        "than expected)"
    )
    return (
        status
        + [why]
        + [
            f"{p.get('failed', 0):,} failing, {_claims(p.get('contribution', 0))} beyond expected "
            f"({_signed_pct(p.get('share'))}) {p.get('name') or 'unclustered'}{ids(p)}"
            for p in parts
        ]
    )


def top_issue(a: dict) -> str | None:
    """The issue behind most of the alert's excess failing claims (None while none explains it)."""
    return next((p["issue_id"] for p in (a.get("explanation") or {}).get("issues") or [] if p.get("issue_id")), None)


def _top_runbook(a: dict) -> str:
    """The command for the runbook of the issue behind most of the excess, its traces from this alert's window."""
    top = top_issue(a)
    return Command(f"{cli_command()} runbook {top} --alert {a['alert_id']}") if top else ""


def _claims(n: float) -> str:
    return f"{n:+,.0f} claim" + ("" if round(abs(n)) == 1 else "s")


def _signed_pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%"


def _transition(t: dict, now: datetime, a: dict) -> str:
    expected = t.get("baseline") if t.get("expected") is None else t["expected"]
    f = lambda x, change=False: figure(x, t.get("unit") or a.get("unit"), change)  # noqa: E731  (older records: the alert's)
    return (
        f"{_at(t.get('at'), now, relative=False)} {t.get('state')}: rate {f(t.get('rate'))}, "
        f"expected {f(expected)}, {'change' if a['kind'] in OWN_EXPECTATION else 'rise'} {f(t.get('delta'), True)}"
    )


def _count(x: object) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _input_fields(a: dict) -> list[tuple[str, str | list[str]]]:
    """What the input-health kinds add: received against expected events, the dead letters, the served share."""
    d = a.get("details") or {}
    if a["kind"] == SILENT_KIND:
        return [
            (
                "received",
                f"{_count(d.get('received'))} events in {a['window']} min; {_count(d.get('expected_events'))} expected",
            )
        ]
    if a["kind"] == REJECTED_KIND:
        sample = " ".join(
            x for x in (d.get("sample_reason") or "", f"at {d['sample_source']}" if d.get("sample_source") else "") if x
        )
        return [
            ("rejected", f"{_count(d.get('rejected'))} of {_count(d.get('received'))} events dead-lettered"),
            ("top rule", f"{d['top_rule']} ({_count(d.get('top_rule_count'))} events)" if d.get("top_rule") else ""),
            ("sample", sample),
            ("list them", Command(dlq_command(a["route"], cli=cli_command()))),
        ]
    if a["kind"] == ABSTENTION_KIND:
        return [("served", served_sentence(d)), ("meanwhile", hallucination_sentence(d))]
    if a["kind"] == CARDINALITY_KIND:
        return [
            ("refused", refused_sentence(d)),
            ("also from", other_sources(d)),
            ("what to do", REFUSED_REMEDY),
            ("list them", Command(dlq_command("", cli=cli_command()))),
        ]
    return []


def _inhibited(a: dict) -> str:
    """The firing alerts that inhibit it (notify.inhibit_rules): it is not notified while they fire."""
    found = [inhibitor_text(i["alert_id"], i["kind"], i["route"]) for i in a.get("inhibitors") or ()]
    return f"by {'; '.join(found)}: not notified while it fires" if found else ""


def alert_fields(a: dict, now: datetime) -> list[tuple[str, str | list[str]]]:
    """What `alerts show` prints, in order: (label, value or lines); empty values are left out."""
    basis = a.get("expected_basis") or ("the route's history" if a["kind"] in OWN_EXPECTATION else "the trailing level")
    expected = "—" if a.get("expected") is None else f"{fig(a, a['expected'])}: {basis}"
    acked = f"by {a['acked_by']} at {_at(a['acked_at'], now)}" + (f": {a['ack_note']}" if a.get("ack_note") else "")
    share = (a.get("unit") or "share") == "share"
    own_baseline = a["kind"] not in OWN_EXPECTATION  # an input-health alert's baseline is its expectation
    fields = [
        ("alert", a["alert_id"]),
        ("route", a["route"]),
        ("kind", KIND_TEXT.get(a["kind"], a["kind"])),
        ("state", _state(a, now)),
        ("severity", a["severity"]),
        ("acked", acked if a["acked"] else "no"),
        ("silenced", f"by {', '.join(a['silenced_by'])}" if a["silenced_by"] else "no"),
        ("inhibited", _inhibited(a)),
        ("rate", fig(a, a["rate"]) + (_interval(a["rate_interval"]) if share else "")),
        ("expected", expected),
        (
            "baseline",
            f"{fig(a, a['baseline'])}{_interval(a['baseline_interval'])}, the trailing level" if own_baseline else "",
        ),
        ("rise" if own_baseline else "change", _rise(a)),
        *_input_fields(a),
        ("calibrated", _calibrated(a)),
        ("mix slice", a.get("mix_slice") or ""),
        ("onset", _at(a["onset"], now) if a["onset"] else ""),
        ("window", f"{a['window']} min, {a['claims']:,} {counted(a['kind'])}"),
        ("driven by", f"{a['driving_verdict']} claims" if a["driving_verdict"] else ""),
        ("suspects", _suspects(a)),
        ("issues", _issues(a.get("explanation"))),
        ("runbook", _top_runbook(a)),
        ("transitions", [_transition(t, now, a) for t in a.get("transitions") or []]),
    ]
    return [(label, value) for label, value in fields if value]


def alert_text(a: dict, now: datetime, width: int = 80) -> list[str]:
    """The alert as labelled lines at most ``width`` wide (values wrap at spaces; ids and routes stay whole)."""
    return labelled(alert_fields(a, now), width)


@alerts.command("ack")
@click.argument("alert_id")
@by_option("Who acknowledges.")
@click.option("--note", default="", help="What you are doing about it.")
@service_options
def alerts_ack(settings: Settings, alert_id: str, by: str | None, note: str) -> None:
    """Acknowledge an alert (an unknown id is an error)."""
    by = who(settings, by)
    data = reach(settings, f"/api/alerts/{alert_id}/ack", {}, method="POST", body={"by": by, "note": note})
    console.print(f"acked {data['alert_id']} ({data['route']}, {data['state']}) by {data['acked_by']}")


@main.command()
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--alerts-out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option(
    "--rates-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every route's rates over the whole file (the shape of `rates --window all -o json`).",
)
@click.option(
    "--config", "config_file", type=click.Path(dir_okay=False), default=None, help="TOML settings (drift section)."
)
def backtest(events: Path, alerts_out: Path, rates_out: Path | None, config_file: str | None) -> None:
    """Replay a JSONL file through the live rate and detector code in event time; write alert transitions
    (and, with --rates-out, the rates)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from services.app.compose import run_backtest

    try:
        settings = load_settings(config_file, os.environ, {})
    except SettingsError as exc:
        raise Abort(str(exc)) from None
    for option, path in (("--alerts-out", alerts_out), ("--rates-out", rates_out)):
        if path is not None and not path.parent.exists():
            raise Abort(f"{option}: directory {path.parent} does not exist")
    size = events.stat().st_size
    with Progress(
        TextColumn("backtest"),
        BarColumn(),
        TextColumn("{task.completed:,} events"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("events", total=None)
        summary = run_backtest(
            events, alerts_out, settings, progress=lambda n: progress.advance(task, n), rates_out=rates_out
        )
    console.print(
        f"{summary.events:,} events ({summary.rejected:,} invalid and {summary.duplicates:,} duplicates skipped), "
        f"{summary.minutes:,} minutes evaluated, "
        f"{summary.transitions} alert transitions -> {alerts_out}"
        + (f", rates -> {rates_out}" if rates_out else "")
        + f"  [{size / 1e6:.0f} MB]"
    )
