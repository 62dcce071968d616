"""`claimwatch review`: sample claims, label them blind (interactively or with flags), progress, agreement, and
how many labels each route still needs."""

from __future__ import annotations

import shlex
import sys

import click

from services.app.cli.base import by_option, console, main, out, print_json, reach, service_options, who
from services.app.cli.tables import Column, at, output_option, print_table
from services.app.settings import Settings
from services.core.clock import utcnow
from services.core.command import cli_command
from services.core.numbers import interval_text, pct, thousands

LABELS = ("supported", "contradicted", "unsupported", "overreach", "stale")
KEYS = {"s": "supported", "c": "contradicted", "u": "unsupported", "o": "overreach", "t": "stale"}  # one key a label


def _json(fn):
    from services.api.serialise import as_json

    return lambda c: as_json(fn(c))


def reviewer_option(fn):
    return click.option(
        "--reviewer", envvar="CLAIMWATCH_REVIEWER", required=True, help="Who labels (or $CLAIMWATCH_REVIEWER)."
    )(fn)


@main.group()
def review() -> None:
    """Human review of sampled claims: blind labels, agreement, and the calibration behind `rates --calibrated`."""


@review.command("sample")
@click.option("--window", default="24h", show_default=True, help="Event-time window to sample from, or all.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**32 - 1))
@click.option("--eval", "include_eval", is_flag=True, help="Also queue the claims of approved eval items.")
@service_options
def review_sample(settings: Settings, window: str, seed: int, include_eval: bool) -> None:
    """Queue production claims, stratified by route, verdict and issue, within today's budget (review.daily_budget)."""
    data = reach(
        settings,
        "/api/review/sample",
        {},
        method="POST",
        body={"window": window, "seed": seed, "include_eval": include_eval},
    )
    console.print(
        f"queued {data['queued']} claims from {len(data['strata'])} strata; "
        f"{data['budget_left']} left of today's budget"
    )


def show_assignment(slot: dict) -> None:
    out.print(
        f"slot {slot['slot']}  (route {slot['route']}, held until {at(slot['expires_at'], utcnow())})",
        markup=False,
        highlight=False,
    )
    out.print("question: " + slot["question"], markup=False, highlight=False)
    out.print("answer:   " + slot["answer_excerpt"], markup=False, highlight=False)
    for chunk in slot["chunks"]:
        out.print(f"  [{chunk['chunk_id']}] {chunk['text']}", markup=False, highlight=False)
    out.print("claim:    " + slot["claim"], markup=False, highlight=False)


def show_revealed(done: dict) -> None:
    out.print(
        f"labelled {done['claim_key']} {done['label']}"
        + (f" (span from {done['chunk_id']})" if done["chunk_id"] else ""),
        markup=False,
        highlight=False,
    )
    out.print(
        f"verifier said: {done['verifier_verdict']}"
        + (f" — span: {done['verifier_span']}" if done["verifier_span"] else ""),
        markup=False,
        highlight=False,
    )
    for other in done["others"]:
        out.print(f"{other['role']} {other['reviewer']}: {other['label']}", markup=False, highlight=False)
    out.print(f"settled: {done['settled'] or 'not yet'}", markup=False, highlight=False)
    if done["exposed_by"]:
        out.print(
            f"not blind: the verdict was shown by {' and '.join(done['exposed_by'])} while you held this "
            "claim, so this label is kept but not counted; it goes to another reviewer",
            markup=False,
            highlight=False,
        )


def send_label(settings: Settings, slot: str, reviewer: str, label: str, span: str) -> dict:
    return reach(
        settings,
        f"/api/review/{slot}/label",
        {},
        method="POST",
        body={"reviewer": reviewer, "label": label, "span": span},
    )


@review.command("next")
@reviewer_option
@click.option("--label", default=None, help=f"Label at once: {', '.join(LABELS)}.")
@click.option("--span", default="", help="Quoted verbatim from one of the chunks shown.")
@click.option("--json", "as_json", is_flag=True, help="Print the reserved slot as JSON and stop.")
@service_options
def review_next(settings: Settings, reviewer: str, label: str | None, span: str, as_json: bool) -> None:
    """Reserve the next claim and show its question, answer excerpt, retrieved chunks and the claim.

    With --label it is labelled at once; at a terminal it asks; otherwise label it later with
    `claimwatch review label SLOT --label ...`.
    """
    slot = reach(settings, "/api/review/next", {}, method="POST", body={"reviewer": reviewer})
    if as_json:
        print_json(slot)
        return
    show_assignment(slot)
    if label is None and sys.stdin.isatty():
        keys = " ".join(f"{k}={v}" for k, v in KEYS.items())
        key = click.prompt(f"label ({keys})", type=click.Choice(sorted(KEYS) + list(LABELS)), show_choices=False)
        label = KEYS.get(key, key)
        span = click.prompt("span (blank for none)", default="", show_default=False)
    if label is None:
        console.print(
            f"label it with: {cli_command()} review label {slot['slot']} --reviewer {shlex.quote(reviewer)} "
            "--label LABEL [--span TEXT]",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return
    show_revealed(send_label(settings, slot["slot"], reviewer, label, span))


@review.command("label")
@click.argument("slot")
@reviewer_option
@click.option("--label", required=True, help=f"One of {', '.join(LABELS)}.")
@click.option("--span", default="", help="Quoted verbatim from one of the claim's chunks.")
@service_options
def review_label(settings: Settings, slot: str, reviewer: str, label: str, span: str) -> None:
    """Label a reserved slot; then see the verifier's verdict and the other labels."""
    show_revealed(send_label(settings, slot, reviewer, label, span))


@review.command("adjudicate")
@click.argument("claim_key")
@by_option("The adjudicator: the holder of a named token, who did not label the claim.")
@click.option("--label", required=True, help=f"One of {', '.join(LABELS)}.")
@click.option("--span", default="")
@service_options
def review_adjudicate(settings: Settings, claim_key: str, by: str | None, label: str, span: str) -> None:
    """Settle a disputed claim (see `claimwatch review agreement`)."""
    adjudicator = who(settings, by)
    show_revealed(
        reach(
            settings,
            f"/api/review/claims/{claim_key}/adjudicate",
            {},
            method="POST",
            body={"adjudicator": adjudicator, "label": label, "span": span},
        )
    )


REVIEWER_COLUMNS = [
    Column("REVIEWER", lambda r: r["reviewer"], kind="key"),
    Column("ROLE", lambda r: r["role"]),
    Column("LABELS", lambda r: str(r["labels"]), kind="num"),
    Column(
        "NOT BLIND",
        lambda r: str(r["exposed"]),
        kind="num",
        note="labels made after a read showed the verdict while the reviewer held the claim: kept, not counted",
    ),
    Column("LAST", lambda r: r["last"], 1),
]
STRATUM_COLUMNS = [
    Column("ROUTE", lambda s: s["route"], kind="key"),
    Column("VERDICT", lambda s: s["verdict"]),
    Column("SCORE", lambda s: s.get("score_band") or "—", 1, "num"),
    Column("ISSUE", lambda s: s["issue_id"] or "—", 2, "id"),
    Column("CLAIMS", lambda s: str(s["claims"]), kind="num"),
    Column("LABELLED/SLOTS", lambda s: f"{s['labelled']}/{s['slots']}", kind="num"),
    Column("COMPLETE", lambda s: str(s["complete"]), 1, "num"),
]


@review.command("progress")
@output_option
@service_options
def review_progress(settings: Settings, output: str) -> None:
    """Labels per reviewer, and per stratum how many slots are labelled."""
    data = reach(settings, "/api/review/progress", {})
    if output == "json":
        print_json(data)
        return
    print_table(REVIEWER_COLUMNS, data["reviewers"], output, title="Labels per reviewer", empty="no labels yet")
    out.print()
    print_table(
        STRATUM_COLUMNS,
        data["strata"],
        output,
        title="Queue per stratum",
        empty=f"nothing queued: run `{cli_command()} review sample`",
    )


def _figure(figure: dict | None) -> str:
    """A figure with its interval (kappa, ECE, AUROC): value [lo, hi] (n=items)."""
    if not figure or figure.get("value") is None:
        return "—"
    band = (
        f" [{figure['lo']:.2f}, {figure['hi']:.2f}]" if figure.get("lo") is not None and not figure.get("note") else ""
    )
    return f"{figure['value']:.2f}{band} (n={figure['items']})"


@review.command("agreement")
@output_option
@service_options
def review_agreement(settings: Settings, output: str) -> None:
    """Human-human kappa (the guide's ceiling) and verifier-human kappa per route; disputes to adjudicate."""
    data = reach(settings, "/api/review/agreement", {})
    if output == "json":
        print_json(data)
        return
    rows = [data["overall"], *data["routes"]]
    print_table(
        [
            Column("ROUTE", lambda r: r["route"], kind="key"),
            Column(
                "HUMAN-HUMAN KAPPA",
                lambda r: (f"{r['human']['method']} " + _figure(r["human"]["kappa"])) if r["human"] else "—",
                kind="num",
            ),
            Column(
                "VERIFIER-HUMAN KAPPA", lambda r: _figure(r["verifier"]["kappa"]) if r["verifier"] else "—", kind="num"
            ),
        ],
        rows,
        output,
        title="Agreement (95% intervals resample claims)",
    )
    _print_confidence(data["confidence"], output)
    if data["disagreements"]:
        out.print()
        print_table(
            [
                Column("CLAIM", lambda d: d["claim_key"], kind="id"),
                Column("ROUTE", lambda d: d["route"], kind="key"),
                Column("LABELS", lambda d: ", ".join(f"{who}: {label}" for who, label in d["labels"]), kind="name"),
            ],
            data["disagreements"],
            output,
            title=f"Disputed: settle with `{cli_command()} review adjudicate`",
        )


def _print_confidence(checks: list[dict], output: str) -> None:
    """The verifier's score against the labels: per version and route, then each version's reliability diagram."""
    if not checks:
        return
    out.print()
    print_table(
        [
            Column("VERIFIER", lambda c: c["verifier_version"], kind="key"),
            Column("ROUTE", lambda c: c["route"], kind="key"),
            Column("LABELS", lambda c: thousands(c["labels"]), kind="num"),
            Column("MEAN SCORE", lambda c: f"{c['mean_score']:.2f}", kind="num", priority=2),
            Column("AGREEMENT", lambda c: pct(c["agreement"]), kind="num", priority=2),
            Column("ECE", lambda c: _figure(c["ece"]), kind="num"),
            Column("AUROC", lambda c: _figure(c["auroc"]), kind="num", priority=1),
        ],
        checks,
        output,
        title="The verifier's confidence against settled labels (ECE: expected calibration error; AUROC: how "
        "well its score tells its right verdicts from its wrong; 95% intervals resample labels)",
    )
    for check in (c for c in checks if c["route"] == "all"):
        out.print()
        print_table(
            [
                Column("SCORE", lambda b: f"{b['low']:.1f}-{b['high']:.1f}", kind="key"),
                Column("LABELS", lambda b: thousands(b["labels"]), kind="num"),
                Column("MEAN SCORE", lambda b: f"{b['mean_score']:.2f}", kind="num"),
                Column("AGREED", lambda b: f"{pct(b['agreement'])} ({interval_text(b['lo'], b['hi'])})", kind="num"),
            ],
            check["bins"],
            output,
            title=f"Reliability of verifier {check['verifier_version']}'s score, every route: a calibrated score "
            "agrees as often as it says",
        )


PLAN_COLUMNS = [
    Column("ROUTE", lambda p: p["route"], kind="key"),
    Column(
        "MORE",
        lambda p: "—" if p["more"] is None else str(p["more"]),
        kind="num",
        note="settled labels still needed (—: the window's own noise is wider than asked)",
    ),
    Column(
        "FLAGGED",
        lambda p: str(p["flagged"]),
        kind="num",
        note="of them, claims the verifier flagged (any verdict but supported)",
    ),
    Column("PASSED", lambda p: str(p["passed"]), kind="num", note="and claims it passed (supported)"),
    Column(
        "WIDTH NOW",
        lambda p: "—" if p["width"] is None else f"{100 * p['width']:.1f} pts",
        1,
        "num",
        note="the calibrated 95% interval's width now",
    ),
    Column("LABELS", lambda p: str(p["labels"]), 2, "num", note="the route's own settled labels now"),
    Column("NOTE", lambda p: p["note"], 3, "name", min_width=20),
]


@review.command("plan")
@click.option(
    "--width",
    type=click.FloatRange(0, 100, min_open=True, max_open=True),
    default=None,
    help="Width to reach, in points of the 95% interval (default review.plan_width, 3).",
)
@click.option("--window", default="24h", show_default=True, help="The calibrated rates' window: 5m, 24h, 7d, … or all.")
@output_option
@service_options
def review_plan(settings: Settings, width: float | None, window: str, output: str) -> None:
    """How many more settled labels bring each route's calibrated interval under a width, and how to split them
    between the claims the verifier flagged and those it passed (Neyman allocation); most needed first.

    The daily sample (`claimwatch review sample` and the leader's timer) follows this plan at review.plan_width.
    -o json (or --json) prints the API's JSON.
    """
    share = None if width is None else width / 100
    params = {"window": window, **({"width": share} if share is not None else {})}
    data = reach(settings, "/api/review/plan", params)
    if output == "json":
        print_json(data)
        return
    target = data[0]["target"] if data else share or settings.review.plan_width
    print_table(
        PLAN_COLUMNS,
        data,
        output,
        title=f"Labels to bring each route's calibrated interval under "
        f"{100 * target:g} pts ({window}), most needed first",
        empty=f"no traffic in the last {window}",
    )
